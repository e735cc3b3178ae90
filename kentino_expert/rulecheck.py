"""`rules check`: every diagnostic of a rule directory, never a traceback."""
from __future__ import annotations

from dataclasses import dataclass

from .ruleset.compiler import compile_ruleset
from .ruleset.diagnostics import Diagnostic, DiagnosticSink
from .errors import KnowledgeError, Location, RuleFileError
from .domain.catalog import load_knowledge
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


def check_directory(rules_dir=None, knowledge_dir=None, sandbox=None, keep: list | None = None) -> CheckReport:
    """Check a rule directory; knowledge problems are reported as diagnostics too.

    With `sandbox` (sandbox.Limits) the check runs in a child process that also builds the engine
    and answers every rule's example, so a rule set the engine hangs or crashes on is an E207
    error, not a hung check. `keep` receives (ruleset, knowledge) when the rule set compiles.
    """
    if sandbox is not None:
        from .sandbox import trial_load
        return CheckReport(tuple(trial_load(rules_dir, knowledge_dir, sandbox).diagnostics))
    try:
        knowledge = load_knowledge(knowledge_dir or bundled("knowledge"))
    except KnowledgeError as exc:
        return CheckReport((Diagnostic(exc.location or Location(str(knowledge_dir)), "E001", exc.message),))
    sink = DiagnosticSink()
    try:
        ruleset = compile_ruleset(rules_dir or bundled("rules"), knowledge, sink)
        if keep is not None:
            keep.append((ruleset, knowledge))
    except RuleFileError:
        pass
    except RecursionError:
        sink.error(Location(str(rules_dir or "rules")), "E003", "a value nests too deeply")
    return CheckReport(tuple(sink.sorted()))
