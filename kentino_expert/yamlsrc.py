"""YAML loading that keeps line:column of every key and value, refuses duplicate keys and bombs."""
from __future__ import annotations

import yaml

from .errors import Location

MAX_NODES = 200_000
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: same nodes and marks  # a document that expands past this many nodes is an alias bomb


class LocatedDict(dict):
    """A mapping that remembers where each key and each value stood in the source."""

    __slots__ = ("key_locations", "value_locations", "location")


class LocatedList(list):
    """A sequence that remembers where each item stood in the source."""

    __slots__ = ("item_locations", "location")


class YamlSourceError(Exception):
    """A YAML document that cannot be read; carries the location."""

    def __init__(self, message: str, location: Location):
        self.message = message
        self.location = location
        super().__init__(f"{location}: {message}")


def _loc(filename: str, mark) -> Location:
    return Location(filename, mark.line + 1, mark.column + 1)


class _Builder:
    def __init__(self, filename: str):
        self.filename = filename
        self.count = 0
        self._scalar = yaml.SafeLoader("")  # only for scalar resolution and construction

    def build(self, node):
        self.count += 1
        if self.count > MAX_NODES:
            raise YamlSourceError(
                f"document expands past {MAX_NODES} nodes (alias bomb?)", _loc(self.filename, node.start_mark))
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node)
        if isinstance(node, yaml.SequenceNode):
            out = LocatedList(self.build(item) for item in node.value)
            out.item_locations = [_loc(self.filename, item.start_mark) for item in node.value]
            out.location = _loc(self.filename, node.start_mark)
            return out
        return self._scalar.construct_object(node, deep=True)

    def _mapping(self, node):
        out = LocatedDict()
        out.key_locations, out.value_locations = {}, {}
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
        return out


def load_yaml(text: str, filename: str = "<input>"):
    """Parse one YAML document into located dicts/lists; raise YamlSourceError with line:col."""
    try:
        node = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = _loc(filename, mark) if mark else Location(filename)
        raise YamlSourceError(f"YAML syntax error: {exc.problem or exc.context}", where) from None
    except yaml.YAMLError as exc:
        raise YamlSourceError(f"YAML error: {exc}", Location(filename)) from None
    if node is None:
        return None
    try:
        return _Builder(filename).build(node)
    except yaml.constructor.ConstructorError as exc:
        raise YamlSourceError(f"YAML error: {exc.problem}", _loc(filename, exc.problem_mark)) from None
    except RecursionError:
        raise YamlSourceError("document nests too deeply", Location(filename)) from None


def to_plain(value):
    """Located dicts/lists -> ordinary ones (for data that leaves the loader)."""
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return value


def location_of(container, key, filename: str) -> Location:
    """Where a key's value stood, or the container itself when it was not located."""
    locations = getattr(container, "value_locations", None)
    if isinstance(container, LocatedDict) and locations and key in locations:
        return locations[key]
    if isinstance(container, LocatedList) and isinstance(key, int) and key < len(container.item_locations):
        return container.item_locations[key]
    return getattr(container, "location", None) or Location(filename)
