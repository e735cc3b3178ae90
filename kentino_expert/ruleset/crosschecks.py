"""Checks across the rules of a directory, before they compile: ids, heuristics, examples, the parameters the
sizing reads, the names conclusions and parameters take, warning codes."""
from __future__ import annotations

from pathlib import Path

from ..domain.catalog import Knowledge
from ..domain.derive import derive
from ..domain.figures import SIZING_PARAMETERS
from ..domain.workload import validate_facts
from ..errors import KentinoError, Location, did_you_mean
from .namespace import reserved_kind
from .rulefile import SPECIAL_FILES


def conclusions_of(rules) -> dict:
    """name -> every literal value a rule concludes for it."""
    out: dict = {}
    for rule in rules:
        for name, value in rule.then.conclude:
            out.setdefault(name, []).append(value)
    return out


def check_identity(rules, knowledge: Knowledge, sink) -> None:
    """Rule ids are unique (E105); the heuristics each rule cites are in the catalog (E104)."""
    seen = {}
    for rule in rules:
        if rule.id in seen:
            sink.error(rule.locations.get("id", rule.location), "E105",
                       f"rule id '{rule.id}' is already used at {seen[rule.id]}", rule=rule.id)
        else:
            seen[rule.id] = rule.locations.get("id", rule.location)
        for hid in rule.heuristics:
            if hid not in knowledge.heuristics:
                sink.error(rule.locations.get("heuristics", rule.location), "E104", f"unknown heuristic '{hid}'",
                           rule=rule.id, suggestion=did_you_mean(hid, knowledge.heuristics))


def check_examples(rules, knowledge: Knowledge, policies: dict, params: dict, sink) -> None:
    """A rule's example must be a valid workload (E018): `rules docs` and `rules examples` run it."""
    if any(Path(d.location.file).name in SPECIAL_FILES for d in sink.errors):
        return  # figures computed from a broken parameter would blame the examples for it
    for rule in rules:
        if not rule.example:
            continue
        try:
            derive(validate_facts(rule.example), knowledge, policies, params)
        except KentinoError as exc:
            field = (getattr(exc, "field", None) or "").split(".")[0]
            where = rule.locations.get(f"example:{field}", rule.locations.get("example", rule.location))
            sink.error(where, "E018", f"example: {exc.render() if not field else field + ': ' + exc.message}",
                       rule=rule.id, suggestion=None if not field else exc.suggestion)
        except (ArithmeticError, ValueError, TypeError) as exc:  # a figure the example breaks
            sink.error(rule.locations.get("example", rule.location), "E018", f"example: {exc}", rule=rule.id)


def check_sizing_parameters(files, parameters, sink) -> None:
    """The sizing reads a few parameters itself (figures.SIZING_PARAMETERS): deleting one is E032, a root
    cause (the figures, the ranges and the examples all depend on it)."""
    where = next((name for name in files if Path(name).name == "parameters.yaml"), None)
    read = ("E031", "E036")  # a parameter's value refused: the file was read, and the others are still checked
    if where is None or any(d.is_root and d.code not in read and d.location.file == where for d in sink.errors):
        return  # parameters.yaml is missing or could not be read: that is said already
    # at the first parameter, where the list to add it to starts (the file's start when it lists none)
    first = min((p.location for p in parameters.values() if p.location.line),
                key=lambda at: (at.line, at.column), default=Location(where, 1, 1))
    for name in SIZING_PARAMETERS:
        if name not in parameters:
            sink.error(first, "E032", f"parameter '{name}' is missing: the sizing uses it "
                       "(kentino_expert/domain/figure_specs.py, SIZING_PARAMETERS)")


def check_conclusion_names(rules, parameters, sink, engine_names=()) -> None:
    """A conclusion may not take a name that already means something: concluding a recommendation
    field breaks every answer, a parameter makes the trace lie, a warning key hides the warning, a
    property of the engine's own (`engine_names`) breaks the engine."""
    for rule in rules:
        for name, _ in rule.then.conclude:
            kind = reserved_kind(name, parameters, engine_names)
            if kind:
                sink.error(rule.locations.get(f"conclude:{name}", rule.location), "E023",
                           f"cannot conclude '{name}': it is {kind}; give the conclusion a name of its own",
                           rule=rule.id)


_WHOSE = {"a fact": "fact", "a figure": "figure"}


def check_parameter_names(parameters: dict, sink) -> None:
    """W309 for a parameter named like a fact, a figure or another name of the state: the rules that name it
    read the parameter (it is folded in), the sizing and the answer the state's value, without a word."""
    for name, parameter in parameters.items():
        kind = reserved_kind(name, {})
        if kind:
            sink.warning(parameter.location, "W309", f"parameter '{name}' has the name of {kind}: the rules that name "
                         f"'{name}' read this parameter's {parameter.value:g}, the sizing and the answer read the "
                         f"{_WHOSE.get(kind, 'state')}'s value; give the parameter a name of its own")


def check_warning_codes(rules, sink) -> None:
    """Each warning code is given at most once: a second rule with the same code would never fire."""
    seen = {}
    for rule in rules:
        if not rule.then.warn or not rule.then.warn[0]:
            continue
        code, where = rule.then.warn[0], rule.locations.get("warn.code", rule.location)
        if code in seen:
            first_rule, first_where = seen[code]
            sink.error(where, "E105", f"warning code '{code}' is already given by rule '{first_rule}' at "
                       f"{first_where}; each code is given at most once, so whichever rule gives it first "
                       "silences the other", rule=rule.id)
        else:
            seen[code] = (rule.id, where)
