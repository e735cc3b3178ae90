"""A model of the alpha network durable-rules' C core builds from rule patterns (rete.c), so that
`rules check` refuses what the core cannot run and the engine packs rules into groups it can run.

Limits of durable-rules 2.0.28, measured (tests/test_engine_limits.py re-measures each in a child):
- the conditions under one node sit in a 512-slot hash table probed linearly: 512 of them make every
  assert loop forever, 513 make building loop forever (issue 9's `or` of 490+ terms, beside the
  conditions other rules already put there);
- `not exists` conditions and `or` continuations under one node sit in a 128-slot list: 128 crash;
- the rules whose pattern ends at one node sit in a 256-slot list: 256 crash, 257 are error 108;
- an assert walks the matching conditions depth first on a 64-entry stack: a fact that leaves more
  than 64 pending is error 303, on every request (55 always-true `or` terms beside a group's rules);
- one rule's pattern holds at most 15 and/or groups (error 113 at 16);
- every matching `or` branch walks the rest of the pattern again, so chained and nested `or`s
  multiply what one assert walks (three always-true branches x 13 groups: 1.8 s per assert).
"""
from __future__ import annotations

from dataclasses import dataclass

MAX_SIBLINGS = 256      # conditions under one node: half the 512-slot table (probes stay short)
MAX_LISTED = 127        # `not exists` + or-continuations under one node (128 crash)
MAX_ENDING = 255        # patterns ending at one node (256 crash)
MAX_PENDING = 64        # the matching stack (error 303 beyond)
MAX_GROUPS = 15         # and/or groups in one pattern (error 113 at 16)
MAX_WALK = 4096         # conditions one assert may walk in one group (~1 ms); a choice, not a C limit
MAX_ALTERNATIVES = 64   # alternatives of one `or`, as for the items of an `in` list
_FORWARD = "$forward"   # the property name of the node an `or` continues from (never in a fact)


@dataclass(frozen=True)
class Excess:
    """A limit a pattern goes beyond: `code` (diagnostics.CODES), the message, and the origin
    (condition index, offset) of the term to blame, or None for the rule as a whole."""

    code: str
    message: str
    origin: tuple | None = None


class _Node:
    """One alpha node: hashed children (conditions), listed children (`$nex`, or-continuations)."""

    __slots__ = ("prop", "op", "value", "hashed", "by_prop", "most", "listed", "ending", "origin", "memo")

    def __init__(self, prop, op, value, origin):
        self.prop, self.op, self.value, self.origin = prop, op, value, origin
        self.hashed: dict = {}
        self.by_prop: dict = {}  # property -> hashed children on it
        self.most: dict = {}     # property -> how many of those can match at once (computed once)
        self.listed: list = []
        self.ending = 0
        self.memo = None  # (pending, walk) once computed; cleared when a pattern passes through

    def add_hashed(self, key, child) -> None:
        self.hashed[key] = child
        self.by_prop.setdefault(child.prop, []).append(child)
        self.most.pop(child.prop, None)


def _value_key(value):
    """How the C core tells constants apart (an int 1 and a float 1.0 are different nodes);
    a node whose value is an expression is never shared."""
    if isinstance(value, (dict, list)):
        return object()
    return (type(value).__name__, value)


def _parts(term: dict):
    """(property, operator, value) of a single durable term."""
    (key, body), = term.items()
    if key.startswith("$"):
        (prop, value), = body.items()
        return prop, key, value
    return key, "$eq", term[key]


class _Pattern:
    """Adds one pattern to a network, recording what it touched, its groups and its widest `or`."""

    def __init__(self, origins):
        self.origins = origins or {}
        self.touched: list = []
        self.groups = 0
        self.widest = (0, None)  # (alternatives, origin)

    def origin_of(self, term, inherited):
        found = self.origins.get(id(term))
        return found[0] if found else inherited

    def add(self, term, parent, origin):
        self.touched.append(parent)
        origin = self.origin_of(term, origin)
        if "$and" in term:
            self.groups += 1
            for item in term["$and"]:
                parent = self.add(item, parent, origin)
            return parent
        if "$or" in term:
            return self.add_or(term["$or"], parent, origin)
        prop, op, value = _parts(term)
        key = (prop, op, _value_key(value))
        if op == "$nex":
            node = next((n for n in parent.listed if (n.prop, n.op, _value_key(n.value)) == key), None)
            if node is None:
                node = _Node(prop, op, value, origin)
                parent.listed.append(node)
        else:
            node = parent.hashed.get(key)
            if node is None:
                node = _Node(prop, op, value, origin)
                parent.add_hashed(key, node)
        self.touched.append(node)
        return node

    def add_or(self, branches, parent, origin):
        """Every branch hangs under `parent`; each branch's end links to one new continuation node."""
        self.groups += 1
        forward = _Node(_FORWARD, "$nex", 1, origin)
        self.touched.append(forward)
        alternatives = 0
        for branch in branches:
            alternatives += _alternatives(branch)
            self.add(branch, parent, origin).listed.append(forward)
        if alternatives > self.widest[0]:
            self.widest = (alternatives, origin)
        return forward


def _alternatives(term) -> int:
    """Alternatives an `or` branch adds under the same node (a nested `or` adds its own)."""
    if "$or" in term:
        return sum(_alternatives(branch) for branch in term["$or"])
    return 1


# -- what one assert can do ------------------------------------------------------------------------

def _class(value) -> str:
    return "text" if isinstance(value, str) else "number"


def _most_at_once(children) -> int:
    """How many of these conditions on one property one value can meet at once.

    Exact for constants of one type (a sweep over the sorted constants): the type checker lets a name
    meet constants of its own type only, so its value has that type. A condition whose value is an
    expression, and `exists`, count as always met; constants of several types (a conclusion of mixed
    type, which durable compares as text in its own way) count as all met.
    """
    tests = [(c.op, c.value) for c in children if not isinstance(c.value, (dict, list)) and c.op != "$ex"]
    if len({_class(value) for _, value in tests}) > 1:
        return len(children)
    return len(children) - len(tests) + _sweep(tests)


def _sweep(tests) -> int:
    """Most constraints `value OP constant` one value meets: probes at each constant and between them."""
    if not tests:
        return 0
    points = sorted({value for _, value in tests})
    index = {value: 2 * i + 1 for i, value in enumerate(points)}  # probes: gap, point, gap, ..., gap
    size = 2 * len(points) + 1
    delta = [0] * (size + 1)

    def add(start, stop):  # +1 on probes start..stop-1
        delta[start] += 1
        delta[stop] -= 1
    for op, value in tests:
        at = index[value]
        if op == "$eq":
            add(at, at + 1)
        elif op == "$neq":
            add(0, at)
            add(at + 1, size)
        elif op in ("$gt", "$gte"):
            add(at + (op == "$gt"), size)
        elif op in ("$lt", "$lte"):
            add(0, at + (op == "$lte"))
        else:  # an operator this model does not know: always met
            add(0, size)
    running, best = 0, 0
    for step in delta[:size]:
        running += step
        best = max(best, running)
    return best


def _matchable(node) -> list:
    """Per property, (how many can match at once, the children): what one assert may push."""
    out = []
    for prop, children in node.by_prop.items():
        most = node.most.get(prop)
        if most is None:
            most = node.most[prop] = _most_at_once(children)
        out.append((most, children))
    out += [(1, [child]) for child in node.listed]
    return out


def _measure(top) -> tuple[int, int]:
    """(most stack entries, most nodes visited) while one assert walks `top` and what hangs under it.

    Iterative (post-order): an `and` of a thousand terms is a chain a thousand nodes deep.
    """
    stack, matchable = [top], {}
    while stack:
        node = stack[-1]
        if node.memo is not None:
            stack.pop()
            continue
        groups = matchable.get(id(node))
        if groups is None:
            groups = matchable[id(node)] = _matchable(node)
            waiting = [child for _, members in groups for child in members if child.memo is None]
            if waiting:
                stack.extend(waiting)
                continue
        stack.pop()
        pending = sum(k for k, _ in groups)
        deepest = max((child.memo[0] for _, members in groups for child in members), default=0)
        walk = 1 + sum(sum(sorted((child.memo[1] for child in members), reverse=True)[:k]) if k < len(members)
                       else sum(child.memo[1] for child in members) for k, members in groups)
        node.memo = (max(1, pending - 1 + deepest) if pending else 1, min(walk, 10 ** 12))
    return top.memo


def _blame(node):
    """The origin most of `node`'s children come from (an `or`'s branches carry the `or`'s)."""
    counts: dict = {}
    for child in list(node.hashed.values()) + node.listed:
        if child.origin is not None:
            counts[child.origin] = counts.get(child.origin, 0) + 1
    return max(counts, key=counts.get) if counts else node.origin


# -- a group of rules -------------------------------------------------------------------------------

class Group:
    """The network of one fact group (`t == <group>`): rules are added while it stays runnable."""

    def __init__(self, name: str = "g0"):
        self.root = _Node(None, "root", None, None)
        self.top = _Node("t", "$eq", name, None)
        self.root.add_hashed(("t", "$eq", _value_key(name)), self.top)
        self.size = 0
        self.crowded = self.listing = self.ended = self.top  # the nodes with the most of each, so far

    def add(self, terms: list, origins: dict | None = None) -> _Pattern:
        """Add the terms of one pattern's top `$and` (after its `t` term)."""
        pattern = _Pattern(origins)
        pattern.groups = 1  # the top $and
        end = self.top
        for term in terms:
            end = pattern.add(term, end, None)
        end.ending += 1
        pattern.touched += [self.top, self.root, end]
        for node in pattern.touched:  # only nodes a pattern passes through gain children
            node.memo = None
            if len(node.hashed) > len(self.crowded.hashed):
                self.crowded = node
            if len(node.listed) > len(self.listing.listed):
                self.listing = node
            if node.ending > self.ended.ending:
                self.ended = node
        self.size += 1
        return pattern

    def excesses(self) -> list[Excess]:
        """Every limit this group goes beyond (fan-out, stack, walk), with the term to blame."""
        out = []
        hashed, listed, ending = len(self.crowded.hashed), len(self.listing.listed), self.ended.ending
        if hashed > MAX_SIBLINGS:
            out.append(Excess("E202", f"{hashed} conditions hang under one node of the engine's network (at most "
                              f"{MAX_SIBLINGS}; durable-rules loops forever at 512): shorten the `or` or split the "
                              "rule",
                              _blame(self.crowded)))
        if listed > MAX_LISTED:
            out.append(Excess("E202", f"{listed} `not exists` conditions and `or` continuations hang under one "
                              f"node (at most {MAX_LISTED}; durable-rules crashes at 128)", _blame(self.listing)))
        if ending > MAX_ENDING:
            out.append(Excess("E202", f"{ending} rules end at the same condition (at most {MAX_ENDING}; "
                              "durable-rules crashes at 256)"))
        pending, walk = _measure(self.root)
        if pending > MAX_PENDING:
            out.append(Excess("E203", f"one fact can leave {pending} matching conditions pending at once "
                              f"(durable-rules fails every request beyond {MAX_PENDING}, error 303): an `or` "
                              "whose terms can hold together, or too many of them", _blame(_widest_pending(self.root))))
        if walk > MAX_WALK:
            out.append(Excess("E204", f"one fact can walk {walk:,} conditions (at most {MAX_WALK:,}): each "
                              "matching `or` branch walks the rest of the rule again, so chained or nested "
                              "`or`s multiply", _blame(_widest_pending(self.root))))
        return out


def _widest_pending(root):
    """The node whose children one fact can match the most of (an `or` of terms that hold together)."""
    best, best_count, stack, seen = root, 0, [root], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        count = sum(k for k, _ in _matchable(node))
        if count > best_count:
            best, best_count = node, count
        stack.extend(node.hashed.values())
        stack.extend(node.listed)
    return best


def rule_excesses(terms: list, origins: dict | None = None) -> list[Excess]:
    """The limits one rule's pattern goes beyond on its own (in a group of its own); one per culprit:
    an `or` too long for the table is also too long for the stack, and is said once."""
    group = Group()
    pattern = group.add(terms, origins)
    out = []
    if pattern.groups > MAX_GROUPS:
        out.append(Excess("E205", f"the rule compiles to {pattern.groups} and/or groups (at most {MAX_GROUPS}; "
                          "durable-rules refuses more, error 113): each `or`, `in` list and negated comparison "
                          "is one", None))
    alternatives, origin = pattern.widest
    if alternatives > MAX_ALTERNATIVES:
        out.append(Excess("E202", f"an `or` of {alternatives} alternatives (at most {MAX_ALTERNATIVES}, as for "
                          "an `in` list; durable-rules hangs at 512 under one node): use a range (>=, <=) or "
                          "split the rule", origin))
    kept, blamed = [], set()
    for excess in out + group.excesses():
        if excess.origin is None or excess.origin not in blamed:
            kept.append(excess)
            blamed.add(excess.origin)
    return kept


class Unrunnable(Exception):
    """A pattern the core cannot run even in a group of its own (`rules check` refuses it first)."""

    def __init__(self, index: int, excesses: list[Excess]):
        super().__init__(excesses[0].message)
        self.index, self.excesses = index, excesses


def pack(patterns: list[list], group_rules: int) -> list[list[int]]:
    """Indices of `patterns` in consecutive groups of at most `group_rules` that each stay runnable
    (a fact group is one assert per step, so groups are filled as far as the limits allow)."""
    groups, current, members = [], Group(), []
    for index, terms in enumerate(patterns):
        current.add(terms)
        members.append(index)
        if len(members) > group_rules or current.excesses():
            if len(members) > 1:
                groups.append(members[:-1])
                current, members = Group(), [index]
                current.add(terms)
            excesses = current.excesses()
            if excesses:
                raise Unrunnable(index, excesses)
    if members:
        groups.append(members)
    return groups
