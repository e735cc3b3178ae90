"""Name and type checking of expressions against a namespace, each problem reported at its own column.

The namespace is anything with `type_of(name)`, `names()` and `catalog` (fact -> (ids, {alias: id})):
the rule set's (ruleset/namespace.py) in practice.
"""
from __future__ import annotations

from ..errors import did_you_mean
from . import nodes
from .valuetypes import BOOL, MIXED, NUMBER, TEXT, described, is_enum, literal_type
from .valuetypes import base_type as _base

_ORDERING = ("<", "<=", ">", ">=")
MAX_ITEM_ERRORS = 10  # wrong items of one `in` list reported one by one; then one line for the rest


class _Checker:
    def __init__(self, namespace, sink, rule_id, where):
        self.namespace, self.sink, self.rule_id, self.where = namespace, sink, rule_id, where

    def error(self, node, code, message, suggestion=None):
        self.sink.error(self.where(node.pos), code, message, rule=self.rule_id, suggestion=suggestion)

    def name_type(self, node: nodes.Name):
        kind = self.namespace.type_of(node.id)
        if kind is None:
            self.error(node, "E102", f"unknown name '{node.id}'", did_you_mean(node.id, self.namespace.names()))
        return kind

    def value(self, node):
        """Type of a value expression, or None after reporting a problem."""
        match node:
            case nodes.Literal(value=value):
                return literal_type(value)
            case nodes.Name():
                return self.name_type(node)
            case nodes.Arith() | nodes.Neg() | nodes.Call():
                for operand in nodes.children(node):
                    kind = self.value(operand)
                    if kind is not None and _base(kind) != NUMBER:
                        self.error(operand, "E103", "arithmetic needs numbers")
                return NUMBER
            case nodes.ListLit():
                self.error(node, "E101", "a list may only follow 'in'")
                return None
        self.condition(node)
        return BOOL

    def enum_member(self, kind, literal: nodes.Literal):
        if is_enum(kind) and isinstance(literal.value, str) and literal.value not in kind[1]:
            self.error(literal, "E103", f"'{literal.value}' is not one of {', '.join(kind[1])}",
                       did_you_mean(literal.value, kind[1]))

    def catalog_member(self, name_node, literal: nodes.Literal):
        """A literal compared with a catalog fact must be a catalog id: the state holds canonical ids,
        so a misspelt id (or an alias) never matches and the rule silently never fires."""
        catalog = self.namespace.catalog.get(name_node.id) if isinstance(name_node, nodes.Name) else None
        if not catalog or not isinstance(literal.value, str) or literal.value in catalog[0]:
            return
        ids, aliases = catalog
        if literal.value in aliases:
            self.error(literal, "E103", f"'{literal.value}' is an alias; '{name_node.id}' holds the catalog id "
                       f"'{aliases[literal.value]}'", aliases[literal.value])
        else:
            self.error(literal, "E103", f"'{literal.value}' is not a {name_node.id} of the knowledge catalog",
                       did_you_mean(literal.value, list(ids) + list(aliases)))

    def compare(self, node: nodes.Compare):
        left, right = self.value(node.left), self.value(node.right)
        if left is None or right is None:
            return
        if node.op in _ORDERING and (_base(left) != NUMBER or _base(right) != NUMBER):
            self.error(node, "E103", f"'{node.op}' compares numbers only")
        elif _base(left) != _base(right) and MIXED not in (left, right):
            self.error(node, "E103", f"cannot compare {_base(left)} with {_base(right)}")
        for side, other, other_node in ((node.left, right, node.right), (node.right, left, node.left)):
            if isinstance(side, nodes.Literal):
                self.enum_member(other, side)
                self.catalog_member(other_node, side)

    def condition(self, node):
        match node:
            case nodes.Compare():
                self.compare(node)
            case nodes.In():
                self.membership(node)
            case nodes.Exists(name=name):
                self.name_type(name)
            case nodes.Not(operand=operand):
                self.condition(operand)
            case nodes.And(items=items) | nodes.Or(items=items):
                for item in items:
                    self.condition(item)
            case nodes.Name(id=name):
                kind = self.name_type(node)
                if kind is not None and kind != BOOL:  # a conclusion: say what its rules make it
                    origin = getattr(self.namespace, "origins", {}).get(name, "name")
                    whose = "its rules conclude it as" if origin == "conclusion" else f"the {origin} is"
                    self.error(node, "E103", f"'{name}' is not true/false ({whose} {described(kind)}); compare it "
                               "with a value")
            case nodes.Literal(value=value):
                if not isinstance(value, bool):
                    self.error(node, "E103", "a condition must be true or false")
            case _:
                self.error(node, "E103", "this is a value, not a condition (compare it with something)")

    def membership(self, node: nodes.In):
        kind = self.value(node.left)
        before = len(self.sink.errors)
        for checked, item in enumerate(node.items):
            if len(self.sink.errors) - before >= MAX_ITEM_ERRORS:  # a pasted 100,000-item list: not 100,000 lines
                self.error(node, "E103", f"more items of this list are wrong ({len(node.items) - checked} not "
                                         f"checked); correct the ones above first")
                return
            if kind is not None and _base(kind) != literal_type(item.value):
                self.error(item, "E103", f"list item {item.value!r} is not a {_base(kind)}")
            else:
                self.enum_member(kind, item)
                self.catalog_member(node.left, item)


def check_condition(node, namespace, sink, rule_id, where) -> None:
    """Report unknown names and type errors of a condition, each at its own column."""
    _Checker(namespace, sink, rule_id, where).condition(node)


def check_value_expression(node, namespace, sink, rule_id, where, field: str | None = None,
                           numeric: bool = False) -> None:
    """Report problems of a value expression (e.g. recommend.nodes); `numeric` fields need a number
    (the answer turns them into integers: a text there would fail every answer the rule gives)."""
    checker = _Checker(namespace, sink, rule_id, where)
    kind = checker.value(node)
    what = f"recommend.{field}" if field else "the value"
    if kind is not None and numeric and _base(kind) != NUMBER:
        checker.error(node, "E103", f"{what} must be a number, not {_described(kind)}")
    elif kind is not None and _base(kind) not in (NUMBER, TEXT):
        checker.error(node, "E103", "expected a number or a value")


def _described(kind) -> str:
    return {TEXT: "a text", BOOL: "true/false"}.get(_base(kind), f"a {_base(kind)} value")
