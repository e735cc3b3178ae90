"""YAML loading that keeps line:column of every key and value, refuses duplicate keys and bombs, and reads
plain scalars as YAML 1.2's core schema does (1e5 is a number, yes/no/on/off are words)."""
from __future__ import annotations

import functools
import math
import re
import sys

import yaml

from .errors import Location
from .yamlsyntax import described

# Limits on one YAML document, each named in the error that reports it. A rule set or a facts file
# holds a few thousand values; these are far above any real file and far below harm.
MAX_CHARACTERS = 10_000_000
MAX_NODES = 200_000  # values, lists and mappings as written
MAX_EXPANDED = 200_000  # ... and once aliases are expanded (an alias bomb is small as written)
MAX_DEPTH = 100  # lists and mappings inside one another
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: same nodes and marks
_INT_TAG = "tag:yaml.org,2002:int"
_INT_DIGITS = sys.get_int_max_str_digits() or 4300  # Python refuses to turn longer integers into text
_INT_BOUND = 10 ** _INT_DIGITS

# YAML 1.2's core schema (yaml.org/spec/1.2.2, 10.3.2): what a plain scalar means. PyYAML reads YAML 1.1,
# where `1e5` is text (a float needs a dot), `yes`/`no`/`on`/`off` are booleans, `010` is octal, `1:30`
# is 90 and `2024-05-01` a date. Here only these patterns are anything but text.
_NULL, _BOOL = "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool"
_FLOAT = "tag:yaml.org,2002:float"
_CORE = ((_NULL, r"(?:~|null|Null|NULL|)\Z", "~nN"),
         (_BOOL, r"(?:true|True|TRUE|false|False|FALSE)\Z", "tTfF"),
         (_INT_TAG, r"(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)\Z", "-+0123456789"),
         (_FLOAT, r"(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                  r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\Z", "-+.0123456789"),
         ("tag:yaml.org,2002:merge", r"<<\Z", "<"))  # kept only to refuse merge keys by name


@functools.cache
def core_schema_loader(base):
    """`base` (a PyYAML loader class) resolving plain scalars by YAML 1.2's core schema."""
    loader = type(f"Core{base.__name__}", (base,), {"yaml_implicit_resolvers": {}})
    for tag, pattern, first in _CORE:
        loader.add_implicit_resolver(tag, re.compile(pattern), list(first) + ([""] if tag == _NULL else []))
    return loader


def core_value(tag: str, text: str):
    """A core-schema scalar's value (YAML 1.2: `010` is ten, `0o10` eight); ValueError when `text` is not
    one of the tag's spellings (an explicit `!!int 1_000`)."""
    if not re.match(next(pattern for known, pattern, _ in _CORE if known == tag), text):
        raise ValueError(f"{text!r} is not a YAML 1.2 {tag.rsplit(':', 1)[-1]}")
    if tag == _NULL:
        return None
    if tag == _BOOL:
        return text.lower() == "true"
    if tag == _INT_TAG:
        base = {"0o": 8, "0x": 16}.get(text[:2], 10)
        return int(text[2:] if base != 10 else text, base)
    if text.lstrip("+-").lower() == ".inf":
        return -math.inf if text.startswith("-") else math.inf
    return math.nan if text.lower() == ".nan" else float(text)


class LocatedDict(dict):
    """A mapping that remembers where each key and each value stood in the source, and which values
    were quoted scalars (their text starts one column after their location)."""

    __slots__ = ("key_locations", "value_locations", "location", "quoted")


class LocatedList(list):
    """A sequence that remembers where each item stood in the source, and which items were quoted."""

    __slots__ = ("item_locations", "location", "quoted")


def _is_quoted(node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.style in ("'", '"')


class YamlSourceError(Exception):
    """A YAML document that cannot be read; carries the location."""

    def __init__(self, message: str, location: Location):
        self.message = message
        self.location = location
        super().__init__(f"{location}: {message}")


def _loc(filename: str, mark) -> Location:
    return Location(filename, mark.line + 1, mark.column + 1)


class _Builder:
    def __init__(self, filename: str, text: str = ""):
        self.filename, self.lines = filename, text.split("\n")
        self.count = 0
        self._scalar = yaml.SafeLoader("")  # only for scalar resolution and construction

    def build(self, node):
        self.count += 1
        if self.count > MAX_EXPANDED:  # only aliases get here: _check_shape capped the nodes as written
            raise YamlSourceError(f"aliases expand the document past {MAX_EXPANDED:,} values "
                                  f"(an alias bomb?)", _loc(self.filename, node.start_mark))
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node)
        if isinstance(node, yaml.SequenceNode):
            out = LocatedList(self.build(item) for item in node.value)
            out.item_locations = [_loc(self.filename, item.start_mark) for item in node.value]
            out.location = _loc(self.filename, node.start_mark)
            out.quoted = {index for index, item in enumerate(node.value) if _is_quoted(item)}
            return out
        self._run_on(node)
        return self._scalar_value(node)

    def _run_on(self, node) -> None:
        """A plain text continued by a line starting with '- ': a list item indented deeper than the item above
        it, which YAML reads as the rest of that item's text (`exists a - exists b`), not as an item."""
        if node.style or node.end_mark.line <= node.start_mark.line:
            return
        for number in range(node.start_mark.line + 1, min(node.end_mark.line + 1, len(self.lines))):
            content = self.lines[number].lstrip(" ")
            if content == "-" or content.startswith("- "):
                column = len(self.lines[number]) - len(content)
                raise YamlSourceError(
                    f"YAML syntax error: a list item that runs on: line {number + 1} starts with '- ' indented "
                    f"deeper than the text on line {node.start_mark.line + 1} (column {node.start_mark.column + 1}), "
                    f"so YAML reads it as the rest of that text ('{' '.join(node.value.split())}'), not as an item "
                    "of its own; the items of one list start in the same column",
                    Location(self.filename, number + 1, column + 1))

    def _scalar_value(self, node):
        """The scalar's Python value; a value its tag cannot take is a located error, not a traceback."""
        where = _loc(self.filename, node.start_mark)
        too_long = f"an integer with more than {_INT_DIGITS} digits"
        # checked before conversion: Python refuses longer decimal text (with a message about its own limit)
        if node.tag == _INT_TAG and len(node.value.lstrip("+-").replace("_", "")) > _INT_DIGITS:
            raise YamlSourceError(too_long, where)
        try:
            if node.tag in (_NULL, _BOOL, _INT_TAG, _FLOAT):
                value = core_value(node.tag, node.value)
            else:
                value = self._scalar.construct_object(node, deep=True)
        except (ValueError, ArithmeticError) as exc:
            kind = node.tag.rsplit(":", 1)[-1]
            raise YamlSourceError(f"not a valid {kind}: {exc}", where) from None
        if isinstance(value, int) and abs(value) >= _INT_BOUND:  # 0x.../0o... reach it with fewer digits
            raise YamlSourceError(too_long, where)
        return value

    def _mapping(self, node):
        out = LocatedDict()
        out.key_locations, out.value_locations, out.quoted = {}, {}, set()
        out.location = _loc(self.filename, node.start_mark)
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise YamlSourceError("merge keys (<<) are not supported", _loc(self.filename, key_node.start_mark))
            key = self.build(key_node)
            if isinstance(key, (dict, list)):
                raise YamlSourceError("a key must be a plain value", _loc(self.filename, key_node.start_mark))
            if key in out:
                raise YamlSourceError(f"duplicate key '{key}'", _loc(self.filename, key_node.start_mark))
            out[key] = self.build(value_node)
            out.key_locations[key] = _loc(self.filename, key_node.start_mark)
            out.value_locations[key] = _loc(self.filename, value_node.start_mark)
            if _is_quoted(value_node):
                out.quoted.add(key)
        return out


def _check_shape(text: str, filename: str) -> None:
    """Size and nesting as written, from the event stream: refused before any node is built."""
    nodes = depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
            nodes += 1
            if nodes > MAX_NODES:
                raise YamlSourceError(f"document too large: more than {MAX_NODES:,} values",
                                      _loc(filename, event.start_mark))
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlSourceError(f"document nests deeper than {MAX_DEPTH} levels",
                                      _loc(filename, event.start_mark))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _syntax_message(exc: yaml.MarkedYAMLError) -> str:
    """PyYAML's problem and context on one line: 'did not find expected key (while parsing a block
    mapping at 1:1)'; the problem's own place is the error's location."""
    problem, context = exc.problem, exc.context
    if not (problem and context):
        return problem or context or "invalid YAML"
    here, there = exc.problem_mark, exc.context_mark
    if there and not (here and (here.line, here.column) == (there.line, there.column)):
        context += f" at {there.line + 1}:{there.column + 1}"
    return f"{problem} ({context})"


def _located(exc: yaml.MarkedYAMLError, what: str, filename: str) -> YamlSourceError:
    mark = exc.problem_mark or exc.context_mark
    return YamlSourceError(f"{what}: {_syntax_message(exc)}", _loc(filename, mark) if mark else Location(filename))


def _reader_location(exc: yaml.reader.ReaderError, text: str, filename: str) -> Location:
    """libyaml counts UTF-8 bytes, the pure-Python reader characters."""
    before = text[:exc.position] if exc.encoding == "unicode" else \
        text.encode("utf-8", "surrogatepass")[:exc.position].decode("utf-8", "ignore")
    line = before.count("\n") + 1
    return Location(filename, line, len(before) - (before.rfind("\n") + 1) + 1)


def _compose(text: str, filename: str):
    """The node graph, or YamlSourceError with the place and one line of text."""
    if len(text) > MAX_CHARACTERS:
        raise YamlSourceError(f"document too large: more than {MAX_CHARACTERS:,} characters", Location(filename))
    try:
        _check_shape(text, filename)
        return yaml.compose(text, Loader=core_schema_loader(_LOADER))
    except yaml.MarkedYAMLError as exc:
        message, line, column = described(exc, text, _syntax_message(exc))
        where = Location(filename, line, column) if line else Location(filename)
        raise YamlSourceError(f"YAML syntax error: {message}", where) from None
    except yaml.reader.ReaderError as exc:
        character = f"#x{exc.character:04x}" if isinstance(exc.character, int) else repr(exc.character)
        raise YamlSourceError(f"YAML error: unacceptable character {character}: {exc.reason}",
                              _reader_location(exc, text, filename)) from None
    except UnicodeEncodeError as exc:  # a lone surrogate (e.g. undecodable bytes read as surrogateescape)
        before = text[:exc.start]
        where = Location(filename, before.count("\n") + 1, exc.start - (before.rfind("\n") + 1) + 1)
        raise YamlSourceError("not UTF-8 text: a lone surrogate character", where) from None
    except yaml.YAMLError as exc:
        raise YamlSourceError(f"YAML error: {' '.join(str(exc).split())}", Location(filename)) from None


def decode_utf8(data: bytes, filename: str) -> str:
    """A file's bytes as text; bytes that are not UTF-8 are a YamlSourceError at the line and column of the
    first bad byte (Python's own error names a byte offset, which no editor shows)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[:exc.start].decode("utf-8")  # everything before the first bad byte decodes
        column = len(before) - (before.rfind("\n") + 1) + 1
        raise YamlSourceError(f"not UTF-8 text: byte 0x{data[exc.start]:02x} ({exc.reason}); save the file as "
                              "UTF-8", Location(filename, before.count("\n") + 1, column)) from None


def load_yaml(text: str, filename: str = "<input>"):
    """Parse one YAML document into located dicts/lists; raise YamlSourceError with line:col."""
    node = _compose(text, filename)
    if node is None:
        return None
    try:
        return _Builder(filename, text).build(node)
    except yaml.constructor.ConstructorError as exc:
        raise _located(exc, "YAML error", filename) from None


def to_plain(value):
    """Located dicts/lists -> ordinary ones (for data that leaves the loader)."""
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return value


def is_quoted(container, key) -> bool:
    """Whether the value under `key` was written as a quoted scalar ('...' or "...")."""
    return key in (getattr(container, "quoted", None) or ())


def location_of(container, key, filename: str) -> Location:
    """Where a key's value stood, or the container itself when it was not located."""
    locations = getattr(container, "value_locations", None)
    if isinstance(container, LocatedDict) and locations and key in locations:
        return locations[key]
    if isinstance(container, LocatedList) and isinstance(key, int) and key < len(container.item_locations):
        return container.item_locations[key]
    return getattr(container, "location", None) or Location(filename)


def location_at(container, path, filename: str, start: Location) -> Location:
    """Where the deepest part of `path` (keys and list indexes, as a validator names a field) stood in the
    source; `start` when the container lacks even the first (a missing field is reported where it belongs)."""
    where = start
    for part in path:
        present = part in container if isinstance(container, dict) else \
            isinstance(container, list) and isinstance(part, int) and 0 <= part < len(container)
        if not present:
            break
        where = location_of(container, part, filename)
        container = container[part]
    return where
