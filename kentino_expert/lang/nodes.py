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
    """The direct sub-expressions of a node, in source order (a leaf has none)."""
    of = _CHILDREN.get(type(node))
    return of(node) if of else ()


# a small visitor, by exact type: names_in walks every condition of a why-not on the decide path
_CHILDREN = {
    Arith: lambda node: (node.left, node.right), Compare: lambda node: (node.left, node.right),
    Neg: lambda node: (node.operand,), Not: lambda node: (node.operand,), Call: lambda node: node.args,
    In: lambda node: (node.left,), Exists: lambda node: (node.name,), And: lambda node: node.items,
    Or: lambda node: node.items,
}
