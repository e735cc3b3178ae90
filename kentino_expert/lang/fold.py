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
