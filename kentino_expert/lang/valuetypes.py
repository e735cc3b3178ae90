"""The types of the condition language: number, true/false, text, an enumeration of texts, and "mixed".

A type is NUMBER, BOOL or TEXT, ("enum", (value, ...)) for a text with known values, or MIXED for
a conclusion whose rules conclude values of different types.
"""
from __future__ import annotations

import math

NUMBER, BOOL, TEXT = "number", "bool", "string"
MIXED = "mixed"


def enum_of(values) -> tuple:
    """The type of a text that takes only `values`."""
    return ("enum", tuple(values))


def is_enum(kind) -> bool:
    return isinstance(kind, tuple) and bool(kind) and kind[0] == "enum"


def base_type(kind):
    """An enumeration is a text; every other type is itself."""
    return TEXT if is_enum(kind) else kind


def described(kind) -> str:
    """A type in words: `a number`, `text ('yes')`, `true/false`, `of mixed types`."""
    if is_enum(kind):
        return f"text ({', '.join(repr(v) for v in kind[1][:5])}{', ...' if len(kind[1]) > 5 else ''})"
    return {NUMBER: "a number", BOOL: "true/false", TEXT: "text"}.get(kind, "of mixed types")


def literal_type(value):
    """The type of a literal value."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, (int, float)):
        return NUMBER
    return TEXT


def conclusion_type(values):
    """The type of a name from the values rules conclude for it."""
    if all(isinstance(v, bool) for v in values):
        return BOOL
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return NUMBER
    if all(isinstance(v, str) for v in values):
        return enum_of(sorted(set(values)))
    return MIXED


def finite_number(value) -> bool:
    """A number (not a bool) that a double holds finitely: the engine, the answers and JSON all need one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an exact integer beyond any double
        return False


def short_number(value) -> str:
    """A finite number as a message quotes it: as written when short (`1e300`, not `1e+300`), its first
    digits when an integer has hundreds of them."""
    text = repr(value) if len(repr(value)) <= 20 else f"{float(value):.6g}"
    return text.replace("e+", "e")
