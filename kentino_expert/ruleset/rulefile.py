"""Reading rules/*.yaml into typed rule, parameter and fact-policy records, collecting diagnostics."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..lang import parser as ast
from .diagnostics import DiagnosticSink
from ..errors import Location, did_you_mean
from ..domain.workload import PRECISIONS
from ..yamlsrc import LocatedDict, YamlSourceError, load_yaml, location_of, to_plain as _plain

RULE_KEYS = ("id", "heuristics", "description", "priority", "when", "then", "because", "example")
THEN_KEYS = ("conclude", "recommend", "warn")
RECOMMEND_KEYS = ("kind", "precision", "nodes", "replicas", "tp", "pp", "dp", "interconnect", "gpu", "gpus_per_node")
KINDS = ("single-node", "single-node-int4", "dp-replicas", "multi-node-ib", "frontier")
PARAMETER_KEYS = ("value", "unit", "heuristics", "description")
FACT_KEYS = ("description", "ask", "default", "tasks", "answered_by")
DEFAULT_KEYS = ("when", "value", "why")
SPECIAL_FILES = ("parameters.yaml", "facts.yaml")
_KEBAB = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Condition:
    """One `when` entry: its text, its parse, and where it stood."""

    text: str
    node: ast.Node
    location: Location


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


@dataclass(frozen=True)
class Parameter:
    """A named policy number."""

    name: str
    value: float
    unit: str
    description: str
    heuristics: tuple[str, ...]
    location: Location


@dataclass(frozen=True)
class FactDefault:
    """A default the engine assumes for a missing fact, under an optional condition."""

    value: object
    why: str
    when: Condition | None
    location: Location


@dataclass(frozen=True)
class FactPolicy:
    """What a fact means, the question to ask for it, and its defaults."""

    name: str
    description: str
    ask: str
    defaults: tuple[FactDefault, ...]
    location: Location
    tasks: tuple[str, ...] = ()
    answered_by: tuple[str, ...] = ()  # facts any one of which, given, makes this one not worth asking


def expression_location(container, key, filename: str, text: str, offset: int) -> Location:
    """Line:column of a character inside a one-line scalar (quoted or plain)."""
    base = location_of(container, key, filename)
    shift = 1 if base.line and _starts_quoted(base, text) else 0
    return Location(base.file, base.line, base.column + shift + offset)


def _starts_quoted(base: Location, text: str) -> bool:
    line = _SOURCE_LINES.get(base.file, [])
    if 0 < base.line <= len(line):
        row = line[base.line - 1]
        return base.column - 1 < len(row) and row[base.column - 1] in "'\""
    return False


_SOURCE_LINES: dict[str, list[str]] = {}


def read_rule_file(path: Path, sink: DiagnosticSink, display: str):
    """Parse one YAML file; on a syntax error record E001 and return None."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        sink.error(Location(display), "E001", f"cannot read file: {exc}")
        return None, ""
    _SOURCE_LINES[display] = text.splitlines()
    try:
        return load_yaml(text, display), text
    except YamlSourceError as exc:
        sink.error(exc.location, "E001", exc.message)
        return None, text


def parse_condition(container, key, display: str, sink: DiagnosticSink, rule_id: str | None):
    """Parse a condition string; record E101 at the exact column on failure."""
    text = container[key]
    if isinstance(text, bool):
        text = "true" if text else "false"
    if not isinstance(text, str):
        sink.error(location_of(container, key, display), "E003",
                   "a condition must be a string such as \"params_b >= cliff_params_b\"", rule=rule_id)
        return None
    try:
        node = ast.parse(text)
    except ast.ExprSyntaxError as exc:
        where = expression_location(container, key, display, text, exc.offset)
        sink.error(where, "E101", exc.message, rule=rule_id)
        return None
    return Condition(text, node, location_of(container, key, display))


def check_keys(mapping: LocatedDict, allowed, display: str, sink: DiagnosticSink, what: str,
               rule_id: str | None = None) -> None:
    for key in mapping:
        if key not in allowed:
            where = mapping.key_locations.get(key, Location(display))
            sink.error(where, "E002", f"unknown key '{key}' in {what}", rule=rule_id,
                       suggestion=did_you_mean(str(key), allowed))


def _string(mapping, key, display, sink, rule_id=None, required=True) -> str:
    value = mapping.get(key)
    if value is None:
        if required:
            sink.error(getattr(mapping, "location", Location(display)), "E004", f"missing '{key}'", rule=rule_id)
        return ""
    if not isinstance(value, str):
        sink.error(location_of(mapping, key, display), "E003", f"'{key}' must be a string", rule=rule_id)
        return ""
    return value


def _id_list(mapping, key, display, sink, rule_id=None) -> tuple[str, ...]:
    value = mapping.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        sink.error(location_of(mapping, key, display), "E003", f"'{key}' must be a list of ids", rule=rule_id)
        return ()
    return tuple(value)


def read_parameters(data, display: str, sink: DiagnosticSink) -> dict[str, Parameter]:
    out: dict[str, Parameter] = {}
    section = data.get("parameters") if isinstance(data, dict) else None
    if not isinstance(section, dict):
        sink.error(Location(display, 1, 1), "E004", "expected a top-level 'parameters:' mapping")
        return out
    check_keys(data, ("parameters",), display, sink, "the parameters file")
    for name, body in section.items():
        where = section.key_locations.get(name, Location(display))
        if not isinstance(body, dict):
            body = LocatedDict({"value": body})
            body.key_locations, body.value_locations, body.location = {}, {}, where
        check_keys(body, PARAMETER_KEYS, display, sink, f"parameter '{name}'")
        value = body.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            sink.error(location_of(body, "value", display), "E003", f"parameter '{name}' needs a numeric 'value'")
            value = 0  # still a known name: its users are not reported as referring to an unknown one

        out[str(name)] = Parameter(str(name), value, str(body.get("unit", "")), str(body.get("description", "")),
                                   _id_list(body, "heuristics", display, sink), where)
    return out


def read_fact_policies(data, display: str, sink: DiagnosticSink) -> dict[str, FactPolicy]:
    out: dict[str, FactPolicy] = {}
    section = data.get("facts") if isinstance(data, dict) else None
    if not isinstance(section, dict):
        sink.error(Location(display, 1, 1), "E004", "expected a top-level 'facts:' mapping")
        return out
    check_keys(data, ("facts",), display, sink, "the facts file")
    for name, body in section.items():
        where = section.key_locations.get(name, Location(display))
        if not isinstance(body, dict):
            sink.error(where, "E003", f"fact '{name}' must be a mapping with description/ask/default")
            continue
        check_keys(body, FACT_KEYS, display, sink, f"fact '{name}'")
        defaults = []
        raw = body.get("default", [])
        if not isinstance(raw, list):
            sink.error(location_of(body, "default", display), "E003", "'default' must be a list of {when, value, why}")
            raw = []
        for index, item in enumerate(raw):
            item_where = location_of(raw, index, display)
            if not isinstance(item, dict) or "value" not in item:
                sink.error(item_where, "E003", "a default needs 'value' (and optional 'when', 'why')")
                continue
            check_keys(item, DEFAULT_KEYS, display, sink, f"a default of '{name}'")
            when = parse_condition(item, "when", display, sink, None) if "when" in item else None
            defaults.append(FactDefault(item["value"], str(item.get("why", "")), when, item_where))
        out[str(name)] = FactPolicy(str(name), _string(body, "description", display, sink),
                                    _string(body, "ask", display, sink), tuple(defaults), where,
                                    _id_list(body, "tasks", display, sink), _id_list(body, "answered_by", display, sink))
    for name, policy in out.items():
        for other in policy.answered_by:
            if other not in out or other == name:
                sink.error(location_of(section[name], "answered_by", display), "E102",
                           f"answered_by of '{name}' names '{other}', which is not another fact of this file",
                           suggestion=did_you_mean(other, [n for n in out if n != name]))
    return out


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
            sink.error(location_of(then, "conclude", display), "E003", "'conclude' maps names to values", rule=rule_id)
        else:
            for name, value in body.items():
                if not isinstance(value, (bool, int, float, str)) or (
                        isinstance(value, (int, float)) and not isinstance(value, bool) and not ast.finite_number(value)):
                    sink.error(location_of(body, name, display), "E003",
                               f"conclusion '{name}' must be a plain value (true/false, a finite number or a word)",
                               rule=rule_id)
                elif not re.match(r"^[a-z][a-z0-9_]*$", str(name)):
                    sink.error(body.key_locations[name], "E003", f"conclusion name '{name}' must be snake_case", rule=rule_id)
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
        sink.error(location_of(then, "recommend", display), "E003", "'recommend' must be a mapping", rule=rule_id)
        return ()
    check_keys(body, RECOMMEND_KEYS, display, sink, "recommend", rule_id)
    out = []
    kind = body.get("kind")
    if kind not in KINDS:
        sink.error(location_of(body, "kind", display), "E003" if "kind" in body else "E004",
                   f"recommend.kind must be one of {', '.join(KINDS)}", rule=rule_id,
                   suggestion=did_you_mean(str(kind), KINDS) if kind else None)
    if "precision" in body and body["precision"] not in PRECISIONS:
        precision = body["precision"]
        if isinstance(precision, str):
            message, suggestion = f"unknown precision '{precision}'", did_you_mean(precision, PRECISIONS)
        else:
            message, suggestion = f"recommend.precision must be one of {', '.join(PRECISIONS)}", None
        sink.error(location_of(body, "precision", display), "E003", message, rule=rule_id, suggestion=suggestion)
    for key in RECOMMEND_KEYS:
        if key not in body:
            continue
        value = body[key]
        if key in ("kind", "precision"):
            out.append((key, value))
        elif isinstance(value, bool) or value is None:
            sink.error(location_of(body, key, display), "E003", f"recommend.{key} must be a number or an expression",
                       rule=rule_id)
        elif isinstance(value, (int, float)):
            if ast.finite_number(value):
                out.append((key, value))
            else:  # YAML's .inf/.nan: no count and no JSON answer can hold it
                sink.error(location_of(body, key, display), "E003", f"recommend.{key} must be a finite number",
                           rule=rule_id)
        else:
            condition = parse_condition(body, key, display, sink, rule_id)
            if condition:
                out.append((key, condition))
    return tuple(out)


def _read_warn(then, display, sink, rule_id):
    body = then["warn"]
    if not isinstance(body, dict):
        sink.error(location_of(then, "warn", display), "E003", "'warn' needs 'code' and 'message'", rule=rule_id)
        return None
    check_keys(body, ("code", "message"), display, sink, "warn", rule_id)
    code = _string(body, "code", display, sink, rule_id)
    if code and not _KEBAB.match(code):
        sink.error(location_of(body, "code", display), "E003", f"warning code '{code}' must be kebab-case", rule=rule_id)
    return (code, _string(body, "message", display, sink, rule_id))


def _read_when(rule_map, display, sink, rule_id) -> tuple[Condition, ...]:
    when = rule_map.get("when")
    if when is None:
        sink.error(getattr(rule_map, "location", Location(display)), "E004", "a rule needs 'when'", rule=rule_id)
        return ()
    holder, keys = rule_map, ["when"]
    if isinstance(when, list):
        holder, keys = when, list(range(len(when)))
        if not when:
            sink.error(location_of(rule_map, "when", display), "E003", "'when' needs at least one condition", rule=rule_id)
    out = []
    for key in keys:
        condition = parse_condition(holder, key, display, sink, rule_id)
        if condition:
            out.append(condition)
    return tuple(out)


def read_rule(rule_map, display: str, sink: DiagnosticSink) -> Rule | None:
    """One entry of a `rules:` list, or None when it is too broken to use."""
    where = getattr(rule_map, "location", Location(display))
    if not isinstance(rule_map, dict):
        sink.error(where, "E003", "each rule must be a mapping with id, when, then")
        return None
    rule_id = rule_map.get("id")
    if not isinstance(rule_id, str) or not _KEBAB.match(rule_id):
        sink.error(location_of(rule_map, "id", display), "E003" if "id" in rule_map else "E004",
                   "a rule needs an 'id' in kebab-case (e.g. fits-one-node-at-fp8)")
        rule_id = str(rule_id) if rule_id is not None else None
    check_keys(rule_map, RULE_KEYS, display, sink, "a rule", rule_id)
    priority = _priority(rule_map, display, sink, rule_id)
    example = rule_map.get("example")
    if example is not None and not isinstance(example, dict):
        sink.error(location_of(rule_map, "example", display), "E003", "'example' must be a mapping of facts", rule=rule_id)
        example = None
    rule = Rule(
        id=rule_id or "?", heuristics=_id_list(rule_map, "heuristics", display, sink, rule_id),
        description=_string(rule_map, "description", display, sink, rule_id, required=False),
        priority=priority, when=_read_when(rule_map, display, sink, rule_id),
        then=_read_effects(rule_map, display, sink, rule_id),
        because=_string(rule_map, "because", display, sink, rule_id),
        example=_plain(example) if example else None, location=where,
        locations={**{key: location_of(rule_map, key, display) for key in rule_map},
                   **_inner_locations(rule_map, display)},
    )
    return rule if rule_id else None



MAX_PRIORITY = 1_000_000  # far beyond any real ordering; keeps every priority an ordinary finite number


def _priority(rule_map, display, sink, rule_id) -> float:
    """The rule's priority: a finite number within ±MAX_PRIORITY (NaN sorts nowhere, and a
    400-digit integer overflows every float conversion downstream)."""
    priority = rule_map.get("priority", 1000)
    where = location_of(rule_map, "priority", display)
    if isinstance(priority, bool) or not isinstance(priority, (int, float)):
        sink.error(where, "E003", "'priority' must be a number", rule=rule_id)
        return 1000
    if not -MAX_PRIORITY <= priority <= MAX_PRIORITY:  # false for NaN too
        sink.error(where, "E003", f"'priority' must be a finite number from {-MAX_PRIORITY:,} to {MAX_PRIORITY:,}",
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


def read_rules(data, display: str, sink: DiagnosticSink) -> list[Rule]:
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        sink.error(Location(display, 1, 1), "E004", "expected a top-level 'rules:' list")
        return []
    check_keys(data, ("rules",), display, sink, "a rule file")
    return [rule for rule in (read_rule(item, display, sink) for item in data["rules"]) if rule]
