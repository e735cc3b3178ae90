"""The rule language's expressions: tokenizer and parser into the syntax tree of nodes.py (no eval)."""
from __future__ import annotations

import re

from .nodes import And, Arith, Call, Compare, Exists, In, ListLit, Literal, Name, Neg, Node, Not, Or, children

COMPARISONS = ("<=", ">=", "==", "!=", "<", ">")
FUNCTIONS = {"max": (1, None), "min": (1, None), "ceil": (1, 1), "floor": (1, 1), "round": (1, 2)}
KEYWORDS = {"and", "or", "not", "in", "exists", "true", "false"}
# Every later pass (checking, folding, translating, evaluating) recurses over the tree: a cap here
# keeps a hostile condition a located E101 instead of a RecursionError far from its source.
MAX_NESTING = 40
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t"}

# Numbers are ASCII digits only: `\d` (and int(), float()) also take Bengali '২০' or fullwidth '２０', which a
# reviewer reads as text, not as the number the engine would compare with.
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)
  | (?P<str>'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|==|!=|<|>|\+|-|\*|/|\(|\)|\[|\]|,)
""", re.VERBOSE)


class ExprSyntaxError(Exception):
    """A malformed expression; `offset` is the 0-based position in the text."""

    def __init__(self, message: str, offset: int):
        self.message = message
        self.offset = offset
        super().__init__(f"{message} (at column {offset + 1})")


def tokenize(text: str) -> list[tuple[str, str, int]]:
    tokens, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            if text[pos].isdigit():  # a digit of another script: the engine would compare with its value
                raise ExprSyntaxError(f"{text[pos]!r} is not a digit 0-9: write numbers with the digits 0-9", pos)
            raise ExprSyntaxError(f"unexpected character {text[pos]!r}", pos)
        kind = match.lastgroup
        if kind != "ws":
            tokens.append((kind, match.group(), pos))
        pos = match.end()
    tokens.append(("end", "", len(text)))
    return tokens


def _unescape(body: str, pos: int) -> str:
    """The value of a string literal's body: only \\\\ \\' \\" \\n \\t and \\uXXXX are escapes.

    Not `unicode_escape`: that codec raises on a bad escape and reads UTF-8 text as Latin-1.
    `pos` is the offset of the body in the expression, for the error column.
    """
    out, index = [], 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        code = body[index + 1:index + 2]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            index += 2
        elif code == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[index + 2:index + 6]):
            out.append(chr(int(body[index + 2:index + 6], 16)))
            index += 6
        else:
            raise ExprSyntaxError(f"bad escape '\\{code}' in a string (escapes are \\\\ \\' \\\" \\n \\t \\uXXXX)",
                                  pos + index)
    return "".join(out)


class _Parser:
    def __init__(self, text: str):
        self.tokens = tokenize(text)
        self.index = 0
        self.depth = 0

    def descend(self, pos: int):
        """Count one level of recursive descent (parenthesis, function call, `not`, unary minus)."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise ExprSyntaxError(f"the expression nests deeper than {MAX_NESTING} levels", pos)

    def peek(self, offset: int = 0):
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def take(self):
        token = self.tokens[self.index]
        self.index += 1
        return token

    def accept(self, value: str):
        kind, text, _ = self.peek()
        if text == value and kind in ("op", "name"):
            return self.take()
        return None

    def expect(self, value: str):
        token = self.accept(value)
        if token is None:
            kind, text, pos = self.peek()
            raise ExprSyntaxError(f"expected '{value}' but found {text or 'the end'!r}", pos)
        return token

    def parse(self) -> Node:
        node = self.or_expr()
        kind, text, pos = self.peek()
        if kind != "end":
            raise ExprSyntaxError(f"unexpected {text!r}", pos)
        return node

    def or_expr(self):
        first = self.and_expr()
        items = [first]
        while self.accept("or"):
            items.append(self.and_expr())
        return first if len(items) == 1 else Or(first.pos, tuple(items))

    def and_expr(self):
        first = self.not_expr()
        items = [first]
        while self.accept("and"):
            items.append(self.not_expr())
        return first if len(items) == 1 else And(first.pos, tuple(items))

    def not_expr(self):
        token = self.peek()
        if token[0] == "name" and token[1] == "not" and self.peek(1)[1] != "in":
            self.take()
            self.descend(token[2])
            node = Not(token[2], self.not_expr())
            self.depth -= 1
            return node
        if token[0] == "name" and token[1] == "exists":
            self.take()
            kind, text, pos = self.take()
            if kind != "name" or text in KEYWORDS:
                raise ExprSyntaxError("'exists' takes a fact name", pos)
            return Exists(token[2], Name(pos, text))
        return self.comparison()

    def comparison(self):
        left = self.sum_expr()
        kind, text, pos = self.peek()
        if kind == "op" and text in COMPARISONS:
            self.take()
            return Compare(pos, text, left, self.sum_expr())
        if text == "in" or (text == "not" and self.peek(1)[1] == "in"):
            negated = self.take()[1] == "not"
            if negated:
                self.take()
            items = self.list_literal()
            return In(pos, left, items.items, negated)
        return left

    def list_literal(self) -> ListLit:
        start = self.expect("[")[2]
        items = []
        if not self.accept("]"):
            while True:
                item = self.unary()
                if not isinstance(item, Literal):
                    raise ExprSyntaxError("a list holds literal values only", item.pos)
                items.append(item)
                if self.accept("]"):
                    break
                self.expect(",")
        return ListLit(start, tuple(items))

    def sum_expr(self):
        node = self.term()
        while self.peek()[1] in ("+", "-") and self.peek()[0] == "op":
            _, op, pos = self.take()
            node = Arith(pos, op, node, self.term())
        return node

    def term(self):
        node = self.unary()
        while self.peek()[1] in ("*", "/") and self.peek()[0] == "op":
            _, op, pos = self.take()
            node = Arith(pos, op, node, self.unary())
        return node

    def unary(self):
        if self.peek()[1] == "-" and self.peek()[0] == "op":
            pos = self.take()[2]
            self.descend(pos)
            operand = self.unary()
            self.depth -= 1
            if isinstance(operand, Literal) and isinstance(operand.value, (int, float)):
                return Literal(pos, -operand.value)
            return Neg(pos, operand)
        return self.atom()

    def atom(self):
        kind, text, pos = self.take()
        if kind == "num":
            value = float(text)
            whole = value.is_integer() and "." not in text and "e" not in text.lower()
            return Literal(pos, int(value) if whole else value)
        if kind == "str":
            return Literal(pos, _unescape(text[1:-1], pos + 1))
        if kind == "op" and text == "(":
            self.descend(pos)
            node = self.or_expr()
            self.expect(")")
            self.depth -= 1
            return node
        if kind == "op" and text == "[":
            self.index -= 1
            return self.list_literal()
        if kind == "name":
            return self.name_or_call(text, pos)
        raise ExprSyntaxError(f"unexpected {text or 'end of expression'!r}", pos)

    def name_or_call(self, text: str, pos: int):
        if text in ("true", "false"):
            return Literal(pos, text == "true")
        if text in KEYWORDS:
            raise ExprSyntaxError(f"'{text}' cannot stand here", pos)
        if self.peek()[1] == "(" and text in FUNCTIONS:
            self.take()
            self.descend(pos)  # nested calls recurse too: max(max(max(...)))
            args = [self.sum_expr()]
            while self.accept(","):
                args.append(self.sum_expr())
            self.expect(")")
            self.depth -= 1
            low, high = FUNCTIONS[text]
            if len(args) < low or (high is not None and len(args) > high):
                raise ExprSyntaxError(f"{text}() takes {low}..{high or 'n'} arguments", pos)
            return Call(pos, text, tuple(args))
        return Name(pos, text)


def parse(text: str) -> Node:
    """Parse an expression of the rule language; raise ExprSyntaxError with the offset."""
    if not isinstance(text, str) or not text.strip():
        raise ExprSyntaxError("empty expression", 0)
    node = _Parser(text).parse()
    _check_depth(node)
    return node


def _check_depth(root: Node) -> None:
    """Refuse a tree deeper than MAX_NESTING (long `a + a + ...` chains nest without parentheses).

    Iterative on purpose: this is the pass that must not itself recurse too deeply.
    """
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ExprSyntaxError(f"the expression nests deeper than {MAX_NESTING} levels "
                                  "(split a long chain of + - * / into figures or parameters)", node.pos)
        stack.extend((child, depth + 1) for child in children(node))
