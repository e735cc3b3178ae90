"""The rooted exception tree: every error a user can cause is a KentinoError carrying data."""
from __future__ import annotations

import difflib
from dataclasses import dataclass


def did_you_mean(name: str, candidates) -> str | None:
    """The closest known name to a misspelt one, or None when nothing is close."""
    matches = difflib.get_close_matches(str(name), [str(c) for c in candidates], n=1, cutoff=0.6)
    return matches[0] if matches else None


@dataclass(frozen=True)
class Location:
    """A place in a source file: 1-based line and column."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.column}"
        return self.file


class KentinoError(Exception):
    """Root of every error Kentino Expert raises on purpose."""

    def __init__(self, message: str, *, location: Location | None = None,
                 name: str | None = None, suggestion: str | None = None):
        self.message = message
        self.location = location
        self.name = name
        self.suggestion = suggestion
        super().__init__(self.render())

    def render(self) -> str:
        text = self.message
        if self.suggestion:
            text += f" (did you mean '{self.suggestion}'?)"
        return f"{self.location}: {text}" if self.location else text


class InputError(KentinoError):
    """Workload facts that cannot be read or do not validate."""

    def __init__(self, message: str, *, field: str | None = None, **kwargs):
        self.field = field
        super().__init__(message, **kwargs)

    def render(self) -> str:
        text = super().render()
        return f"{self.field}: {text}" if self.field and not self.location else text


class CatalogError(InputError):
    """A model, card or link id that the knowledge catalog does not hold."""


class KnowledgeError(KentinoError):
    """A knowledge/ file that is missing or malformed."""


class RuleFileError(KentinoError):
    """A rules/ file that is malformed; carries every diagnostic found."""

    def __init__(self, diagnostics):
        self.diagnostics = tuple(diagnostics)
        first = self.diagnostics[0] if self.diagnostics else None
        super().__init__(
            "\n".join(str(d) for d in self.diagnostics) or "invalid rule set",
            location=first.location if first else None,
        )

    def render(self) -> str:
        return self.message


class EngineError(KentinoError):
    """The inference engine refused a rule shape or failed while evaluating."""


class DecisionLogError(KentinoError):
    """The decision log cannot be opened or written."""


class LogUnavailable(DecisionLogError):
    """The log takes no row at all just now (closed, locked past the wait, unreachable): a group
    commit fails the whole batch with it instead of retrying each row into the same wait."""
