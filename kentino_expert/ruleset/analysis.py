"""Whole-rule-set analyses: unused parameters, unencoded heuristics, dead, shadowed and inverted rules."""
from __future__ import annotations

import string

from ..domain.figure_specs import SIZING_PARAMETER_RANGES
from ..domain.state import RECOMMENDATION_PREFIX
from ..errors import Location
from ..lang import nodes
from ..lang.fold import fold

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def conjuncts(node) -> list:
    """Top-level AND terms of a condition."""
    if isinstance(node, nodes.And):
        return [term for item in node.items for term in conjuncts(item)]
    return [node]


def _constraint(term):
    """(name, op, constant) for `name OP literal` (either side), or None."""
    match term:
        case nodes.Compare(op=op, left=nodes.Name(id=name), right=nodes.Literal(value=value)):
            return name, op, value
        case nodes.Compare(op=op, left=nodes.Literal(value=value), right=nodes.Name(id=name)):
            return name, _FLIP[op], value
        case nodes.In(left=nodes.Name(id=name), items=items, negated=False):
            return name, "in", frozenset(item.value for item in items)
        case nodes.Name(id=name):
            return name, "==", True
    return None


def _admits(constraint, value) -> bool:
    _, op, constant = constraint
    if op == "in":
        return value in constant
    try:
        return {"<": value < constant, "<=": value <= constant, ">": value > constant, ">=": value >= constant,
                "==": value == constant, "!=": value != constant}[op]
    except TypeError:
        return False


def _probe_values(constraints):
    values = set()
    for _, op, constant in constraints:
        if op == "in":
            values |= set(constant)
        elif isinstance(constant, (int, float)) and not isinstance(constant, bool):
            values |= {constant - 1e-9, constant, constant + 1e-9}
        else:
            values.add(constant)
    return values


def satisfiable(constraints) -> bool:
    """Whether one value can meet every constraint on the same name (probing the boundary points)."""
    probes = _probe_values(constraints)
    if any(op in ("<", "<=", ">", ">=") for _, op, _c in constraints):
        numbers = [v for v in probes if isinstance(v, (int, float)) and not isinstance(v, bool)]
        probes |= {min(numbers) - 1, max(numbers) + 1} if numbers else set()
    if all(op in ("!=",) for _, op, _c in constraints):
        return True
    return any(all(_admits(c, v) for c in constraints) for v in probes)


def contradiction(rule, params: dict) -> str | None:
    """A description of two conditions of the rule that no value meets together (parameters folded in
    from `params`), or None."""
    by_name: dict = {}
    for condition in rule.source.when:
        for term in conjuncts(condition.node):
            constraint = _constraint(fold(term, params))
            if constraint:
                by_name.setdefault(constraint[0], []).append(constraint)
    for name, constraints in by_name.items():
        if len(constraints) > 1 and not satisfiable(constraints):
            return f"no value of '{name}' meets all of: " + ", ".join(f"{op} {c!r}" for _, op, c in constraints)
    return None


def implies(stronger: list, weaker_term) -> bool:
    """Whether the conjunction `stronger` guarantees `weaker_term` (syntactic, plus intervals)."""
    if any(term == weaker_term for term in stronger):
        return True
    weak = _constraint(weaker_term)
    if weak is None:
        return False
    for term in stronger:
        strong = _constraint(term)
        if strong and strong[0] == weak[0] and _constraint_implies(strong, weak):
            return True
    return False


def _constraint_implies(strong, weak) -> bool:
    probes = _probe_values([strong, weak])
    if strong[1] == "in":
        return all(_admits(weak, v) for v in strong[2])
    if strong[1] == "==":
        return _admits(weak, strong[2])
    if strong[1] in ("<", "<=", ">", ">=") and weak[1] in ("<", "<=", ">", ">="):
        return all(_admits(weak, v) for v in probes if _admits(strong, v)) and (
            strong[1][0] == weak[1][0])
    return False


def _strip_positions(node):
    """Structural copy with positions zeroed, so equal conditions compare equal."""
    if isinstance(node, nodes.Node):
        values = {k: _strip_positions(v) for k, v in node.__dict__.items() if k != "pos"}
        return type(node)(pos=0, **values)
    if isinstance(node, tuple):
        return tuple(_strip_positions(v) for v in node)
    return node


def _terms(rule, params: dict) -> list:
    return [_strip_positions(fold(term, params)) for c in rule.source.when for term in conjuncts(c.node)]


def shadowing(rules, params: dict) -> list[tuple]:
    """(low, high) pairs: whenever `low` could fire, `high` (earlier) fires first and pre-empts it."""
    found = []
    terms = {rule.id: _terms(rule, params) for rule in rules}
    # `implies` needs a term's names among the stronger side's: a cheap exact pre-filter
    names = {rule_id: frozenset(n.id for term in ts for n in nodes.names_in(term)) for rule_id, ts in terms.items()}
    recommenders, writers = [], {}  # earlier rules, indexed by what could make them pre-empt a later one
    for low in rules:
        for high in _pre_empting_candidates(low, recommenders, writers):
            if names[high.id] <= names[low.id] and all(implies(terms[low.id], t) for t in terms[high.id]):
                found.append((low, high))
                break
        if low.source.then.recommend:
            recommenders.append(low)
        for name in set(low.writes):
            writers.setdefault(name, []).append(low)
    return found


def _pre_empting_candidates(low, recommenders, writers) -> list:
    """The earlier rules whose firing blocks `low`, in rule order: if `low` recommends, every earlier
    recommending rule (one recommendation per answer); otherwise every earlier rule writing a
    property `low` writes (properties are write-once). Indexed, not a pairwise scan: the scan was
    quadratic, 2 s of a 3.5 s load at 2,000 rules."""
    if low.source.then.recommend:
        return recommenders
    seen = {}
    for name in set(low.writes):
        for high in writers.get(name, ()):
            seen[high.order] = high
    return [seen[order] for order in sorted(seen)]


def _template_names(template: str) -> set:
    try:
        return {f for _, f, _, _ in string.Formatter().parse(template) if f}
    except ValueError:
        return set()


def _used_names(rules) -> set:
    used = set()
    for rule in rules:
        for condition in rule.source.when:
            used |= {n.id for n in nodes.names_in(condition.node)}
        for _, value in rule.source.then.recommend:
            if hasattr(value, "node"):
                used |= {n.id for n in nodes.names_in(value.node)}
        used |= _template_names(rule.source.because)
        if rule.source.then.warn:
            used |= _template_names(rule.source.then.warn[1])
    return used


def analyse(rules, parameters, knowledge, namespace, sink, selection=None) -> None:
    """Add the W3xx warnings of a compiled rule set to `sink` (a parameter the selection policy or the sizing reads
    is used)."""
    params = {name: p.value for name, p in parameters.items()}
    used = _used_names(rules) | set(SIZING_PARAMETER_RANGES) | (selection.parameters if selection else set())
    for name, parameter in parameters.items():
        if name not in used:
            sink.warning(parameter.location, "W303", f"parameter '{name}' is not used by any rule")
    encoded = {hid for rule in rules for hid in rule.heuristics}
    for hid in knowledge.heuristics:
        if hid not in encoded:
            sink.warning(knowledge.heuristic_locations.get(hid, HEURISTICS_LOCATION), "W304",
                         f"heuristic '{hid}' is not encoded by any rule")
    _dead_rules(rules, params, sink)
    for low, high in shadowing(rules, params):
        sink.warning(low.location, "W302", f"never fires: '{high.id}' (priority {high.priority:g}) "
                     "matches whenever this rule does and pre-empts it", rule=low.id)
    _inversions(rules, namespace, sink)


def report_shape_problems(problems, sink) -> None:
    """A backend's shape problems (engine/backend.py) as errors at the culprit's column."""
    for problem in problems:
        sink.error(_shape_location(problem), problem.code, problem.message, rule=problem.rule.id)


def _shape_location(problem):
    """The column of the culprit inside its `when` entry (guards follow the entries: no location)."""
    rule, index = problem.rule, problem.condition
    when = rule.source.when
    if index is None or index >= len(when):
        return rule.location
    return when[index].location_at(problem.pos)


HEURISTICS_LOCATION = Location("knowledge/heuristics.yaml", 1, 1)


def _dead_rules(rules, params, sink) -> None:
    written = {name for rule in rules for name in rule.writes}
    for rule in rules:
        reason = contradiction(rule, params)
        if reason is None:
            for name in rule.reads:
                if name.startswith(RECOMMENDATION_PREFIX) and name not in written:
                    reason = f"it reads '{name}' but no rule recommends that field"
        if reason:
            sink.warning(rule.location, "W301", f"can never fire: {reason}", rule=rule.id)


def _inversions(rules, namespace, sink) -> None:
    producers: dict = {}
    for rule in rules:
        for name in rule.writes:
            producers.setdefault(name, []).append(rule.order)
    for rule in rules:
        for name in rule.reads:
            if namespace.origins.get(name) == "conclusion" and min(producers.get(name, [0])) > rule.order:
                sink.warning(rule.location, "W305", f"reads '{name}', which only lower-priority rules conclude; "
                             "it is tried before that conclusion can exist", rule=rule.id)
