"""The rooted exception tree: every error a user can cause is a KentinoError carrying data."""
from __future__ import annotations

import difflib
from dataclasses import dataclass

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text) -> str:
    """`text` with every character Python does not call printable (controls such as ESC and BEL,
    line and paragraph separators, bidi overrides, lone surrogates) written as an escape, so that
    text from the input cannot colour a terminal or forge a second line of output."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _NAMED_ESCAPES.get(c) or _escape(c) for c in text)


def _escape(character: str) -> str:
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def clipped(text: str, limit: int) -> str:
    """`text` as an error quotes it: its first `limit` characters and "..." when longer (a caller's unknown key
    or code may be a megabyte long)."""
    return text if len(text) <= limit else text[:limit] + "..."


def did_you_mean(name: str, candidates) -> str | None:
    """The closest known name to a misspelt one, or None when nothing is close."""
    matches = difflib.get_close_matches(str(name), [str(c) for c in candidates], n=1, cutoff=0.6)
    return matches[0] if matches else None


def with_suggestion(text: str, suggestion: str | None) -> str:
    """`text (did you mean 'x'?)`, the one wording of a suggestion in every error and diagnostic."""
    return f"{text} (did you mean '{suggestion}'?)" if suggestion else text


@dataclass(frozen=True)
class Location:
    """A place in a source file: 1-based line and column."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.line:
            return f"{printable(self.file)}:{self.line}:{self.column}"
        return printable(self.file)


class KentinoError(Exception):
    """Root of every error Kentino Expert raises on purpose.

    Its text is printable and one line (see `printable`) however hostile the input it quotes:
    the CLI, the HTTP service and MCP all show `message` as it is.
    """

    def __init__(self, message: str, *, location: Location | None = None,
                 name: str | None = None, suggestion: str | None = None):
        self.message = self._printable_message(message)
        self.location = location
        self.name = None if name is None else printable(name)
        self.suggestion = None if suggestion is None else printable(suggestion)
        super().__init__(self.render())

    @staticmethod
    def _printable_message(message: str) -> str:
        return printable(message)

    def render(self) -> str:
        text = self.suggested()
        return f"{self.location}: {text}" if self.location else text

    def suggested(self) -> str:
        """The message with its suggestion, without the location."""
        return with_suggestion(self.message, self.suggestion)


class InputError(KentinoError):
    """Workload facts that cannot be read or do not validate."""

    def __init__(self, message: str, *, field: str | None = None, **kwargs):
        self.field = None if field is None else printable(field)  # an unknown key is the input's own text
        super().__init__(message, **kwargs)

    def render(self) -> str:
        text = super().render()
        return f"{self.field}: {text}" if self.field and not self.location else text


class CatalogError(InputError):
    """A model, card or link id that the knowledge catalog does not hold."""


class KnowledgeError(KentinoError):
    """A knowledge/ file that is missing or malformed: diagnostic E001 wherever it is shown (`rules check` lists
    it as a Diagnostic; `test`, `rules diff`, `serve` ... print this text)."""

    def render(self) -> str:
        text = f"E001: {self.suggested()}"
        return f"{self.location}: {text}" if self.location else text


class RuleFileError(KentinoError):
    """A rules/ file that is malformed; carries every diagnostic found."""

    def __init__(self, diagnostics):
        self.diagnostics = tuple(diagnostics)
        first = self.diagnostics[0] if self.diagnostics else None
        super().__init__(
            "\n".join(str(d) for d in self.diagnostics) or "invalid rule set",
            location=first.location if first else None,
        )

    @staticmethod
    def _printable_message(message: str) -> str:  # one diagnostic per line, each made printable
        return "\n".join(printable(line) for line in message.split("\n"))

    def render(self) -> str:
        return self.message


class EngineError(KentinoError):
    """The inference engine refused a rule shape or failed while evaluating."""


class DecisionLogError(KentinoError):
    """The decision log cannot be opened or written."""


class UnreadableRow(DecisionLogError):
    """A stored decision whose JSON column is not JSON (another program wrote the row): so for good, not just
    now. `problem` says so without naming the log, which the service keeps to its own log; `name` is the column."""

    def __init__(self, message: str, problem: str, **kwargs):
        self.problem = printable(problem)
        super().__init__(message, **kwargs)


class LogUnavailable(DecisionLogError):
    """The log takes no row at all just now (closed, locked past the wait, unreachable): a group
    commit fails the whole batch with it instead of retrying each row into the same wait."""
