"""`rules check`: every diagnostic of a rule directory, never a traceback."""
from __future__ import annotations

from dataclasses import dataclass

from .compiler import compile_ruleset
from .diagnostics import Diagnostic, DiagnosticSink
from .errors import KnowledgeError, Location, RuleFileError
from .knowledge import load_knowledge
from .paths import bundled


@dataclass(frozen=True)
class CheckReport:
    diagnostics: tuple[Diagnostic, ...]

    @property
    def errors(self):
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self):
        return [d for d in self.diagnostics if d.severity == "warning"]

    def ok(self, strict: bool = False) -> bool:
        return not self.errors and not (strict and self.warnings)

    def summary(self) -> str:
        return f"{len(self.errors)} error(s), {len(self.warnings)} warning(s)"


def check_directory(rules_dir=None, knowledge_dir=None) -> CheckReport:
    """Check a rule directory; knowledge problems are reported as diagnostics too."""
    try:
        knowledge = load_knowledge(knowledge_dir or bundled("knowledge"))
    except KnowledgeError as exc:
        return CheckReport((Diagnostic(exc.location or Location(str(knowledge_dir)), "E001", exc.message),))
    sink = DiagnosticSink()
    try:
        compile_ruleset(rules_dir or bundled("rules"), knowledge, sink)
    except RuleFileError:
        pass
    except RecursionError:
        sink.error(Location(str(rules_dir or "rules")), "E003", "a value nests too deeply")
    return CheckReport(tuple(sink.sorted()))
