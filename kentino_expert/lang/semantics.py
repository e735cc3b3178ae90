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


def value_of(node: nodes.Node, env):
    """The value of an arithmetic/value expression, or MISSING."""
    match node:
        case nodes.Literal(value=value):
            return value
        case nodes.Name(id=name):
            return env.get(name, MISSING)
        case nodes.Neg(operand=operand):
            inner = value_of(operand, env)
            return MISSING if inner is MISSING else -inner
        case nodes.Arith(op=op, left=left, right=right):
            left, right = value_of(left, env), value_of(right, env)
            if left is MISSING or right is MISSING or (op == "/" and right == 0):
                return MISSING
            return _ARITH[op](left, right)
        case nodes.Call(func=func, args=args):
            return _call(func, [value_of(arg, env) for arg in args])
    return truth_of(node, env)


def _call(func: str, args: list):
    if func in ("max", "min"):  # of the known values; missing only when none is known
        known = [arg for arg in args if arg is not MISSING]
        return _CALLS[func](known) if known else MISSING
    if any(arg is MISSING for arg in args):
        return MISSING
    if func == "round" and len(args) == 2:
        return round(args[0], int(args[1]))
    return _CALLS[func](args[0])


def truth_of(node: nodes.Node, env) -> bool:
    """The truth of a condition under the documented missing-value semantics."""
    match node:
        case nodes.Compare(op=op, left=left, right=right):
            left, right = value_of(left, env), value_of(right, env)
            return left is not MISSING and right is not MISSING and bool(_COMPARE[op](left, right))
        case nodes.In(left=left, items=items, negated=negated):
            left = value_of(left, env)
            if left is MISSING:
                return False
            return any(left == item.value for item in items) != negated
        case nodes.Exists(name=name):
            return env.get(name.id, MISSING) is not MISSING
        case nodes.Not(operand=operand):
            return not truth_of(operand, env)
        case nodes.And(items=items):
            return all(truth_of(item, env) for item in items)
        case nodes.Or(items=items):
            return any(truth_of(item, env) for item in items)
        case nodes.Name() | nodes.Literal():
            return value_of(node, env) is True
    raise TypeError(f"not a condition: {type(node).__name__}")
