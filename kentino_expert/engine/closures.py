"""Conditions and values compiled once into Python closures from the compiled syntax tree (no eval, no exec),
with the meaning of lang/semantics.py: what the compiled evaluator (compiled.py) runs.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable

from ..lang import nodes
from ..lang.semantics import MISSING

Truth = Callable[[dict], bool]
Value = Callable[[dict], object]

_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
            "==": operator.eq, "!=": operator.ne}
_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_CALLS = {"ceil": math.ceil, "floor": math.floor, "round": round}


def compile_value(node: nodes.Node, fallback=None) -> Value:
    """A closure giving the value of an expression in a state (MISSING when unknown), as
    lang/semantics.value_of does; names absent from the state are looked up in `fallback` (parameters)."""
    kind = type(node)
    if kind is nodes.Literal:
        constant = node.value
        return lambda env: constant
    if kind is nodes.Name:
        name = node.id
        if fallback:
            default = fallback.get(name, MISSING)
            return lambda env: env.get(name, default)
        return lambda env: env.get(name, MISSING)
    if kind is nodes.Neg:
        inner = compile_value(node.operand, fallback)
        return lambda env: MISSING if (value := inner(env)) is MISSING else -value
    if kind is nodes.Arith:
        return _arith(node, fallback)
    if kind is nodes.Call:
        return _call(node, fallback)
    return compile_truth(node, fallback)  # a condition used as a value: its truth


def _arith(node: nodes.Arith, fallback) -> Value:
    left, right, op = compile_value(node.left, fallback), compile_value(node.right, fallback), _ARITH[node.op]
    divide = node.op == "/"

    def value(env):
        a, b = left(env), right(env)
        if a is MISSING or b is MISSING or (divide and b == 0):
            return MISSING
        return op(a, b)
    return value


def _call(node: nodes.Call, fallback) -> Value:
    args = tuple(compile_value(arg, fallback) for arg in node.args)
    if node.func in ("max", "min"):  # of the known values; missing only when none is known
        pick = max if node.func == "max" else min

        def extreme(env):
            known = [v for v in (arg(env) for arg in args) if v is not MISSING]
            return pick(known) if known else MISSING
        return extreme
    func, two = _CALLS[node.func], node.func == "round" and len(args) == 2

    def call(env):
        values = [arg(env) for arg in args]
        if any(v is MISSING for v in values):
            return MISSING
        return round(values[0], int(values[1])) if two else func(values[0])
    return call


def compile_truth(node: nodes.Node, fallback=None) -> Truth:
    """A closure giving the truth of a condition in a state, as lang/semantics.truth_of does."""
    kind = type(node)
    if kind is nodes.Compare:
        return _compare(node, fallback)
    if kind is nodes.In:
        return _membership(node, fallback)
    if kind is nodes.Exists:
        name = node.name.id
        return lambda env: env.get(name, MISSING) is not MISSING
    if kind is nodes.Not:
        inner = compile_truth(node.operand, fallback)
        return lambda env: not inner(env)
    if kind in (nodes.And, nodes.Or):
        items = tuple(compile_truth(item, fallback) for item in node.items)
        if kind is nodes.And:
            return lambda env: all(item(env) for item in items)
        return lambda env: any(item(env) for item in items)
    if kind is nodes.Name:
        value = compile_value(node, fallback)
        return lambda env: value(env) is True
    if kind is nodes.Literal:
        constant = node.value is True
        return lambda env: constant
    raise TypeError(f"not a condition: {kind.__name__}")


def _compare(node: nodes.Compare, fallback) -> Truth:
    op = _COMPARE[node.op]
    if type(node.left) is nodes.Name and type(node.right) is nodes.Literal and not fallback:
        name, constant = node.left.id, node.right.value  # the common shape: a name against a constant

        def against_constant(env):
            value = env.get(name, MISSING)
            return value is not MISSING and bool(op(value, constant))
        return against_constant
    left, right = compile_value(node.left, fallback), compile_value(node.right, fallback)

    def compare(env):
        a, b = left(env), right(env)
        return a is not MISSING and b is not MISSING and bool(op(a, b))
    return compare


def _membership(node: nodes.In, fallback) -> Truth:
    left, items, negated = compile_value(node.left, fallback), tuple(i.value for i in node.items), node.negated
    # `x in tuple` also matches by identity: the same as == unless an item is a NaN (never equal to itself)
    exact = all(item == item for item in items)

    def member(env):
        value = left(env)
        if value is MISSING:
            return False
        found = value in items if exact else any(value == item for item in items)
        return found != negated
    return member


def compile_conditions(conditions) -> Truth:
    """One closure: all of the conditions hold (evaluated in order, stopping at the first false one)."""
    compiled = tuple(compile_truth(condition) for condition in conditions)
    if len(compiled) == 1:
        return compiled[0]

    def holds(env):  # a loop: all() over a generator is slower on this hot path
        for condition in compiled:  # noqa: SIM110
            if not condition(env):
                return False
        return True
    return holds
