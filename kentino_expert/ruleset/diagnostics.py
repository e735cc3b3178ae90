"""Diagnostics of rule files: ruff-style `file:line:col: code: message`, collected, never raised one by one,
root causes first; and the registry of every code (codes_reading.py, codes_checking.py)."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from ..errors import Location, RuleFileError, clipped, did_you_mean, printable, with_suggestion
from .codes_checking import CHECKING_CODES
from .codes_prices import PRICE_CODES
from .codes_reading import READING_CODES
from .diagnostic_code import DiagnosticCode

REGISTRY: dict[str, DiagnosticCode] = {code.id: code for code in READING_CODES + PRICE_CODES + CHECKING_CODES}
CODES = {code: entry.summary for code, entry in REGISTRY.items()}  # id -> summary (the table of the guides)
# Codes given once and no more: `--explain` still says what became of them.
RETIRED = {"E003": "E003 (a value has the wrong type or form) was split into specific codes: E010-E018 "
                   "(the parts of a rule), E020-E030 (its `then`), E031-E034 (parameters and facts), E035 (the "
                   "build search's selection.yaml); `rules check --explain E0xx` explains each."}


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a rule directory. `root` marks a root cause that its code alone does not
    (a file without its top-level key): it is listed first, and the checks across files wait for it."""

    location: Location
    code: str
    message: str
    severity: str = "error"  # "error" fails `rules check`; "warning" only with --strict
    rule: str | None = None
    suggestion: str | None = None
    root: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        """One printable line, whatever text of the rule file the message quotes."""
        text = with_suggestion(f"{self.location}: {self.code}: {self.message}", self.suggestion)
        if self.rule:
            text += f" [{self.rule}]"
        return printable(text)

    @property
    def is_root(self) -> bool:
        """Whether this is a root cause: a file that could not be read (E001) or read as nothing."""
        entry = REGISTRY.get(self.code)
        return self.root or bool(entry and entry.root)

    def as_dict(self) -> dict:
        return {"file": self.location.file, "line": self.location.line, "column": self.location.column,
                "code": self.code, "severity": self.severity, "message": self.message,
                "rule": self.rule, "suggestion": self.suggestion}


def ordered(diagnostics) -> list[Diagnostic]:
    """Root causes first (what could not be read), then by place: the order `rules check` prints."""
    return sorted(diagnostics, key=lambda d: (not d.is_root, d.location.file, d.location.line,
                                              d.location.column, d.code))


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

    @property
    def has_root_cause(self) -> bool:
        """Whether a file could not be read: the checks across files would blame the others for it."""
        return any(d.is_root for d in self.errors)

    def sorted(self) -> list[Diagnostic]:
        return ordered(self.items)

    def error_report(self):
        """A RuleFileError listing the errors in the order `rules check` prints them."""
        return RuleFileError(ordered(self.errors))


class UnknownCode(ValueError):
    """`--explain` of a code that is not registered; the message suggests the closest one."""


def _spans(codes) -> str:
    """E001, E002, E010-E018, ...: the registered codes, consecutive ones as a span."""
    spans: list[list[str]] = []
    for code in sorted(codes):
        last = spans[-1][-1] if spans else None
        if last and last[0] == code[0] and int(code[1:]) == int(last[1:]) + 1:
            spans[-1].append(code)
        else:
            spans.append([code])
    return ", ".join(span[0] if len(span) == 1 else f"{span[0]}-{span[-1]}" for span in spans)


def explain(code: str) -> str:
    """What `rules check --explain CODE` prints (any case): the code's page, or what became of a retired
    code; UnknownCode, on one line with the closest code or the known ones, for anything else."""
    wanted = code.strip().upper()
    if wanted in REGISTRY:
        return explanation_page(REGISTRY[wanted])
    if wanted in RETIRED:
        return RETIRED[wanted] + "\n"
    close = did_you_mean(wanted, REGISTRY) if len(wanted) <= MAX_CODE_ECHO else None
    known = "" if close else f" (known codes: {_spans(REGISTRY)})"
    raise UnknownCode(with_suggestion(f"unknown diagnostic code '{printable(clipped(code, MAX_CODE_ECHO))}'{known}",
                                      close))


MAX_CODE_ECHO = 40  # of an unknown code, this much is quoted back (a code is four characters)


def _wrapped(text: str) -> str:
    return textwrap.fill(text, width=100, break_on_hyphens=False, break_long_words=False)


def explanation_page(entry: DiagnosticCode) -> str:
    """A code's summary, explanation, example and fix, as `rules check --explain CODE` prints it."""
    found = ", found by answering the examples in the sandbox" if entry.trial else ""
    setup = f"\n\n{_wrapped(f'With: {entry.setup}.')}" if entry.setup else ""
    example = "\n".join(f"    {line}" if line else "" for line in entry.example.rstrip("\n").split("\n"))
    return (f"{_wrapped(f'{entry.id} ({entry.severity}{found}): {entry.summary}')}\n\n"
            f"{_wrapped(entry.explanation_in_full)}\n\nExample ({entry.file}):\n\n{example}{setup}\n\n"
            f"{_wrapped(f'Fix: {entry.fix}')}\n")
