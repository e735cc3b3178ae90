"""Folding: parameter names replaced by their values, and constant arithmetic computed once."""
from __future__ import annotations

from . import nodes
from .semantics import value_of
from .valuetypes import finite_number


def oversized_constant(node):
    """The first literal of a folded expression that no engine holds as a finite float, or None.

    Folding is exact integer arithmetic: `hyperscale_qps * ...` can become an integer beyond any
    double, which the engine cannot be given and an answer cannot turn into a count.
    """
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, nodes.Literal) and isinstance(item.value, (int, float)) and not finite_number(item.value):
            return item
        stack.extend(nodes.children(item))
    return None


def zero_divisor(node):
    """The first division of a folded expression whose divisor is the constant 0, or None.

    The language makes x / 0 unknown (no value), on purpose: a divisor that is 0 for some facts only
    leaves that comparison false. A divisor that is 0 for all of them (`/ 0`, `/ (1 - 1)`, parameters
    folded to 0) makes the comparison false on every answer, or the recommend field absent from every
    plan: a mistake, never a choice.
    """
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, nodes.Arith) and item.op == "/" and isinstance(item.right, nodes.Literal) and \
                _numeric(item.right) and item.right.value == 0:
            return item
        stack.extend(reversed(nodes.children(item)))  # left to right: the first one written is reported
    return None


def check_divisors(folded, sink, rule_id, where, what: str) -> bool:
    """E208 at the first division of `folded` by the constant 0 (True when there is one); `what` names the
    condition or the recommend field (`recommend.dp`)."""
    division = zero_divisor(folded)
    if division is None:
        return False
    outcome = "the field is left out of every plan" if what.startswith("recommend.") else \
        "a comparison with it is false on every answer (and its negation true)"
    sink.error(where(division.pos), "E208", f"{what}: divides by 0 (the divisor is the constant 0 once "
               f"parameters and constant arithmetic are folded in), so the quotient is never known: {outcome}",
               rule=rule_id)
    return True


def fold(node, params):
    """Replace parameter names by their values and pre-compute constant arithmetic."""
    match node:
        case nodes.Name(pos=pos, id=name):
            return nodes.Literal(pos, params[name]) if name in params else node
        case nodes.Arith(pos=pos, op=op):
            left, right = fold(node.left, params), fold(node.right, params)
            folded = nodes.Arith(pos, op, left, right)
            constant = isinstance(left, nodes.Literal) and isinstance(right, nodes.Literal) and _numeric(left, right)
            if constant and not (op == "/" and right.value == 0):  # x / 0 stays unknown at run time, as it is
                return nodes.Literal(pos, value_of(folded, {}))
            return folded
        case nodes.Neg(pos=pos, operand=operand):
            inner = fold(operand, params)
            if isinstance(inner, nodes.Literal) and _numeric(inner):
                return nodes.Literal(pos, -inner.value)
            return nodes.Neg(pos, inner)
        case nodes.Call(pos=pos, func=func, args=args):
            return nodes.Call(pos, func, tuple(fold(a, params) for a in args))
        case nodes.Compare(pos=pos, op=op, left=left, right=right):
            return nodes.Compare(pos, op, fold(left, params), fold(right, params))
        case nodes.In(pos=pos, left=left, items=items, negated=negated):
            return nodes.In(pos, fold(left, params), items, negated)
        case nodes.Not(pos=pos, operand=operand):
            return nodes.Not(pos, fold(operand, params))
        case nodes.And(pos=pos, items=items) | nodes.Or(pos=pos, items=items):
            return type(node)(pos, tuple(fold(item, params) for item in items))
    return node


def _numeric(*literals) -> bool:
    return all(isinstance(item.value, (int, float)) and not isinstance(item.value, bool) for item in literals)
