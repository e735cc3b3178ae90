"""`rules check` in this process: every diagnostic of a rule directory, never a traceback.

The rules are checked for the backend that will run them (durable by default): its reserved names and
the shapes it cannot run are errors too. sandbox.py runs this in a child process, then builds the engine.
"""
from __future__ import annotations

from dataclasses import dataclass

from .domain.catalog import load_knowledge
from .engine.registry import DEFAULT, backend_class
from .errors import KnowledgeError, Location, RuleFileError
from .paths import bundled
from .ruleset.compiler import compile_ruleset
from .ruleset.diagnostics import Diagnostic, DiagnosticSink


@dataclass(frozen=True)
class CheckReport:
    """What a check found: every diagnostic, sorted by place."""

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


def check_directory(rules_dir=None, knowledge_dir=None, keep: list | None = None,
                    backend: str = DEFAULT) -> CheckReport:
    """Check a rule directory for `backend`; knowledge problems are reported as diagnostics too. `keep`
    receives (ruleset, knowledge) when the rule set compiles."""
    try:
        knowledge = load_knowledge(knowledge_dir or bundled("knowledge"))
    except KnowledgeError as exc:
        # with its suggestion: a misspelt card or link in knowledge/ gets its "did you mean" like one in rules/
        return CheckReport((Diagnostic(exc.location or Location(str(knowledge_dir)), "E001", exc.message,
                                       suggestion=exc.suggestion),))
    sink = DiagnosticSink()
    try:
        ruleset = compile_ruleset(rules_dir or bundled("rules"), knowledge, sink, backend=backend_class(backend))
        if keep is not None:
            keep.append((ruleset, knowledge))
    except RuleFileError:
        pass
    except RecursionError:
        sink.error(Location(str(rules_dir or "rules")), "E207", "checking the rule set failed: a value nests too "
                   "deeply (RecursionError)")
    return CheckReport(tuple(sink.sorted()))
