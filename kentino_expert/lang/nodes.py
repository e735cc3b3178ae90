"""The syntax tree of the condition language: frozen nodes, each with its offset in the source text."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    """Base of every expression node; `pos` is the offset in the source text."""

    pos: int


@dataclass(frozen=True)
class Literal(Node):
    value: object


@dataclass(frozen=True)
class Name(Node):
    id: str


@dataclass(frozen=True)
class ListLit(Node):
    items: tuple


@dataclass(frozen=True)
class Arith(Node):
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Neg(Node):
    operand: Node


@dataclass(frozen=True)
class Call(Node):
    func: str
    args: tuple


@dataclass(frozen=True)
class Compare(Node):
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class In(Node):
    left: Node
    items: tuple  # Literal nodes
    negated: bool = False


@dataclass(frozen=True)
class Exists(Node):
    name: Name


@dataclass(frozen=True)
class Not(Node):
    operand: Node


@dataclass(frozen=True)
class And(Node):
    items: tuple


@dataclass(frozen=True)
class Or(Node):
    items: tuple


def names_in(node: Node) -> list[Name]:
    """Every Name the expression mentions, in source order."""
    found: list[Name] = []
    _walk(node, found)
    return found


def _walk(node, found):
    if isinstance(node, Name):
        found.append(node)
        return
    for child in children(node):
        _walk(child, found)


def children(node) -> tuple:
    """The direct sub-expressions of a node, in source order."""
    match node:
        case Arith(left=left, right=right) | Compare(left=left, right=right):
            return (left, right)
        case Neg(operand=operand) | Not(operand=operand):
            return (operand,)
        case Call(args=args):
            return args
        case In(left=left):
            return (left,)
        case Exists(name=name):
            return (name,)
        case And(items=items) | Or(items=items):
            return items
    return ()
