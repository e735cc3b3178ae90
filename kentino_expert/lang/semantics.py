"""Python semantics of the rule language: the reference meaning every backend must agree with.

A comparison that involves a missing value is false (so is `x != 3` when x is unknown);
`not` inverts the truth of what it wraps; a bare name is true only when its value is `true`.
In values, max() and min() take the known arguments; other arithmetic on a missing value is missing.
"""
from __future__ import annotations

import math
import operator

from . import nodes


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()

_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
            "==": operator.eq, "!=": operator.ne}
_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_CALLS = {"max": max, "min": min, "ceil": math.ceil, "floor": math.floor, "round": round}


# A small visitor: one function per node type, found by the node's exact type. This is the hot path
# (the reference evaluator, defaults, why-not): a table lookup is faster than a chain of type tests.

def value_of(node: nodes.Node, env):
    """The value of an arithmetic/value expression, or MISSING."""
    return _VALUE.get(type(node), truth_of)(node, env)


def truth_of(node: nodes.Node, env) -> bool:
    """The truth of a condition under the documented missing-value semantics."""
    rule = _TRUTH.get(type(node))
    if rule is None:
        raise TypeError(f"not a condition: {type(node).__name__}")
    return rule(node, env)


def _negative(node: nodes.Neg, env):
    inner = value_of(node.operand, env)
    return MISSING if inner is MISSING else -inner


def _arithmetic(node: nodes.Arith, env):
    left, right = value_of(node.left, env), value_of(node.right, env)
    if left is MISSING or right is MISSING or (node.op == "/" and right == 0):
        return MISSING
    return _ARITH[node.op](left, right)


def _call(node: nodes.Call, env):
    args = [value_of(arg, env) for arg in node.args]
    if node.func in ("max", "min"):  # of the known values; missing only when none is known
        known = [arg for arg in args if arg is not MISSING]
        return _CALLS[node.func](known) if known else MISSING
    if any(arg is MISSING for arg in args):
        return MISSING
    if node.func == "round" and len(args) == 2:
        return round(args[0], int(args[1]))
    return _CALLS[node.func](args[0])


def _comparison(node: nodes.Compare, env) -> bool:
    left, right = value_of(node.left, env), value_of(node.right, env)
    return left is not MISSING and right is not MISSING and bool(_COMPARE[node.op](left, right))


def _membership(node: nodes.In, env) -> bool:
    left = value_of(node.left, env)
    if left is MISSING:
        return False
    return any(left == item.value for item in node.items) != node.negated


_VALUE = {
    nodes.Literal: lambda node, env: node.value,
    nodes.Name: lambda node, env: env.get(node.id, MISSING),
    nodes.Neg: _negative,
    nodes.Arith: _arithmetic,
    nodes.Call: _call,
}
_TRUTH = {
    nodes.Compare: _comparison,
    nodes.In: _membership,
    nodes.Exists: lambda node, env: env.get(node.name.id, MISSING) is not MISSING,
    nodes.Not: lambda node, env: not truth_of(node.operand, env),
    nodes.And: lambda node, env: all(truth_of(item, env) for item in node.items),
    nodes.Or: lambda node, env: any(truth_of(item, env) for item in node.items),
    nodes.Name: lambda node, env: env.get(node.id, MISSING) is True,  # a bare name: true only when `true`
    nodes.Literal: lambda node, env: node.value is True,
}
