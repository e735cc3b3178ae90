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


def value_of(node: nodes.Node, env: dict):
    """The value of an arithmetic/value expression, or MISSING."""
    if isinstance(node, nodes.Literal):
        return node.value
    if isinstance(node, nodes.Name):
        return env.get(node.id, MISSING)
    if isinstance(node, nodes.Neg):
        inner = value_of(node.operand, env)
        return MISSING if inner is MISSING else -inner
    if isinstance(node, nodes.Arith):
        left, right = value_of(node.left, env), value_of(node.right, env)
        if left is MISSING or right is MISSING or (node.op == "/" and right == 0):
            return MISSING
        return _ARITH[node.op](left, right)
    if isinstance(node, nodes.Call):
        args = [value_of(arg, env) for arg in node.args]
        if node.func in ("max", "min"):  # of the known values; missing only when none is known
            args = [arg for arg in args if arg is not MISSING]
            return _CALLS[node.func](args) if args else MISSING
        if any(arg is MISSING for arg in args):
            return MISSING
        if node.func == "round" and len(args) == 2:
            return round(args[0], int(args[1]))
        return _CALLS[node.func](args[0])
    return truth_of(node, env)


def truth_of(node: nodes.Node, env: dict) -> bool:
    """The truth of a condition under the documented missing-value semantics."""
    if isinstance(node, nodes.Compare):
        left, right = value_of(node.left, env), value_of(node.right, env)
        if left is MISSING or right is MISSING:
            return False
        return bool(_COMPARE[node.op](left, right))
    if isinstance(node, nodes.In):
        left = value_of(node.left, env)
        if left is MISSING:
            return False
        inside = any(left == item.value for item in node.items)
        return not inside if node.negated else inside
    if isinstance(node, nodes.Exists):
        return env.get(node.name.id, MISSING) is not MISSING
    if isinstance(node, nodes.Not):
        return not truth_of(node.operand, env)
    if isinstance(node, nodes.And):
        return all(truth_of(item, env) for item in node.items)
    if isinstance(node, nodes.Or):
        return any(truth_of(item, env) for item in node.items)
    if isinstance(node, (nodes.Name, nodes.Literal)):
        return value_of(node, env) is True
    raise TypeError(f"not a condition: {type(node).__name__}")
