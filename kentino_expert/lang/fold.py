"""Folding: parameter names replaced by their values, and constant arithmetic computed once."""
from __future__ import annotations

from . import nodes as ast
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
        if isinstance(item, ast.Literal) and isinstance(item.value, (int, float)) and not finite_number(item.value):
            return item
        stack.extend(ast.children(item))
    return None


def fold(node, params: dict):
    """Replace parameter names by their values and pre-compute constant arithmetic."""
    if isinstance(node, ast.Name):
        return ast.Literal(node.pos, params[node.id]) if node.id in params else node
    if isinstance(node, ast.Arith):
        left, right = fold(node.left, params), fold(node.right, params)
        if isinstance(left, ast.Literal) and isinstance(right, ast.Literal) and _numeric(left, right):
            if node.op == "/" and right.value == 0:
                return ast.Arith(node.pos, node.op, left, right)
            return ast.Literal(node.pos, value_of(ast.Arith(node.pos, node.op, left, right), {}))
        return ast.Arith(node.pos, node.op, left, right)
    if isinstance(node, ast.Neg):
        inner = fold(node.operand, params)
        if isinstance(inner, ast.Literal) and _numeric(inner):
            return ast.Literal(node.pos, -inner.value)
        return ast.Neg(node.pos, inner)
    if isinstance(node, ast.Call):
        return ast.Call(node.pos, node.func, tuple(fold(a, params) for a in node.args))
    if isinstance(node, ast.Compare):
        return ast.Compare(node.pos, node.op, fold(node.left, params), fold(node.right, params))
    if isinstance(node, ast.In):
        return ast.In(node.pos, fold(node.left, params), node.items, node.negated)
    if isinstance(node, ast.Not):
        return ast.Not(node.pos, fold(node.operand, params))
    if isinstance(node, (ast.And, ast.Or)):
        return type(node)(node.pos, tuple(fold(item, params) for item in node.items))
    return node


def _numeric(*literals) -> bool:
    return all(isinstance(l.value, (int, float)) and not isinstance(l.value, bool) for l in literals)
