"""Diagnostics of rule files: ruff-style `file:line:col: code: message`, collected, never raised one by one."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Location, RuleFileError, printable, with_suggestion


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a rule directory."""

    location: Location
    code: str
    message: str
    severity: str = "error"  # "error" fails `rules check`; "warning" only with --strict
    rule: str | None = None
    suggestion: str | None = None

    def __str__(self) -> str:
        """One printable line, whatever text of the rule file the message quotes."""
        text = with_suggestion(f"{self.location}: {self.code}: {self.message}", self.suggestion)
        if self.rule:
            text += f" [{self.rule}]"
        return printable(text)

    def as_dict(self) -> dict:
        return {"file": self.location.file, "line": self.location.line, "column": self.location.column,
                "code": self.code, "severity": self.severity, "message": self.message,
                "rule": self.rule, "suggestion": self.suggestion}


@dataclass
class DiagnosticSink:
    """Collects diagnostics while a rule directory is read and checked."""

    items: list[Diagnostic] = field(default_factory=list)

    def error(self, location: Location, code: str, message: str, **kwargs) -> None:
        self.items.append(Diagnostic(location, code, message, "error", **kwargs))

    def warning(self, location: Location, code: str, message: str, **kwargs) -> None:
        self.items.append(Diagnostic(location, code, message, "warning", **kwargs))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "error"]

    def sorted(self) -> list[Diagnostic]:
        return sorted(self.items, key=lambda d: (d.location.file, d.location.line, d.location.column, d.code))

    def error_report(self):
        """A RuleFileError listing the errors by place (the order `rules check` prints them)."""
        return RuleFileError(sorted(self.errors, key=lambda d: (d.location.file, d.location.line, d.location.column)))


# Codes, listed in docs/diagnostics.md (a generated table: kentino-expert rules docs docs/rules --guides docs).
CODES = {
    "E001": "the file is not valid YAML",
    "E002": "a key is unknown or misplaced",
    "E003": "a value has the wrong type or form",
    "E004": "a required key is missing",
    "E101": "an expression does not parse",
    "E102": "a name is not a fact, figure, conclusion or parameter",
    "E103": "types do not match (a number compared with a string, an unknown enum value, ...)",
    "E104": "a heuristic id is not in knowledge/heuristics.yaml",
    "E105": "a rule id, or a warning code, is used twice",
    "E106": "a template names an unknown value or has a bad format",
    "E201": "a rule shape the engine cannot run safely",
    "E202": "too many conditions under one node of the engine's network (a long `or`; durable-rules hangs at 512)",
    "E203": "one fact can leave more than 64 matching conditions pending (durable-rules error 303 on every request)",
    "E204": "chained or nested `or`s make one fact walk too many conditions (every matching branch walks the "
            "rest again)",
    "E205": "a rule compiles to more than 15 and/or groups (durable-rules refuses it, error 113)",
    "E206": "arithmetic that can overflow: a value not provably finite over the ranges of its names",
    "E207": "the rule set fails in a sandbox: building it or answering an example hangs, crashes or fails",
    "W301": "a rule can never fire (contradictory conditions or a fact nothing produces)",
    "W302": "a rule is shadowed by a higher-priority rule that always pre-empts it",
    "W303": "a parameter no rule uses",
    "W304": "a heuristic of the catalog that no rule encodes",
    "W305": "a rule reads a conclusion that only lower-priority rules produce",
    "W306": "a rule does not fire on its own example (found by answering it in the sandbox)",
}
