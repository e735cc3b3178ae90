"""PyYAML's syntax errors in words a rule author acts on: a tab, or the line whose indentation slipped.

PyYAML reports where parsing failed ("did not find expected key", "found character that cannot start
any token"), which is often a line after the mistake and never says why. A tab in the indentation and a
line that lines up with no block above it are the usual causes; this module finds them in the text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# PyYAML problems that a misplaced line causes (libyaml's and the pure-Python parser's wordings)
_STRUCTURAL = ("did not find expected", "mapping values are not allowed", "expected <block end>",
               "could not find expected ':'", "cannot start any token",
               "block sequence entries are not allowed", "expected a single document", "tab character")
_KEY = re.compile(r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"\[\]{},&*!|>%@`-][^#]*?|-[^\s#][^#]*?)\s*:(?:\s+|$)""")
_BLOCK_SCALAR = re.compile(r"[|>][-+0-9]*\s*$")


@dataclass(frozen=True)
class Slip:
    """A line whose indentation fits no block above it: what it is, where, and the lines it is measured by."""

    line: int
    indent: int
    message: str


def _uncommented(text: str) -> str:
    """The line without a trailing comment (a `#` after a space, outside quotes)."""
    quote = None
    for index, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"" and (index == 0 or text[index - 1] in " \t:[{,-"):
            quote = char
        elif char == "#" and (index == 0 or text[index - 1] in " \t"):
            return text[:index].rstrip()
    return text.rstrip()


def _open_brackets(text: str) -> int:
    """How many `[`/`{` the text leaves open (quoted text aside)."""
    depth, quote = 0, None
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
    return depth


def _spaces(count: int) -> str:
    return f"{count} space" + ("" if count == 1 else "s")


class _Lines:
    """The content lines of a YAML text with their indentation; block scalars, multi-line flow
    collections and quoted values spanning lines are skipped (their lines may sit anywhere)."""

    def __init__(self, text: str):
        self.rows: list[tuple[int, int, str]] = []  # (line number, indent, content without comment)
        skip_deeper_than, open_brackets = None, 0
        for number, raw in enumerate(text.split("\n"), 1):
            content = _uncommented(raw.lstrip(" "))
            indent = len(raw) - len(raw.lstrip(" "))
            if not content or content.startswith("---") or content.startswith("..."):
                continue
            if skip_deeper_than is not None and indent > skip_deeper_than:
                continue
            skip_deeper_than = None
            if open_brackets > 0:
                open_brackets += _open_brackets(content)
                continue
            self.rows.append((number, indent, content))
            value = _value(content)
            if _BLOCK_SCALAR.match(value):
                skip_deeper_than = indent
            open_brackets = max(_open_brackets(value), 0)


def _value(content: str) -> str:
    """What follows the last `key:` (or `-`) of a line: '' when the line opens a block."""
    while content == "-" or content.startswith("- "):
        content = content[1:].lstrip(" ")
    match = _KEY.match(content)
    return content[match.end():].strip() if match else content


def _items(indent: int, content: str) -> list[int]:
    """The columns (0-based) where the collections a line starts begin: `- key: v` at 2 starts a list at
    2 and a mapping at 4."""
    columns = []
    while content == "-" or content.startswith("- "):
        rest = content[1:].lstrip(" ")
        indent, content = indent + len(content) - len(rest), rest
        if content == "-" or content.startswith("- ") or _KEY.match(content):
            columns.append(indent)
    return columns


def _odd_one(line: int, indent: int, neighbour: int, neighbour_indent: int) -> Slip:
    """A line that began a block on its own, and the lines after it line up elsewhere: it slipped."""
    return Slip(line, indent, f"line {line} is indented {_spaces(indent)}, and the lines after it "
                f"{neighbour_indent} (from line {neighbour}); the keys of one mapping start in the same column")


def slips(text: str) -> list[Slip]:
    """Every line whose indentation fits no open block: deeper than a line that opens nothing, or
    between two levels. When the line before began its block alone and the line after lines up with
    this one, the line before is the one that slipped."""
    rows = _Lines(text).rows
    found, stack, opens = [], [], True  # stack: (indent, line) of the open blocks
    for index, (number, indent, content) in enumerate(rows):
        before = rows[index - 1] if index else (0, 0, "")
        follows = index + 1 < len(rows) and rows[index + 1][1] == indent
        starts = content.startswith("- ") or _KEY.match(content) is not None  # a key or an item, no continuation
        if stack and indent > stack[-1][0] and not opens and starts:
            alone = stack[-1][1] == before[0]
            found.append(_odd_one(before[0], before[1], number, indent) if alone and follows else Slip(
                number, indent, f"line {number} is indented {_spaces(indent)}, more than line {before[0]} above "
                f"it ({before[1]}), whose value follows its ':' (it opens no block); the keys of one mapping "
                "start in the same column"))
        elif stack and indent < stack[-1][0]:
            inner = stack[-1]
            while stack and stack[-1][0] > indent:
                inner = stack.pop()
            if stack and stack[-1][0] != indent:
                outer, alone = stack[-1], inner[1] == before[0]
                found.append(_odd_one(before[0], before[1], number, indent) if alone and follows else Slip(
                    number, indent, f"line {number} is indented {_spaces(indent)}, between the blocks above it, "
                    f"indented {inner[0]} (from line {inner[1]}) and {outer[0]} (from line {outer[1]}); the keys "
                    "of one mapping start in the same column"))
        if not stack or indent > stack[-1][0]:
            stack.append((indent, number))
        stack.extend((column, number) for column in _items(indent, content) if column > stack[-1][0])
        opens = _value(content) == "" or re.fullmatch(r"[&!]\S*", _value(content)) is not None
    return found


def _tab(lines: list[str], line: int, column: int) -> tuple[int, int] | None:
    """(line, column), 1-based, of the tab that broke parsing at line:column: in that line up to the
    column, or in the indentation of the content line before it."""
    here = lines[line - 1] if 0 < line <= len(lines) else ""
    if "\t" in here[:column + 1]:
        return line, here.index("\t") + 1
    for number in range(line - 1, 0, -1):
        text = lines[number - 1]
        if text.strip() and not text.lstrip().startswith("#"):
            indentation = text[:len(text) - len(text.lstrip())]
            return (number, indentation.index("\t") + 1) if "\t" in indentation else None
    return None


def described(exc, text: str, plain: str) -> tuple[str, int, int]:
    """(message, line, column) of a PyYAML syntax error: a tab or an indentation slip in words when the
    text shows one at or before the failing line, else `plain` (PyYAML's own words) where it failed."""
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return plain, 0, 0
    line, column = mark.line + 1, mark.column + 1
    problem = f"{exc.problem or ''} {exc.context or ''}"
    if not any(words in problem for words in _STRUCTURAL):
        return plain, line, column
    tab = _tab(text.split("\n"), line, mark.column)
    if tab:
        return "a tab character: YAML indents with spaces (replace the tab with spaces)", *tab
    earlier = [slip for slip in slips(text) if slip.line <= line]
    if earlier:
        slip = earlier[-1]
        return f"indentation: {slip.message}", slip.line, slip.indent + 1
    return plain, line, column
