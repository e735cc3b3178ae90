"""Reading rules/*.yaml into typed rule records, collecting diagnostics (policies.py: parameters and facts)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..domain.figure_specs import RECOMMENDED_COUNTS
from ..domain.vocabulary import KINDS, PRECISIONS
from ..errors import Location, clipped, did_you_mean
from ..lang import nodes, parser
from ..lang.limits import MAX_ID_CHARS
from ..lang.valuetypes import finite_number, short_number
from ..sourcefiles import SourceFileError, read_source
from ..yamlsrc import LocatedDict, YamlSourceError, decode_utf8, is_quoted, load_yaml, location_of
from ..yamlsrc import to_plain as _plain
from .bounds import id_problem, literal_problem, long_literal, within_written_bounds
from .diagnostics import DiagnosticSink

# The keys of each part of a rule, and those it must have: the reader checks these, and the editor schema
# (schemas.py) is generated from them, so the two cannot disagree.
RULE_KEYS = ("id", "heuristics", "description", "priority", "when", "then", "because", "example")
RULE_REQUIRED = ("id", "heuristics", "when", "then", "because")
THEN_KEYS = ("conclude", "recommend", "warn")
RECOMMEND_KEYS = ("kind", "precision", "nodes", "replicas", "tp", "pp", "dp", "sharding", "interconnect", "gpu",
                  "gpus_per_node")
RECOMMEND_REQUIRED = ("kind",)
WARN_KEYS = ("code", "message")
SPECIAL_FILES = ("parameters.yaml", "facts.yaml")
KEBAB = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"  # rule ids and warning codes
SNAKE = r"^[a-z][a-z0-9_]*$"  # conclusion names
_KEBAB = re.compile(KEBAB)


@dataclass(frozen=True)
class Condition:
    """One `when` entry (or another expression of a rule file): its text, its parse, where it stood, and
    whether it was quoted (its text then starts one column after its location)."""

    text: str
    node: nodes.Node
    location: Location
    quoted: bool = False

    def location_at(self, offset: int) -> Location:
        """Line:column of the character at `offset` of the (one-line) expression."""
        return offset_location(self.location, self.quoted, offset)


def offset_location(base: Location, quoted: bool, offset: int) -> Location:
    """Line:column of the character at `offset` of a one-line scalar that stood at `base`."""
    shift = 1 if quoted and base.line else 0
    return Location(base.file, base.line, base.column + shift + offset)


@dataclass(frozen=True)
class Effects:
    """What a rule does when it fires."""

    conclude: tuple[tuple[str, object], ...] = ()
    recommend: tuple[tuple[str, object], ...] = ()  # key -> literal or Condition(expression)
    warn: tuple[str, str] | None = None  # (code, message template)


@dataclass(frozen=True)
class Rule:
    """One rule as the product manager wrote it."""

    id: str
    heuristics: tuple[str, ...]
    description: str
    priority: float
    when: tuple[Condition, ...]
    then: Effects
    because: str
    example: dict | None
    location: Location
    locations: dict  # key -> Location, for diagnostics


def read_rule_file(path: Path, sink: DiagnosticSink, display: str, root: Path | None = None):
    """Parse one YAML file of the directory `root` (its own by default); on a syntax error, or a file that is not a
    regular file inside the directory (sourcefiles.py), record E001 and return None."""
    try:
        data = read_source(path, root if root is not None else path.parent)
    except OSError as exc:  # a FIFO, a device, a link out (SourceFileError) says what it is; others say why
        message = str(exc) if isinstance(exc, SourceFileError) else f"cannot read file: {exc}"
        sink.error(Location(display), "E001", message)
        return None, ""
    text = ""
    try:
        text = decode_utf8(data, display)  # a bad byte at its line:col, as in knowledge files
        loaded = load_yaml(text, display)
        return (loaded if within_written_bounds(loaded, display, sink) else None), text
    except YamlSourceError as exc:
        sink.error(exc.location, "E001", exc.message)
        return None, text


def parse_condition(container, key, display: str, sink: DiagnosticSink, rule_id: str | None):
    """Parse a condition string; record E101 at the exact column on failure."""
    text = container[key]
    if isinstance(text, bool):
        text = "true" if text else "false"
    if not isinstance(text, str):
        sink.error(location_of(container, key, display), "E015",
                   "a condition must be text such as \"params_b >= cliff_params_b\"", rule=rule_id)
        return None
    quoted = is_quoted(container, key)
    try:
        node = parser.parse(text)
    except parser.ExprSyntaxError as exc:
        where = offset_location(location_of(container, key, display), quoted, exc.offset)
        sink.error(where, "E101", exc.message, rule=rule_id)
        return None
    literal = long_literal(node)
    if literal is not None:
        where = offset_location(location_of(container, key, display), quoted, literal.pos)
        sink.error(where, "E039", literal_problem(literal.value), rule=rule_id)
        return None
    return Condition(text, node, location_of(container, key, display), quoted)


def check_keys(mapping: LocatedDict, allowed, display: str, sink: DiagnosticSink, what: str,
               rule_id: str | None = None) -> None:
    for key in mapping:
        if key not in allowed:
            where = mapping.key_locations.get(key, Location(display))
            sink.error(where, "E002", f"unknown key '{key}' in {what}", rule=rule_id,
                       suggestion=did_you_mean(str(key), allowed))


def text_field(mapping, key, display, sink, rule_id=None, required=True) -> str:
    value = mapping.get(key)
    if value is None:
        if required:
            sink.error(getattr(mapping, "location", Location(display)), "E004", f"missing '{key}'", rule=rule_id)
        return ""
    if not isinstance(value, str):
        sink.error(location_of(mapping, key, display), "E013", f"'{key}' must be text", rule=rule_id)
        return ""
    return value


def id_list(mapping, key, display, sink, rule_id=None) -> tuple[str, ...]:
    """The ids under `key` (one id alone is taken too); E014 for anything else, keeping the ids it holds."""
    value = mapping.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        sink.error(location_of(mapping, key, display), "E014", f"'{key}' must be a list of ids", rule=rule_id)
        return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()
    holder = mapping.get(key) if isinstance(mapping.get(key), list) else None
    for index, item in enumerate(value):
        if (problem := id_problem(f"'{key}' holds an id:", item)) is not None:
            where = location_of(holder, index, display) if holder is not None else location_of(mapping, key, display)
            sink.error(where, "E038", problem, rule=rule_id)
    return tuple(v for v in value if len(v) <= MAX_ID_CHARS)


def _heuristics(rule_map, display, sink, rule_id) -> tuple[str, ...]:
    """The heuristic ids a rule cites: at least one (E004 when there is none; E014 when they are not ids)."""
    value = rule_map.get("heuristics")
    if value is None or value == []:
        sink.error(location_of(rule_map, "heuristics", display), "E004", "a rule must cite at least one "
                   "heuristic id", rule=rule_id)
        return ()
    return id_list(rule_map, "heuristics", display, sink, rule_id)


def _read_effects(rule_map, display, sink, rule_id) -> Effects:
    then = rule_map.get("then")
    if not isinstance(then, dict) or not then:
        sink.error(location_of(rule_map, "then", display), "E004",
                   "a rule needs 'then' with conclude, recommend or warn", rule=rule_id)
        return Effects()
    check_keys(then, THEN_KEYS, display, sink, "then", rule_id)
    conclude, recommend, warn = (), (), None
    if "conclude" in then:
        body = then["conclude"]
        if not isinstance(body, dict) or not body:
            sink.error(location_of(then, "conclude", display), "E020", "'conclude' maps names to values", rule=rule_id)
        else:
            for name, value in body.items():
                if not isinstance(value, (bool, int, float, str)) or (
                        isinstance(value, (int, float)) and not isinstance(value, bool) and not finite_number(value)):
                    sink.error(location_of(body, name, display), "E021",
                               f"conclusion '{name}' must be a plain value (true/false, a finite number or a word)",
                               rule=rule_id)
                elif literal_problem(value):
                    sink.error(location_of(body, name, display), "E039", literal_problem(value), rule=rule_id)
                elif not re.match(SNAKE, str(name)):
                    sink.error(body.key_locations[name], "E022", f"conclusion name '{name}' must be snake_case",
                               rule=rule_id)
                else:
                    conclude += ((str(name), value),)
    if "recommend" in then:
        recommend = _read_recommend(then, display, sink, rule_id)
    if "warn" in then:
        warn = _read_warn(then, display, sink, rule_id)
    return Effects(conclude, recommend, warn)


def _read_recommend(then, display, sink, rule_id):
    body = then["recommend"]
    if not isinstance(body, dict):
        sink.error(location_of(then, "recommend", display), "E024", "'recommend' must be a mapping", rule=rule_id)
        return ()
    check_keys(body, RECOMMEND_KEYS, display, sink, "recommend", rule_id)
    out = []
    kind = body.get("kind")
    if kind not in KINDS:
        sink.error(location_of(body, "kind", display), "E025" if "kind" in body else "E004",
                   f"recommend.kind must be one of {', '.join(KINDS)}", rule=rule_id,
                   suggestion=did_you_mean(str(kind), KINDS) if kind else None)
    precision_name = _precision_name(body)
    if "precision" in body and body["precision"] not in PRECISIONS and not precision_name:
        precision = body["precision"]
        if isinstance(precision, str):
            message, suggestion = f"unknown precision '{precision}'", did_you_mean(precision, PRECISIONS)
        else:
            message, suggestion = f"recommend.precision must be one of {', '.join(PRECISIONS)}", None
        sink.error(location_of(body, "precision", display), "E026", message, rule=rule_id, suggestion=suggestion)
    for key in RECOMMEND_KEYS:
        if key not in body:
            continue
        value = body[key]
        if key == "precision" and precision_name:  # a figure naming a precision (compiler.py checks its values)
            condition = parse_condition(body, key, display, sink, rule_id)
            if condition:
                out.append((key, condition))
        elif key in ("kind", "precision"):
            out.append((key, value))
        elif isinstance(value, bool) or value is None:
            sink.error(location_of(body, key, display), "E027", f"recommend.{key} must be a number or an expression",
                       rule=rule_id)
        elif isinstance(value, (int, float)):
            if not finite_number(value):  # YAML's .inf/.nan: no count and no JSON answer can hold it
                sink.error(location_of(body, key, display), "E027", f"recommend.{key} must be a finite number",
                           rule=rule_id)
            elif (problem := count_problem(key, value)) is not None:
                sink.error(location_of(body, key, display), "E027", problem, rule=rule_id)
            else:
                out.append((key, value))
        else:
            condition = parse_condition(body, key, display, sink, rule_id)
            if condition:
                out.append((key, condition))
    return tuple(out)


_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _precision_name(body) -> bool:
    """Whether recommend.precision is a name (of a figure that holds a precision, e.g. four_bit_precision), not a
    precision itself: the compiler checks that every value the name can take is a precision."""
    value = body.get("precision")
    return isinstance(value, str) and value not in PRECISIONS and bool(_NAME.fullmatch(value)) and "_" in value


def count_problem(key: str, value) -> str | None:
    """What is wrong with a finite constant given for recommend field `key` (None: nothing): a count of
    nodes, replicas, TP, PP, DP or a node's GPUs is a whole number of at least 1 within its range."""
    allowed = RECOMMENDED_COUNTS.get(key)
    if allowed is None or allowed.holds(value):
        return None
    return f"recommend.{key} must be {allowed}, not {short_number(value)}"


def _read_warn(then, display, sink, rule_id):
    body = then["warn"]
    if not isinstance(body, dict):
        sink.error(location_of(then, "warn", display), "E029", "'warn' needs 'code' and 'message'", rule=rule_id)
        return None
    check_keys(body, WARN_KEYS, display, sink, "warn", rule_id)
    code = text_field(body, "code", display, sink, rule_id)
    if code and (problem := id_problem("the warning code", code)) is not None:
        sink.error(location_of(body, "code", display), "E038", problem, rule=rule_id)
    elif code and not _KEBAB.match(code):
        sink.error(location_of(body, "code", display), "E030", f"warning code '{code}' must be kebab-case",
                   rule=rule_id)
    return (code, text_field(body, "message", display, sink, rule_id))


def _read_when(rule_map, display, sink, rule_id) -> tuple[Condition, ...]:
    when = rule_map.get("when")
    if when is None:
        sink.error(getattr(rule_map, "location", Location(display)), "E004", "a rule needs 'when'", rule=rule_id)
        return ()
    holder, keys = rule_map, ["when"]
    if isinstance(when, list):
        holder, keys = when, list(range(len(when)))
        if not when:
            sink.error(location_of(rule_map, "when", display), "E016", "'when' needs at least one condition",
                       rule=rule_id)
    out = []
    for key in keys:
        condition = parse_condition(holder, key, display, sink, rule_id)
        if condition:
            out.append(condition)
    return tuple(out)


def read_rule(rule_map, display: str, sink: DiagnosticSink, where: Location | None = None) -> Rule | None:
    """One entry of a `rules:` list (that stood at `where`), or None when it is not a mapping. A rule
    without an id is kept under a stand-in one, so that what it concludes is still a known name."""
    where = getattr(rule_map, "location", None) or where or Location(display)
    if not isinstance(rule_map, dict):
        sink.error(where, "E010", "each rule must be a mapping with id, heuristics, when, then and because")
        return None
    rule_id = rule_map.get("id")
    if not isinstance(rule_id, str) or not _KEBAB.match(rule_id):
        sink.error(location_of(rule_map, "id", display), "E011" if "id" in rule_map else "E004",
                   "a rule needs an 'id' in kebab-case (e.g. fits-one-node-at-fp8)")
        rule_id = str(rule_id) if rule_id is not None else None
    elif (problem := id_problem("the rule id", rule_id)) is not None:
        rule_id = clipped(rule_id, 40)  # as every diagnostic of the rule names it
        sink.error(location_of(rule_map, "id", display), "E038", problem, rule=rule_id)
    check_keys(rule_map, RULE_KEYS, display, sink, "a rule", rule_id)
    priority = _priority(rule_map, display, sink, rule_id)
    example = rule_map.get("example")
    if example is not None and not isinstance(example, dict):
        sink.error(location_of(rule_map, "example", display), "E017", "'example' must be a mapping of facts",
                   rule=rule_id)
        example = None
    rule = Rule(
        id=rule_id or f"(the rule at line {where.line})", heuristics=_heuristics(rule_map, display, sink, rule_id),
        description=text_field(rule_map, "description", display, sink, rule_id, "description" in RULE_REQUIRED),
        priority=priority, when=_read_when(rule_map, display, sink, rule_id),
        then=_read_effects(rule_map, display, sink, rule_id),
        because=text_field(rule_map, "because", display, sink, rule_id, "because" in RULE_REQUIRED),
        example=_plain(example) if example else None, location=where,
        locations={**{key: location_of(rule_map, key, display) for key in rule_map},
                   **_inner_locations(rule_map, display)},
    )
    return rule



MAX_PRIORITY = 1_000_000  # far beyond any real ordering; keeps every priority an ordinary finite number


def _priority(rule_map, display, sink, rule_id) -> float:
    """The rule's priority: a finite number within ±MAX_PRIORITY (NaN sorts nowhere, and a
    400-digit integer overflows every float conversion downstream)."""
    priority = rule_map.get("priority", 1000)
    where = location_of(rule_map, "priority", display)
    if isinstance(priority, bool) or not isinstance(priority, (int, float)):
        sink.error(where, "E012", "'priority' must be a number", rule=rule_id)
        return 1000
    if not -MAX_PRIORITY <= priority <= MAX_PRIORITY:  # false for NaN too
        sink.error(where, "E012", f"'priority' must be a finite number from {-MAX_PRIORITY:,} to {MAX_PRIORITY:,}",
                   rule=rule_id)
        return 1000
    return priority


def _inner_locations(rule_map, display) -> dict:
    """Where the parts of `then` and `example` stood: 'conclude:<name>' (its key), 'warn.code',
    'warn.message' and 'example:<fact>' (values), so diagnostics point at the part at fault."""
    out = {}
    then = rule_map.get("then")
    if isinstance(then, LocatedDict):
        conclude, warn = then.get("conclude"), then.get("warn")
        if isinstance(conclude, LocatedDict):
            out.update({f"conclude:{name}": where for name, where in conclude.key_locations.items()})
        if isinstance(warn, LocatedDict):
            out.update({f"warn.{key}": location_of(warn, key, display) for key in ("code", "message") if key in warn})
    example = rule_map.get("example")
    if isinstance(example, LocatedDict):
        out.update({f"example:{key}": location_of(example, key, display) for key in example})
    return out


def top_level(data, key: str, kind: type, display: str, sink: DiagnosticSink):
    """The file's top-level `key:` section when it is a `kind`, else None and a root-cause E004 (the file
    reads as nothing: the checks across files would blame every name it defines)."""
    section = data.get(key) if isinstance(data, dict) else None
    if isinstance(section, kind):
        return section
    what = "list" if kind is list else "mapping"
    where, found = Location(display, 1, 1), "the file holds no mapping"
    if isinstance(data, dict) and key in data:
        where, found = location_of(data, key, display), f"'{key}:' is not a {what}"
    elif isinstance(data, dict) and data:
        first = next(iter(data))
        where = getattr(data, "key_locations", {}).get(first, where)
        found = "found " + ", ".join(f"{name}:" for name in list(data)[:3])
    sink.error(where, "E004", f"expected a top-level '{key}:' {what} ({found})", root=True)
    return None


def read_rules(data, display: str, sink: DiagnosticSink) -> list[Rule]:
    if top_level(data, "rules", list, display, sink) is None:
        return []
    check_keys(data, ("rules",), display, sink, "a rule file")
    items = data["rules"]
    return [rule for rule in (read_rule(item, display, sink, location_of(items, index, display))
                              for index, item in enumerate(items)) if rule]
