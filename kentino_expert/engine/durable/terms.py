"""The durable-rules side of the data, without durable_rules itself: values encoded the way its C
parser reads them correctly, and rule conditions translated into its pattern language.

Measured defects this avoids (see README, "The engine"): exponent floats and huge ints are misread
(encoded as plain decimals, huge ints as floats); one fact may carry at most 254 properties; deep
and/or nesting is refused here rather than risked there.
"""
from __future__ import annotations

import json
import math
from decimal import Decimal

from ...errors import EngineError
from ...lang import nodes
from ...lang.semantics import MISSING, truth_of, value_of
from ...lang.valuetypes import finite_number
from ..backend import ShapeProblem
from .network import rule_excesses

MAX_PROPERTIES = 250   # a fact may carry at most 254 properties (error 302)
MAX_READ_NAMES = MAX_PROPERTIES - 100  # read by all conditions: a group's fact carries only what its group reads
MAX_DEPTH = 8          # nesting of and/or groups we accept (kept shallow on purpose)
_IMPOSSIBLE = {"$nex": {"t": 1}}
_OPS = {"<": "$lt", "<=": "$lte", ">": "$gt", ">=": "$gte", "!=": "$neq"}
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_ARITH = {"+": "$add", "-": "$sub", "*": "$mul", "/": "$div"}


class ShapeError(Exception):
    """A condition the engine cannot run safely; `pos` is the offset of the culprit in the condition."""

    def __init__(self, message: str, pos: int = 0):
        super().__init__(message)
        self.pos = pos


def encode_value(value) -> str:
    """JSON for one value, in the forms the C parser reads correctly."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) >= 2**63:
            return encode_value(float(value))
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EngineError(f"cannot pass a non-finite number ({value}) to the engine")
        text = repr(value)
        if "e" in text or "E" in text:
            text = format(Decimal(text), "f")
        return text if "." in text else text + ".0"
    if isinstance(value, str):
        return json.dumps(value)
    raise EngineError(f"cannot pass {type(value).__name__} to the engine")


def encode(data) -> str:
    """JSON of dicts/lists/values with `encode_value` for every scalar."""
    if isinstance(data, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{encode(v)}" for k, v in data.items()) + "}"
    if isinstance(data, list):
        return "[" + ",".join(encode(v) for v in data) + "]"
    return encode_value(data)


def _fragment(key, value) -> str:
    return f"{json.dumps(str(key))}:{encode(value)}"


def _plain_scalar(value) -> bool:
    """True when json.dumps writes `value` exactly as `encode_value` does (no exponent, no huge int)."""
    kind = type(value)
    if kind is str or kind is bool:
        return True
    if kind is int:
        return -2**63 < value < 2**63
    if kind is float:  # repr switches to an exponent outside [1e-4, 1e16); NaN and inf fail both tests
        return value == 0.0 or 1e-4 <= abs(value) < 1e16
    return False


def encode_members(items, wanted=None) -> str:
    """The members of a JSON object (no braces) for (key, value) pairs, keeping only `wanted` keys.

    Encoding dominated a step in Python: plain scalars go through the C encoder in one call, and only
    the rare value that needs `encode` (an exponent float, a huge int, a list) is encoded alone.
    """
    plain, special = {}, []
    for key, value in items:
        if wanted is not None and key not in wanted:
            continue
        if _plain_scalar(value):
            plain[key] = value
        else:
            special.append(_fragment(key, value))
    text = json.dumps(plain)[1:-1] if plain else ""
    return ",".join([text, *special]) if special and text else (text or ",".join(special))


def pattern_names(pattern) -> set[str]:
    """The fact properties a durable pattern reads (keys and `$m` references, not operators)."""
    names, stack = set(), [pattern]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$m" and isinstance(value, str):
                    names.add(value)
                    continue
                if not key.startswith("$"):
                    names.add(key)
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return names


MAX_LIST = 64          # items of an `in` list: each is one alpha node, and ~400 already take 0.3 s per evaluation
_ONE = 1.0             # multiplying the dividend by a float makes durable divide as floats, never as ints


ENGINE_NAMES = ("t", "id", "sid")  # properties of durable's state fact itself, never the rules' names


def _constant(node: nodes.Literal):
    """A literal the C core reads as the same number: finite and within a double's range."""
    value = node.value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not finite_number(value):
        raise ShapeError("a constant must be a finite number within about ±1.8e308 "
                         "(after folding parameters)", node.pos)
    return value


def _operand(node):
    """Right-hand side of a durable comparison: a constant, a same-fact name, or arithmetic."""
    if isinstance(node, nodes.Literal):
        return _constant(node)
    if not _names(node) and not isinstance(node, nodes.Call):
        # durable miscomputes arithmetic of two constants (-(-1) is not 1): compute it here
        return _constant(nodes.Literal(node.pos, _constant_value(node)))
    match node:
        case nodes.Name(id=name):
            return {"$m": name}
        case nodes.Neg(operand=operand):
            return {"$mul": {"$l": _operand(operand), "$r": -1}}
        case nodes.Arith(op="/", left=left, right=right):
            # durable divides two ints as ints (8 / 3 == 2) and dies with SIGFPE on an int zero;
            # the reference divides as floats. A float dividend gives durable the same meaning.
            dividend = _operand(left)
            dividend = float(dividend) if isinstance(dividend, (int, float)) else {"$mul": {"$l": dividend, "$r": _ONE}}
            return {"$div": {"$l": dividend, "$r": _operand(right)}}
        case nodes.Arith(op=op, left=left, right=right):
            return {_ARITH[op]: {"$l": _operand(left), "$r": _operand(right)}}
    raise ShapeError(f"{type(node).__name__.lower()} is not supported on the right of a comparison "
                     "(max/min/ceil belong in `then`, not `when`)", node.pos)


def _constant_value(node):
    value = value_of(node, {})
    if value is MISSING:  # a constant zero divisor; callers test divisors first
        raise _AlwaysZero()
    return value


def _names(node) -> list[str]:
    return [n.id for n in nodes.names_in(node)]


def _missing_any(names) -> list:
    return [{"$nex": {name: 1}} for name in dict.fromkeys(names)]


def _present_all(names) -> list:
    # durable treats a comparison whose right side names an absent property as holding;
    # the reference calls it unknown (false): every name is required explicitly
    return [{"$ex": {name: 1}} for name in dict.fromkeys(names)]


class _AlwaysZero(Exception):
    """A divisor that is the constant zero: the comparison is unknown whatever the facts."""


def _divisors(node) -> list:
    """Every divisor inside a value expression (nested ones included)."""
    found, stack = [], [node]
    while stack:
        item = stack.pop()
        if isinstance(item, nodes.Arith):
            if item.op == "/":
                found.append(item.right)
            stack += [item.left, item.right]
        elif isinstance(item, nodes.Neg):
            stack.append(item.operand)
    return found


def _zero_tests(divisor) -> list[tuple]:
    """(name, operand) pairs: the divisor is zero exactly when some `name == operand` holds.

    Exact for IEEE numbers: a - b == 0 iff a == b, a + b == 0 iff a == -b, a * b == 0 iff a or b is
    (barring underflow of two tiny floats). A divisor of another shape cannot be guarded in durable's
    `name OP expression` terms, and is refused rather than left to divide by zero.
    """
    if not _names(divisor) and not isinstance(divisor, nodes.Call):
        if _constant(nodes.Literal(divisor.pos, _constant_value(divisor))) == 0:
            raise _AlwaysZero()
        return []
    match divisor:
        case nodes.Name(id=name):
            return [(name, 0)]
        case nodes.Neg(operand=operand):
            return _zero_tests(operand)
        case nodes.Arith(op="*", left=left, right=right):
            return _zero_tests(left) + _zero_tests(right)
        case nodes.Arith(op="/", left=left):
            return _zero_tests(left)  # its own divisor is guarded as a divisor in its own right
        case nodes.Arith(op=op, left=nodes.Name(id=name), right=other):
            return [(name, _operand(other if op == "-" else nodes.Neg(other.pos, other)))]
        case nodes.Arith(op=op, left=other, right=nodes.Name(id=name)):
            return [(name, _operand(other if op == "-" else nodes.Neg(other.pos, other)))]
    raise ShapeError("the engine cannot guard this divisor against zero: divide by a name, a number, "
                     "a product of those, or `name + ...` / `name - ...`", divisor.pos)


def _compare(node: nodes.Compare, negate: bool):
    left, right, op = node.left, node.right, node.op
    if not isinstance(left, nodes.Name) and isinstance(right, nodes.Name):
        left, right, op = right, left, _FLIP[op]
    if not isinstance(left, nodes.Name):
        if not _names(left) and not _names(right):
            holds = truth_of(nodes.Compare(node.pos, op, left, right), {}) != negate
            return None if holds else _IMPOSSIBLE
        raise ShapeError("the left side of a comparison must be a single name (move arithmetic to the right)",
                         node.pos)
    try:
        zero = [test for divisor in _divisors(right) for test in _zero_tests(divisor)]
    except _AlwaysZero:
        return None if negate else _IMPOSSIBLE  # unknown: false, and its negation true
    if negate:  # the negated comparison, or an unknown value, or a zero divisor
        unknown = _missing_any(_names(left) + _names(right)) + [{name: value} for name, value in zero]
        return {"$or": [_term(left.id, _NEGATED[op], _operand(right))] + unknown}
    # an absent left-hand name already fails the term in durable: only the right side needs guards
    guards = _present_all(_names(right)) + [{"$neq": {name: value}} for name, value in zero]
    term = _term(left.id, op, _operand(right))
    return {"$and": guards + [term]} if guards else term


def _term(name: str, op: str, operand):
    return {name: operand} if op == "==" else {_OPS[op]: {name: operand}}


def _membership(node: nodes.In, negate: bool):
    if not isinstance(node.left, nodes.Name):
        raise ShapeError("'in' needs a single name on its left", node.pos)
    if len(node.items) > MAX_LIST:
        raise ShapeError(f"an 'in' list holds at most {MAX_LIST} items ({len(node.items)} given): an engine-safety "
                         "limit, longer lists make every evaluation slow; use a range (>=, <=) instead", node.pos)
    name = node.left.id
    equal = [{name: item.value} for item in node.items]
    differ = [{"$neq": {name: item.value}} for item in node.items]
    inside = not node.negated
    if negate:
        inside = not inside
        terms = (equal if inside else differ) or ([_IMPOSSIBLE] if inside else [{"$ex": {name: 1}}])
        group = {"$or": terms} if inside else {"$and": terms}
        return {"$or": [group, {"$nex": {name: 1}}]}
    if inside:
        return {"$or": equal} if len(equal) > 1 else (equal[0] if equal else _IMPOSSIBLE)
    return {"$and": differ} if differ else {"$ex": {name: 1}}


def translate(node, negate: bool = False, depth: int = 0, origins: dict | None = None):
    """AST condition -> durable term (negation pushed down; None means always true).

    With `origins`, each term made from an AST node is recorded as id(term) -> (offset, term), so
    that a limit the term breaks is reported at its column (the term is kept so its id stays unique).
    """
    term = _translate(node, negate, depth, origins)
    if origins is not None and isinstance(term, dict):
        origins.setdefault(id(term), (node.pos, term))
    return term


def _translate(node, negate, depth, origins):
    if depth > MAX_DEPTH:
        raise ShapeError(f"conditions nest deeper than {MAX_DEPTH} and/or levels", node.pos)
    match node:
        case nodes.Not(operand=operand):
            return translate(operand, not negate, depth, origins)
        case nodes.Compare():
            return _compare(node, negate)
        case nodes.In():
            return _membership(node, negate)
        case nodes.Exists(name=name):
            return {"$nex" if negate else "$ex": {name.id: 1}}
        case nodes.Name(id=name):
            if negate:
                return {"$or": [{"$neq": {name: True}}, {"$nex": {name: 1}}]}
            return {name: True}
        case nodes.Literal(value=bool() as value):
            return None if value != negate else _IMPOSSIBLE
        case nodes.And(items=items) | nodes.Or(items=items):
            return _junction(items, isinstance(node, nodes.And) != negate, negate, depth, origins)
    raise ShapeError(f"{type(node).__name__} is not a condition", node.pos)


def _junction(items, conjunctive: bool, negate: bool, depth: int, origins):
    """An and/or of the items' terms (after negation pushed down: `conjunctive` says which)."""
    terms = [translate(item, negate, depth + 1, origins) for item in items]
    if conjunctive:
        kept = [part for term in terms if term is not None for part in _conjuncts(term)]
        return {"$and": kept} if len(kept) > 1 else (kept[0] if kept else None)
    if any(term is None for term in terms):
        return None
    return {"$or": terms}


def _conjuncts(term) -> list:
    """A term's parts when it is an `$and` (kept flat: every level is one more for the C core)."""
    return term["$and"] if set(term) == {"$and"} else [term]


def rule_terms(rule, group: str, origins: dict | None = None) -> list:
    """The terms of a rule's pattern (one flat `$and`); with `origins`, id(term) -> ((condition
    index, offset), term) for the terms made from the rule's own conditions."""
    terms = [{"t": group}]
    for index, condition in enumerate(rule.conditions):
        local = {} if origins is not None else None
        term = translate(condition, origins=local)
        if term is None:
            continue
        parts = _conjuncts(term)
        if origins is not None:
            for key, (pos, kept) in local.items():
                origins[key] = ((index, pos), kept)
            for part in parts:
                origins.setdefault(id(part), ((index, condition.pos), part))
        terms.extend(parts)
    return terms


def rule_pattern(rule, group: str) -> dict:
    return {"pri": rule.order, "all": [{"m": {"$and": rule_terms(rule, group)}}]}


def _condition_problem(rule, index, condition):
    try:
        translate(condition)
        for name in nodes.names_in(condition):
            if len(name.id) > 200:
                raise ShapeError("a name longer than 200 characters", name.pos)
    except ShapeError as exc:
        return ShapeProblem(rule, str(exc), index, exc.pos)
    return None


def shape_problems(rules, network: bool = True) -> list[ShapeProblem]:
    """Every rule the engine would refuse, with where; used by `rules check` and the engine.

    With `network`, also what each rule compiles to in durable-rules' network, measured against the
    core's limits (network.py): the engine itself packs rules into groups within them.
    """
    problems = []
    for rule in rules:
        problem = next(filter(None, (_condition_problem(rule, index, condition)
                                     for index, condition in enumerate(rule.conditions))), None)
        if problem:
            problems.append(problem)
        elif network:
            problems += network_problems(rule)
    names = {name for rule in rules for name in rule.reads}
    if len(names) > MAX_READ_NAMES and rules:
        problems.append(ShapeProblem(_most_names_of_its_own(rules), f"the rule set's conditions read {len(names)} "
                                     f"distinct names, more than the {MAX_READ_NAMES} the engine takes (a fact of "
                                     f"durable-rules holds at most {MAX_PROPERTIES} properties)"))
    return problems


def _most_names_of_its_own(rules):
    """Where a limit of the whole set is blamed: in the file whose conditions read the most names no other reads
    (a file added to a set that was within the limit), its rule with the most of them."""
    file_of = lambda rule: getattr(getattr(getattr(rule, "source", None), "location", None), "file", "")  # noqa: E731
    by_file: dict = {}
    for rule in rules:
        by_file.setdefault(file_of(rule), set()).update(rule.reads)
    own = {file: names - set().union(*(other for key, other in by_file.items() if key != file))
           for file, names in by_file.items()}
    file = max(own, key=lambda each: len(own[each]))
    return max((rule for rule in rules if file_of(rule) == file), key=lambda rule: len(own[file] & set(rule.reads)))


def network_problems(rule) -> list[ShapeProblem]:
    """The limits of durable-rules' network that this rule goes beyond on its own."""
    origins: dict = {}
    terms = rule_terms(rule, "g0", origins)[1:]
    return [ShapeProblem(rule, excess.message, *(excess.origin or (None, 0)), excess.code)
            for excess in rule_excesses(terms, origins)]
