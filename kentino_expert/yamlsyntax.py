"""PyYAML's syntax errors in words a rule author acts on: a tab, an unclosed quote, a list item among keys (or a
key among items), a ': ' inside a value, an unclosed bracket, or the line whose indentation slipped; and a list
item that runs on into the item above it (valid YAML: one text over two lines).

PyYAML reports where parsing failed ("did not find expected key", "found character that cannot start
any token"), which is often a line after the mistake and never says why. These slips are the usual causes;
this module finds them in the text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# PyYAML problems that a misplaced line causes (libyaml's and the pure-Python parser's wordings)
_STRUCTURAL = ("did not find expected", "mapping values are not allowed", "expected <block end>",
               "could not find expected ':'", "cannot start any token", "expected ',' or",
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


def _value_start(content: str) -> int:
    """Where the value of a content line starts: after its `- ` items and its `key:` (0: no key)."""
    start = 0
    while content[start:] == "-" or content[start:].startswith("- "):
        start = len(content) - len(content[start + 1:].lstrip(" "))
    match = _KEY.match(content, start)
    return len(content) - len(content[match.end():].lstrip(" ")) if match else start


def _closes(text: str, quote: str) -> int:
    """The offset in `text` (what follows an opening quote) of the quote that closes it, or -1."""
    index = 0
    while index < len(text):
        if quote == '"' and text[index] == "\\":
            index += 2
            continue
        if text[index] == quote:
            if quote == "'" and text[index + 1:index + 2] == "'":  # '' is a quote inside single quotes
                index += 2
                continue
            return index
        index += 1
    return -1


def _open_quote(lines: list[str], number: int) -> tuple[int, int, str] | None:
    """(line, column, quote), 1-based, of a value on line `number` that opens a quote and does not close it."""
    raw = lines[number - 1] if 0 < number <= len(lines) else ""
    indent = len(raw) - len(raw.lstrip(" "))
    content = raw[indent:]
    start = _value_start(content)
    if content[start:start + 1] in ("'", '"') and _closes(content[start + 1:], content[start]) < 0:
        return number, indent + start + 1, content[start]
    return None


def _runaway_quote(lines: list[str], line: int, column: int) -> tuple[str, int, int] | None:
    """An unclosed quote that ran on to the failing line: the last value before it that opens a quote and
    does not close it on its own line, when no line between holds that quote and the failing one does."""
    for number in range(line - 1, 0, -1):
        found = _open_quote(lines, number)
        if found:
            quote = found[2]
            between = any(quote in lines[other - 1] for other in range(number + 1, line))
            if between or quote not in lines[line - 1][:column]:
                return None
            return (f"an unclosed quote: the value on line {number} opens with {quote} and does not close it on its "
                    f"line, so the text runs on to the next {quote}, on line {line}; close the quote on line "
                    f"{number}", number, found[1])
    return None


def _quote_ends_early(lines: list[str], line: int, column: int) -> tuple[str, int, int] | None:
    """A quote inside a quoted value (`'one node's'`): it closes the value, and the text after it fails."""
    raw = lines[line - 1] if 0 < line <= len(lines) else ""
    indent = len(raw) - len(raw.lstrip(" "))
    start = indent + _value_start(raw[indent:])
    quote = raw[start:start + 1]
    if quote not in ("'", '"'):
        return None
    end = _closes(raw[start + 1:], quote) + start + 1
    if end <= start or column <= end or not raw[end + 1:].strip():
        return None
    inside = "write it twice ('')" if quote == "'" else 'write it \\"'
    return (f"a quote inside a quoted value: line {line}'s value opens with {quote}, and the {quote} after "
            f"'{raw[start + 1:end]}' closes it, so the text after it cannot follow; inside {quote}...{quote} {inside}, "
            f"or quote the value with {'double' if quote == chr(39) else 'single'} quotes", line, end + 1)


def _key_above(lines: list[str], line: int, column: int) -> tuple[int, str, str] | None:
    """(line, key, value) of the nearest key above `line` whose key starts at `column` (0-based)."""
    for number in range(line - 1, 0, -1):
        raw = _uncommented(lines[number - 1])
        indent = len(raw) - len(raw.lstrip(" "))
        content = raw[indent:]
        if not content:
            continue
        start = _value_start(content)
        key_column = indent + len(content) - len(content.lstrip("- ")) if content.startswith("- ") else indent
        if key_column == column and start:
            key = content[key_column - indent:start].strip().rstrip(":").strip()
            return number, key, content[start:]
        if indent < column:
            return None
    return None


def _mixed_block(exc, lines: list[str]) -> tuple[str, int, int] | None:
    """A list item among the keys of a mapping, or a key among the items of a list, in words."""
    mark, context, block = exc.problem_mark, exc.context or "", exc.context_mark
    if mark is None or block is None or mark.column != block.column or mark.line >= len(lines):
        return None  # not in the block's own column: an indentation slip, said as one
    here = lines[mark.line][mark.column:]
    line, column = mark.line + 1, mark.column + 1
    if "block mapping" in context and (here == "-" or here.startswith("- ")):
        above = _key_above(lines, line, mark.column)
        why = (f"the key above it, '{above[1]}' on line {above[0]}, has its value after its ':', so nothing can be "
               "listed under it" if above and above[2] else "a mapping's lines are all 'key: value'")
        return (f"a list item among keys: line {line} starts with '- ' in the column of the keys of a mapping; "
                f"{why}. A list goes under a key with nothing after its ':', each item on a line of its own "
                "starting with '- '", line, column)
    if "block collection" in context and here and not here.startswith("-"):
        start = block.line + 1
        return (f"a key among list items: line {line} is not an item ('- ') but stands in the column of the list "
                f"that starts on line {start}; a list's lines all start with '- ': indent the key under an item, "
                "or end the list before it", line, column)
    return None


def _colon_in_value(lines: list[str], line: int, column: int) -> tuple[str, int, int] | None:
    """A ': ' inside a plain value (`description: one node: eight GPUs`): YAML reads it as another key."""
    raw = _uncommented(lines[line - 1]) if 0 < line <= len(lines) else ""
    indent = len(raw) - len(raw.lstrip(" "))
    start = indent + _value_start(raw[indent:])
    value = raw[start:]
    if start == indent or column <= start or value[:1] in ("'", '"', "[", "{") or raw[column:column + 1] != ":":
        return None  # not after the line's own key: a key that slipped, said as an indentation
    return (f"a ': ' inside a value: line {line}'s value '{value}' holds ': ', which YAML reads as the start of "
            "another key; put the whole value in quotes (\"...\"), or leave no space after that ':'", line,
            column + 1)


def _brackets(text: str) -> tuple[list[tuple[int, str]], tuple[int, str, str] | None]:
    """The `[`/`{` a line leaves open (offset, bracket), and its first closer that does not match: (offset,
    closer, the bracket it met or '') (quoted text aside)."""
    stack, quote = [], None
    for index, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"" and (index == 0 or text[index - 1] in " [{,:"):
            quote = char
        elif char in "[{":
            stack.append((index, char))
        elif char in "]}":
            if not stack or stack[-1][1] != {"]": "[", "}": "{"}[char]:
                return stack, (index, char, stack[-1][1] if stack else "")
            stack.pop()
    return stack, None


def _bracket_slip(exc, lines: list[str], line: int) -> tuple[str, int, int] | None:
    """A bracket a line closes with the other kind (`[a, b}`), one it closes twice (`{a: 1}}`), or one it leaves
    open when the next line is no part of it. PyYAML fails at the closer or at the next line."""
    here = _uncommented(lines[line - 1]) if 0 < line <= len(lines) else ""
    indent = len(here) - len(here.lstrip(" "))
    _, wrong = _brackets(here) if here[indent + _value_start(here[indent:]):][:1] in ("[", "{") else ([], None)
    if wrong:
        offset, closer, met = wrong
        what = (f"a {met} closed by {closer}: the {met} opens a {'list' if met == '[' else 'mapping'}, which only "
                f"{']' if met == '[' else '}'} closes" if met else
                f"a {closer} that closes nothing: line {line} has a {closer} more than it opens")
        return f"{what}; fix the brackets of line {line}", line, offset + 1
    opened = exc.context_mark
    if opened is None or "flow" not in (exc.context or "") or opened.line + 1 >= line or opened.line >= len(lines):
        return None
    left, _ = _brackets(_uncommented(lines[opened.line]))
    indent = len(lines[opened.line]) - len(lines[opened.line].lstrip(" "))
    if not left or len(here) - len(here.lstrip(" ")) > indent:
        return None  # a deeper line may continue the collection: the slip is elsewhere
    offset, bracket = left[0]
    closer = "]" if bracket == "[" else "}"
    return (f"an unclosed {bracket}: the {bracket} on line {opened.line + 1} opens a "
            f"{'list' if bracket == '[' else 'mapping'} that no {closer} closes on its line; add the {closer} at "
            f"the end of line {opened.line + 1}", opened.line + 1, offset + 1)


def described(exc, text: str, plain: str) -> tuple[str, int, int]:
    """(message, line, column) of a PyYAML syntax error in words when the text shows a tab, an unclosed quote,
    a list item among keys (or a key among items) or an indentation slip at or before the failing line, else
    `plain` (PyYAML's own words) where it failed."""
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return plain, 0, 0
    line, column = mark.line + 1, mark.column + 1
    lines = text.split("\n")
    if "quoted scalar" in (exc.context or "") and exc.context_mark is not None:  # the file ends inside it
        opened = exc.context_mark
        return (f"an unclosed quote: the value on line {opened.line + 1} opens with "
                f"{lines[opened.line][opened.column:opened.column + 1]} and the file ends before it closes; close "
                f"the quote on line {opened.line + 1}", opened.line + 1, opened.column + 1)
    problem = f"{exc.problem or ''} {exc.context or ''}"
    if not any(words in problem for words in _STRUCTURAL):
        return plain, line, column
    tab = _tab(lines, line, mark.column)
    if tab:
        return "a tab character: YAML indents with spaces (replace the tab with spaces)", *tab
    found = (_runaway_quote(lines, line, mark.column) or _quote_ends_early(lines, line, mark.column)
             or _mixed_block(exc, lines) or _bracket_slip(exc, lines, line))
    if found:
        return found
    colon = _colon_in_value(lines, line, mark.column) if "mapping values are not allowed" in problem else None
    if colon:
        return colon
    earlier = [slip for slip in slips(text) if slip.line <= line]
    if earlier:
        slip = earlier[-1]
        return f"indentation: {slip.message}", slip.line, slip.indent + 1
    return plain, line, column
