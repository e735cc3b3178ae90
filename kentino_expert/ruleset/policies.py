"""Reading rules/parameters.yaml and rules/facts.yaml: the policy numbers, and what each fact means, the
question to ask for it and its defaults."""
from __future__ import annotations

from dataclasses import dataclass

from ..domain.figures import SIZING_PARAMETER_RANGES
from ..domain.vocabulary import TASKS
from ..domain.workload import Workload, fact_problem
from ..errors import Location, did_you_mean
from ..lang.valuetypes import finite_number, short_number
from ..yamlsrc import LocatedDict, location_of
from .bounds import literal_problem, sentence_problem
from .diagnostics import DiagnosticSink
from .rulefile import Condition, check_keys, id_list, parse_condition, text_field, top_level

# The keys of a parameter, a fact and a default, and those each must have (as in rulefile.py, the editor
# schema is generated from these). A parameter may also be written as its value alone: `name: 0.70`.
PARAMETER_KEYS = ("value", "unit", "heuristics", "description")
PARAMETER_REQUIRED = ("value",)
FACT_KEYS = ("description", "ask", "default", "tasks", "answered_by")
FACT_REQUIRED = ("description", "ask")
DEFAULT_KEYS = ("when", "value", "why")
DEFAULT_REQUIRED = ("value",)


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
    ask_location: Location | None = None  # where `ask` stands (its `{shipped_cards}` is filled in: asks.py)


def _number_in(value) -> str | None:
    """The number a text value was meant to be (`100,000`, `100_000` or `70%` is text in YAML 1.2), else None."""
    if not isinstance(value, str):
        return None
    text, scale = value.strip().replace(",", "").replace("_", ""), 1
    if text.endswith("%"):
        text, scale = text[:-1].strip(), 100
    try:
        number = float(text) / scale
    except ValueError:
        return None
    return (str(int(number)) if number.is_integer() else repr(number)) if finite_number(number) else None


def read_parameters(data, display: str, sink: DiagnosticSink) -> dict[str, Parameter]:
    out: dict[str, Parameter] = {}
    section = top_level(data, "parameters", dict, display, sink)
    if section is None:
        return out
    check_keys(data, ("parameters",), display, sink, "the parameters file")
    for name, body in section.items():
        where = section.key_locations.get(name, Location(display))
        if not isinstance(body, dict):
            body = LocatedDict({"value": body})
            body.key_locations, body.value_locations, body.location = {}, {}, where
        check_keys(body, PARAMETER_KEYS, display, sink, f"parameter '{name}'")
        value = body.get("value")
        if not finite_number(value):  # .nan, .inf and an integer beyond a double are no value either
            sink.error(location_of(body, "value", display), "E031",
                       f"parameter '{name}' needs a finite numeric 'value'", suggestion=_number_in(value))
            value = 0  # a root cause (E031): the checks that would read this value do not run
        elif name in SIZING_PARAMETER_RANGES and not SIZING_PARAMETER_RANGES[name].holds(value):
            sink.error(location_of(body, "value", display), "E036",
                       f"parameter '{name}' must be {SIZING_PARAMETER_RANGES[name]}, not {short_number(value)}: the "
                       "sizing reads it (kentino_expert/domain/figure_specs.py, SIZING_PARAMETER_RANGES)")
        unit, description = (text_field(body, key, display, sink, None, key in PARAMETER_REQUIRED)
                             for key in ("unit", "description"))
        out[str(name)] = Parameter(str(name), value, unit, description, id_list(body, "heuristics", display, sink),
                                   where)
    return out


def read_fact_policies(data, display: str, sink: DiagnosticSink) -> dict[str, FactPolicy]:
    out: dict[str, FactPolicy] = {}
    section = top_level(data, "facts", dict, display, sink)
    if section is None:
        return out
    check_keys(data, ("facts",), display, sink, "the facts file")
    for name, body in section.items():
        where = section.key_locations.get(name, Location(display))
        if not isinstance(body, dict):
            sink.error(where, "E033", f"fact '{name}' must be a mapping with description/ask/default")
            continue
        check_keys(body, FACT_KEYS, display, sink, f"fact '{name}'")
        defaults = []
        raw = body.get("default", [])
        if not isinstance(raw, list):
            sink.error(location_of(body, "default", display), "E034", "'default' must be a list of {when, value, why}")
            raw = []
        for index, item in enumerate(raw):
            item_where = location_of(raw, index, display)
            if not isinstance(item, dict) or any(key not in item for key in DEFAULT_REQUIRED):
                sink.error(item_where, "E034", "a default needs 'value' (and optional 'when', 'why')")
                continue
            check_keys(item, DEFAULT_KEYS, display, sink, f"a default of '{name}'")
            when = parse_condition(item, "when", display, sink, None) if "when" in item else None
            why = _sentence(item, "why", display, sink, "why" in DEFAULT_REQUIRED)
            if literal_problem(item["value"]):
                sink.error(location_of(item, "value", display), "E039", literal_problem(item["value"]))
                continue
            defaults.append(FactDefault(item["value"], why, when, item_where))
        description = text_field(body, "description", display, sink, None, "description" in FACT_REQUIRED)
        ask = _sentence(body, "ask", display, sink, "ask" in FACT_REQUIRED)
        tasks = id_list(body, "tasks", display, sink)
        _check_tasks(body, tasks, display, sink)
        _check_default_values(str(name), defaults, sink)
        out[str(name)] = FactPolicy(str(name), description, ask, tuple(defaults), where, tasks,
                                    id_list(body, "answered_by", display, sink), location_of(body, "ask", display))
    for name, policy in out.items():
        for other in policy.answered_by:
            if other not in out or other == name:
                sink.error(location_of(section[name], "answered_by", display), "E102",
                           f"answered_by of '{name}' names '{other}', which is not another fact of this file",
                           suggestion=did_you_mean(other, [n for n in out if n != name]))
    return out


def _sentence(body, key: str, display: str, sink: DiagnosticSink, required: bool) -> str:
    """A text field that is one sentence of an answer (a question, a default's reason): E108 past the bound."""
    text = text_field(body, key, display, sink, None, required)
    if (problem := sentence_problem(text, key)) is not None:
        sink.error(location_of(body, key, display), "E108", problem)
        return ""
    return text


def _check_tasks(body, tasks: tuple[str, ...], display: str, sink: DiagnosticSink) -> None:
    """E037 for a task that is not one (the fact would silently never be asked for it)."""
    holder = body.get("tasks") if isinstance(body.get("tasks"), list) else None
    for index, task in enumerate(tasks):
        if task not in TASKS:
            where = location_of(holder, index, display) if holder is not None else location_of(body, "tasks", display)
            sink.error(where, "E037", f"'{task}' is not a task (tasks: {', '.join(TASKS)})",
                       suggestion=did_you_mean(task, TASKS))


def _check_default_values(name: str, defaults, sink: DiagnosticSink) -> None:
    """E037 for a default an input fact could not be given (`gpus_per_node: 0`): assumed, it would be sized."""
    if name not in Workload.model_fields:
        return
    for default in defaults:
        problem = fact_problem(name, default.value)
        if problem is not None:
            sink.error(default.location, "E037", f"default of '{name}': {default.value!r} is not a value the fact "
                                                 f"can take ({problem})")
