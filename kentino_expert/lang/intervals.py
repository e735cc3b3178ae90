"""Interval arithmetic of the rule language: the range of every value, and the first operation that may overflow.

`rules check` uses it to prove arithmetic finite (E206): `params_b * 1e308 * 1e308` made every answer
an OverflowError. A name's range comes from the caller (ruleset/ranges.py: the facts' bounds, the
declared figure ranges, what rules conclude).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from . import nodes
from .valuetypes import finite_number as _number

FINITE_MAX = sys.float_info.max


@dataclass(frozen=True)
class Interval:
    """[lo, hi] (floats, possibly infinite); `integer` when every value in it is a whole number."""

    lo: float
    hi: float
    integer: bool = False

    @property
    def finite(self) -> bool:
        return math.isfinite(self.lo) and math.isfinite(self.hi)

    def hull(self, other: Interval) -> Interval:
        return Interval(min(self.lo, other.lo), max(self.hi, other.hi), self.integer and other.integer)

    def __str__(self) -> str:
        return f"{self.lo:g}..{self.hi:g}"


EVERYTHING = Interval(-math.inf, math.inf)
ANY_FINITE = Interval(-FINITE_MAX, FINITE_MAX)


def _product(a: float, b: float) -> float:
    return 0.0 if a == 0 or b == 0 else a * b  # a bound of 0 times an infinite one is 0, not NaN


def _spanning(values, integer: bool) -> Interval:
    return Interval(min(values), max(values), integer)


def _divide(left: Interval, right: Interval) -> Interval | None:
    """left / right; an exact zero divisor gives no value (the language's division by zero is
    unknown), so a whole-number divisor keeps away from zero by 1; None when no value ever results."""
    if right.lo == right.hi == 0:
        return None
    parts = [right]
    if right.lo <= 0 <= right.hi:
        if not right.integer:
            return EVERYTHING  # a divisor that can come arbitrarily close to zero
        parts = [Interval(lo, hi, True) for lo, hi in ((right.lo, -1.0), (1.0, right.hi)) if lo <= hi]
    return _spanning([a / b for part in parts for a in (left.lo, left.hi) for b in (part.lo, part.hi)], False)


class Overflow(Exception):
    """A value that may not be finite: `node` is the innermost operation to blame."""

    def __init__(self, node, interval: Interval):
        super().__init__(str(interval))
        self.node, self.interval = node, interval


def interval_of(node, ranges) -> Interval | None:
    """The range of a value expression (None: it never has a value); Overflow at the first operation
    whose result may be infinite (or NaN). `ranges.of(name)` gives a name's range (None: not a number)."""
    result = _interval(node, ranges)
    if result is not None and not result.finite:
        raise Overflow(node, result)
    return result


def _interval(node, ranges):
    match node:
        case nodes.Literal(value=value):
            if not _number(value):  # text, true/false, or a constant already refused as not finite
                return None
            number = float(value)
            return Interval(number, number, isinstance(value, int) or number.is_integer())
        case nodes.Name(id=name):
            return ranges.of(name)
        case nodes.Neg(operand=operand):
            inner = interval_of(operand, ranges)
            return None if inner is None else Interval(-inner.hi, -inner.lo, inner.integer)
        case nodes.Arith():
            return _arith(node, ranges)
        case nodes.Call():
            return _call(node, ranges)
    return None  # a condition used as a value: true/false, no arithmetic


def _arith(node, ranges):
    left, right = interval_of(node.left, ranges), interval_of(node.right, ranges)
    if left is None or right is None:
        return None
    integer = left.integer and right.integer
    if node.op == "+":
        return Interval(left.lo + right.lo, left.hi + right.hi, integer)
    if node.op == "-":
        return Interval(left.lo - right.hi, left.hi - right.lo, integer)
    if node.op == "*":
        return _spanning([_product(a, b) for a in (left.lo, left.hi) for b in (right.lo, right.hi)], integer)
    return _divide(left, right)


def _call(node, ranges):
    args = [interval_of(arg, ranges) for arg in node.args]
    known = [arg for arg in args if arg is not None]
    if node.func in ("max", "min"):
        if not known:
            return None
        present = [a for arg, a in zip(node.args, args, strict=True) if a is not None and not nodes.names_in(arg)]
        integer = all(a.integer for a in known)
        if node.func == "max":  # the known arguments only: at least every always-present one
            lo = max([min(a.lo for a in known)] + [a.lo for a in present])
            return Interval(lo, max(a.hi for a in known), integer)
        hi = min([max(a.hi for a in known)] + [a.hi for a in present])
        return Interval(min(a.lo for a in known), hi, integer)
    if len(known) < len(args):
        return None
    value = args[0]
    if node.func == "ceil":
        return Interval(float(math.ceil(value.lo)), float(math.ceil(value.hi)), True)
    if node.func == "floor":
        return Interval(float(math.floor(value.lo)), float(math.floor(value.hi)), True)
    if len(args) == 1:  # round(x) to a whole number
        return Interval(float(math.floor(value.lo)), float(math.ceil(value.hi)), True)
    if not -1e6 <= args[1].lo <= args[1].hi <= 1e6:
        return EVERYTHING  # round(x, n) with a huge n is an OverflowError
    # round(x, n): to n decimals; a negative n rounds to a power of ten, at most ten times |x|
    grow = 1.0 if args[1].lo >= 0 else 10.0
    return Interval(min(value.lo * grow, value.lo - 1), max(value.hi * grow, value.hi + 1), False)


def describe_overflow(exc: Overflow, ranges) -> str:
    """What overflows and over which ranges, in words."""
    node = exc.node
    names = sorted({n.id for n in nodes.names_in(node)})
    over = ", ".join(f"{name} in {ranges.of(name)}" for name in names) or "constants only"
    if isinstance(node, nodes.Arith) and node.op == "/":
        divisor = _interval(node.right, ranges)
        if divisor is not None and divisor.lo <= 0 <= divisor.hi:
            return f"the divisor of this '/' can come arbitrarily close to 0 ({over})"
    what = f"'{node.op}'" if isinstance(node, nodes.Arith) else (
        f"{node.func}()" if isinstance(node, nodes.Call) else f"'{getattr(node, 'id', 'value')}'")
    return f"{what} can overflow: its result can reach {exc.interval} ({over}; a number holds at most {FINITE_MAX:.4g})"


def _value_sides(node) -> list:
    """The value expressions inside a condition (or the node itself when it is a value)."""
    match node:
        case nodes.Compare(left=left, right=right):
            return [left, right]
        case nodes.In(left=left):
            return [left]
        case nodes.Not(operand=operand):
            return _value_sides(operand)
        case nodes.And(items=items) | nodes.Or(items=items):
            return [side for item in items for side in _value_sides(item)]
        case nodes.Exists() | nodes.Name() | nodes.Literal():
            return []
    return [node]


def check_finite(node, ranges, sink, rule_id, where, what: str) -> None:
    """E206 at the first operation of `node` (a condition or a value) that may not be finite."""
    for side in _value_sides(node):
        try:
            interval_of(side, ranges)
        except Overflow as exc:
            sink.error(where(exc.node.pos), "E206", f"{what}: {describe_overflow(exc, ranges)}", rule=rule_id)
            return
