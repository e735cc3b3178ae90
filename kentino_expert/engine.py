"""The durable-rules backend: the only module that imports durable_rules.

Built on the measured defects of durable-rules 2.0.28 (see README, "The engine"):
- no `durable.engine.Host`: its timer threads run actions asynchronously and crash on deleted
  sessions; the C core is driven synchronously from the calling thread, under a lock;
- every session starts by firing a no-op boot rule (delete_state segfaults on a session in
  which no action ever started) and is deleted at the end (live sessions leak ~450 KB each);
- actions are ours, run between C calls, so their exceptions reach the caller;
- one state fact per group, no joins: the join defects (heap overflow, silently skipped
  cross-fact terms) cannot be reached; groups of at most 64 rules keep the alpha fan-out under
  the engine's limit, and chunks keep each ruleset under its rule limit;
- values are encoded without exponents, huge ints as floats, strings ASCII-escaped on both sides.
"""
from __future__ import annotations

import itertools
import json
import math
import threading
from decimal import Decimal

import durable_rules_engine as _dre

from . import expr as ast
from .errors import EngineError

GROUP_RULES = 64       # one fact may match at most 64 sibling conditions (error 303)
CHUNK_RULES = 1024     # a ruleset holds at most 4,096 rules; session cost grows with the count
MAX_PROPERTIES = 250   # a fact may carry at most 254 properties (error 302)
MAX_DEPTH = 8          # nesting of and/or groups we accept (kept shallow on purpose)
BOOT = "__boot__"
_IMPOSSIBLE = {"$nex": {"t": 1}}
_OPS = {"<": "$lt", "<=": "$lte", ">": "$gt", ">=": "$gte", "!=": "$neq"}
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_ARITH = {"+": "$add", "-": "$sub", "*": "$mul", "/": "$div"}


_CORE_CALLS = ("assert_fact", "retract_fact", "start_action_for_state", "complete_and_start_action", "delete_state")


class CoreTimer:
    """Time spent inside durable-rules' C core while it is active (the benchmark's "engine floor").

    Use as a context manager; `ns` and `calls` accumulate. Wraps the core's functions for the
    duration only, so normal runs pay nothing.
    """

    def __init__(self):
        self.ns, self.calls, self._saved = 0, 0, {}

    def __enter__(self):
        import time
        for name in _CORE_CALLS:
            original = self._saved[name] = getattr(_dre, name)

            def timed(*args, _original=original):
                start = time.perf_counter_ns()
                try:
                    return _original(*args)
                finally:
                    self.ns += time.perf_counter_ns() - start
                    self.calls += 1
            setattr(_dre, name, timed)
        return self

    def __exit__(self, *exc):
        for name, original in self._saved.items():
            setattr(_dre, name, original)
        self._saved = {}


class ShapeError(Exception):
    """A condition the engine cannot run safely."""


def encode_value(value) -> str:
    """JSON for one value, in the forms the C parser reads correctly."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) >= 2**63:
            return encode_value(float(value))
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EngineError(f"cannot pass a non-finite number ({value}) to the engine")
        text = repr(value)
        if "e" in text or "E" in text:
            text = format(Decimal(text), "f")
        return text if "." in text else text + ".0"
    if isinstance(value, str):
        return json.dumps(value)
    raise EngineError(f"cannot pass {type(value).__name__} to the engine")


def encode(data) -> str:
    """JSON of dicts/lists/values with `encode_value` for every scalar."""
    if isinstance(data, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{encode(v)}" for k, v in data.items()) + "}"
    if isinstance(data, list):
        return "[" + ",".join(encode(v) for v in data) + "]"
    return encode_value(data)


def _fragment(key, value) -> str:
    return f"{json.dumps(str(key))}:{encode(value)}"


def _plain_scalar(value) -> bool:
    """True when json.dumps writes `value` exactly as `encode_value` does (no exponent, no huge int)."""
    kind = type(value)
    if kind is str or kind is bool:
        return True
    if kind is int:
        return -2**63 < value < 2**63
    if kind is float:  # repr switches to an exponent outside [1e-4, 1e16); NaN and inf fail both tests
        return value == 0.0 or 1e-4 <= abs(value) < 1e16
    return False


def encode_members(items, wanted=None) -> str:
    """The members of a JSON object (no braces) for (key, value) pairs, keeping only `wanted` keys.

    Encoding dominated a step in Python: plain scalars go through the C encoder in one call, and only
    the rare value that needs `encode` (an exponent float, a huge int, a list) is encoded alone.
    """
    plain, special = {}, []
    for key, value in items:
        if wanted is not None and key not in wanted:
            continue
        if _plain_scalar(value):
            plain[key] = value
        else:
            special.append(_fragment(key, value))
    text = json.dumps(plain)[1:-1] if plain else ""
    return ",".join([text, *special]) if special and text else (text or ",".join(special))


def pattern_names(pattern) -> set[str]:
    """The fact properties a durable pattern reads (keys and `$m` references, not operators)."""
    names, stack = set(), [pattern]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$m" and isinstance(value, str):
                    names.add(value)
                    continue
                if not key.startswith("$"):
                    names.add(key)
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return names


def _operand(node):
    """Right-hand side of a durable comparison: a constant, a same-fact name, or arithmetic."""
    if isinstance(node, ast.Literal):
        if isinstance(node.value, float) and not math.isfinite(node.value):
            raise ShapeError("a constant must be a finite number")
        return node.value
    if isinstance(node, ast.Name):
        return {"$m": node.id}
    if isinstance(node, ast.Neg):
        return {"$mul": {"$l": _operand(node.operand), "$r": -1}}
    if isinstance(node, ast.Arith):
        return {_ARITH[node.op]: {"$l": _operand(node.left), "$r": _operand(node.right)}}
    raise ShapeError(f"{type(node).__name__.lower()} is not supported on the right of a comparison "
                     "(max/min/ceil belong in `then`, not `when`)")


def _names(node) -> list[str]:
    return [n.id for n in ast.names_in(node)]


def _missing_any(names) -> list:
    return [{"$nex": {name: 1}} for name in dict.fromkeys(names)]


def _compare(node: ast.Compare, negate: bool):
    left, right, op = node.left, node.right, node.op
    if not isinstance(left, ast.Name) and isinstance(right, ast.Name):
        left, right, op = right, left, _FLIP[op]
    if not isinstance(left, ast.Name):
        if not _names(left) and not _names(right):
            from .evaluate import truth_of
            holds = truth_of(ast.Compare(node.pos, op, left, right), {}) != negate
            return None if holds else _IMPOSSIBLE
        raise ShapeError("the left side of a comparison must be a single name (move arithmetic to the right)")
    if negate:
        positive = _compare(ast.Compare(node.pos, _NEGATED[op], left, right), False)
        return {"$or": [positive] + _missing_any(_names(left) + _names(right))}
    operand = _operand(right)
    return {left.id: operand} if op == "==" else {_OPS[op]: {left.id: operand}}


def _membership(node: ast.In, negate: bool):
    if not isinstance(node.left, ast.Name):
        raise ShapeError("'in' needs a single name on its left")
    name = node.left.id
    equal = [{name: item.value} for item in node.items]
    differ = [{"$neq": {name: item.value}} for item in node.items]
    inside = not node.negated
    if negate:
        inside = not inside
        terms = (equal if inside else differ) or ([_IMPOSSIBLE] if inside else [{"$ex": {name: 1}}])
        group = {"$or": terms} if inside else {"$and": terms}
        return {"$or": [group, {"$nex": {name: 1}}]}
    if inside:
        return {"$or": equal} if len(equal) > 1 else (equal[0] if equal else _IMPOSSIBLE)
    return {"$and": differ} if differ else {"$ex": {name: 1}}


def translate(node, negate: bool = False, depth: int = 0):
    """AST condition -> durable term (negation pushed down; None means always true)."""
    if depth > MAX_DEPTH:
        raise ShapeError(f"conditions nest deeper than {MAX_DEPTH} and/or levels")
    if isinstance(node, ast.Not):
        return translate(node.operand, not negate, depth)
    if isinstance(node, ast.Compare):
        return _compare(node, negate)
    if isinstance(node, ast.In):
        return _membership(node, negate)
    if isinstance(node, ast.Exists):
        return {"$nex" if negate else "$ex": {node.name.id: 1}}
    if isinstance(node, ast.Name):
        if negate:
            return {"$or": [{"$neq": {node.id: True}}, {"$nex": {node.id: 1}}]}
        return {node.id: True}
    if isinstance(node, ast.Literal) and isinstance(node.value, bool):
        return None if node.value != negate else _IMPOSSIBLE
    if isinstance(node, (ast.And, ast.Or)):
        conjunctive = isinstance(node, ast.And) != negate
        terms = [translate(item, negate, depth + 1) for item in node.items]
        if conjunctive:
            kept = [t for t in terms if t is not None]
            return {"$and": kept} if len(kept) > 1 else (kept[0] if kept else None)
        if any(t is None for t in terms):
            return None
        return {"$or": terms}
    raise ShapeError(f"{type(node).__name__} is not a condition")


def rule_pattern(rule, group: str) -> dict:
    terms = [{"t": group}]
    for condition in rule.conditions:
        term = translate(condition)
        if term is None:
            continue
        terms.extend(term["$and"] if set(term) == {"$and"} else [term])
    return {"pri": rule.order, "all": [{"m": {"$and": terms}}]}


def shape_problems(rules) -> list[tuple]:
    """(rule, message) for every rule the engine would refuse; used by `rules check`."""
    problems = []
    for rule in rules:
        try:
            rule_pattern(rule, "g0")
            for condition in rule.conditions:
                for name in ast.names_in(condition):
                    if len(name.id) > 200:
                        raise ShapeError("a name longer than 200 characters")
        except ShapeError as exc:
            problems.append((rule, str(exc)))
    names = {name for rule in rules for name in list(rule.reads) + list(rule.writes)}
    if len(names) > MAX_PROPERTIES - 100 and rules:
        problems.append((rules[0], f"the rule set uses {len(names)} distinct names; one fact holds at most "
                         f"{MAX_PROPERTIES} properties with the facts and figures"))
    return problems


class _Chunk:
    """One durable ruleset: a band of consecutive-priority rules, in groups of GROUP_RULES."""

    _names = itertools.count()

    def __init__(self, rules):
        self.groups = [f"g{index}" for index in range(math.ceil(len(rules) / GROUP_RULES))]
        definition = {BOOT: {"pri": 0, "all": [{"m": {"t": BOOT}}]}}
        for index, rule in enumerate(rules):
            definition[rule.id] = rule_pattern(rule, self.groups[index // GROUP_RULES])
        # only what a condition reads is sent to the engine: the C core parses less per assert
        self.reads = pattern_names([term["m"] for p in definition.values() for term in p["all"]]) - {"t", "id", "sid"}
        self.name = f"kentino{next(self._names)}"
        try:
            self.handle = _dre.create_ruleset(self.name, encode(definition))
        except _dre.error as exc:
            raise EngineError(f"durable-rules refused the rule set: {exc}") from None
        self.facts: dict = {}
        self.state_handle = None
        self.pending = False

    def close(self):
        if getattr(self, "handle", None) is not None:
            _dre.delete_ruleset(self.handle)
            self.handle = None


def _rule_of(message: str) -> str:
    """The rule name of an action message `{"<rule>": {...}}` (rule ids are kebab-case: no escapes)."""
    if message.startswith('{"'):
        return message[2:message.index('"', 2)]
    return next(iter(json.loads(message)))


class DurableEngine:
    """Runs a compiled rule set on durable-rules, synchronously, one session per evaluation."""

    def __init__(self, ruleset, chunk_rules: int = CHUNK_RULES):
        problems = shape_problems(ruleset.rules)
        if problems:
            rule, message = problems[0]
            raise EngineError(f"{rule.location}: rule '{rule.id}': {message}")
        rules = list(ruleset.rules)
        self.ruleset = ruleset
        self._chunks = [_Chunk(rules[i:i + chunk_rules]) for i in range(0, len(rules), chunk_rules)] or [_Chunk([])]
        self._reads = frozenset().union(*(chunk.reads for chunk in self._chunks))
        self._sessions = itertools.count(1)
        self._lock = threading.Lock()

    def close(self) -> None:
        for chunk in self._chunks:
            chunk.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def run(self, state: dict, apply, max_steps: int = 100_000) -> tuple[list[str], dict]:
        """Forward-chain from `state`; `apply(rule, state)` returns the properties a firing adds."""
        with self._lock:
            sid = str(next(self._sessions))
            try:
                body = [encode_members(state.items(), self._reads)]
                self._open(sid, body)
                return self._chain(sid, state, body, apply, max_steps)
            except _dre.error as exc:
                raise EngineError(f"durable-rules failed while evaluating: {exc}") from None
            finally:
                self._close_session(sid)

    def _open(self, sid: str, body: list) -> None:
        for chunk in self._chunks:
            result = _dre.assert_fact(chunk.handle, encode({"t": BOOT, "sid": sid}))
            chunk.state_handle = result[1]
            action = _dre.start_action_for_state(chunk.handle, chunk.state_handle)
            if not action or _rule_of(action[1]) != BOOT:
                raise EngineError("durable-rules did not run the boot rule first")
            chunk.pending = True
            self._complete(chunk)  # nothing else is asserted yet, so nothing starts
            chunk.facts = {}
            self._assert_state(chunk, sid, body, 0)

    def _assert_state(self, chunk: _Chunk, sid: str, body_holder: list, step: int) -> None:
        # Encoding dominated a step: the state is encoded once, and a firing appends only what it adds
        # (state properties are write-once, so appending never duplicates a key).
        body = body_holder[0]
        for group in chunk.groups:
            old = chunk.facts.get(group)
            if old is not None:
                _dre.retract_fact(chunk.handle, old)
            # group names (g0, g1, ...) and session ids (digits) need no JSON escaping
            tail = f'"t":"{group}","id":"{group}:{step}","sid":"{sid}"'
            chunk.facts[group] = "{" + (body + "," if body else "") + tail + "}"
            code = _dre.assert_fact(chunk.handle, chunk.facts[group])[0]
            if code == 2:
                raise EngineError("durable-rules saw the same state fact twice")

    def _complete(self, chunk: _Chunk):
        """Finish the chunk's started action; durable starts the next one, whose rule is returned."""
        chunk.pending = False
        message = _dre.complete_and_start_action(chunk.handle, chunk.state_handle)
        if message:
            chunk.pending = True
            return _rule_of(message)
        return None

    def _next_firing(self):
        """The highest-priority activation: earlier chunks hold higher-priority rules."""
        for chunk in self._chunks:
            if chunk.pending:
                rule_id = self._complete(chunk)
            else:
                action = _dre.start_action_for_state(chunk.handle, chunk.state_handle)
                rule_id = None
                if action:
                    chunk.pending, rule_id = True, _rule_of(action[1])
            if rule_id is not None:
                return chunk, rule_id
        return None, None

    def _chain(self, sid, state, body, apply, max_steps):
        fired = []
        for step in range(1, max_steps + 1):
            chunk, rule_id = self._next_firing()
            if chunk is None:
                return fired, state
            if rule_id == BOOT:
                raise EngineError("boot rule fired twice in one session")
            added = apply(self.ruleset.rule(rule_id), state)
            if state.keys() & added.keys():
                raise EngineError(f"rule '{rule_id}' re-wrote {sorted(state.keys() & added.keys())}: properties are write-once")
            new = encode_members(added.items(), self._reads)
            body[0] = f"{body[0]},{new}" if body[0] and new else (body[0] or new)
            state = {**state, **added}
            fired.append(rule_id)
            for each in self._chunks:
                self._assert_state(each, sid, body, step)
        raise EngineError(f"no quiescence after {max_steps} firings")

    def _close_session(self, sid: str) -> None:
        for chunk in self._chunks:
            guard = 0
            while chunk.pending and guard < 100_000:
                self._complete(chunk)
                guard += 1
            if chunk.state_handle is not None:
                _dre.delete_state(chunk.handle, sid)
            chunk.state_handle, chunk.facts = None, {}
