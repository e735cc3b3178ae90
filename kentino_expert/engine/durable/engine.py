"""The durable-rules backend: the only module that imports durable_rules.

Built on the measured defects of durable-rules 2.0.28 (see README, "The engine"):
- no `durable.engine.Host`: its timer threads run actions asynchronously and crash on deleted
  sessions; the C core is driven synchronously from the calling thread, under a lock;
- every session starts by firing a no-op boot rule (delete_state segfaults on a session in
  which no action ever started) and is deleted at the end (live sessions leak ~450 KB each);
- actions are ours, run between C calls, so their exceptions reach the caller;
- one state fact per group, no joins: the join defects (heap overflow, silently skipped
  cross-fact terms) cannot be reached; rules are packed into groups of at most 64 whose network
  stays within the core's limits (network.py: conditions under one node, the 64-entry matching
  stack, the conditions one assert walks), and chunks keep each ruleset under its rule limit;
- values are encoded without exponents, huge ints as floats, strings ASCII-escaped on both sides.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time

import durable_rules_engine as _dre

from ...errors import EngineError
from ..backend import MAX_STEPS, Apply, ShapeProblem
from .network import Unrunnable, pack
from .terms import ENGINE_NAMES, encode, encode_members, pattern_names, rule_pattern, rule_terms
from .terms import shape_problems as rule_shape_problems

GROUP_RULES = 64       # rules per fact group at most (fewer when the network limits say so)
CHUNK_RULES = 1024     # a ruleset holds at most 4,096 rules; session cost grows with the count
CHUNK_GROUPS = 64      # fact groups per ruleset: each is one more assert per step
BOOT = "__boot__"


_CORE_CALLS = ("assert_fact", "retract_fact", "start_action_for_state", "complete_and_start_action", "delete_state")


class CoreTimer:
    """Time spent inside durable-rules' C core while it is active (the benchmark's "engine floor").

    Use as a context manager; `ns` and `calls` accumulate. Wraps the core's functions for the
    duration only, so normal runs pay nothing.
    """

    def __init__(self):
        self.ns, self.calls, self._saved = 0, 0, {}

    def __enter__(self):
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



def layout(rules, chunk_rules: int = CHUNK_RULES) -> list[list[list]]:
    """Chunks of fact groups of rules, in rule order: groups within the core's network limits."""
    try:
        members = pack([rule_terms(rule, "g")[1:] for rule in rules], GROUP_RULES)
    except Unrunnable as exc:
        rule = rules[exc.index]
        raise EngineError(f"{rule.location}: rule '{rule.id}': {exc.excesses[0].message}") from None
    chunks, size = [], 0
    for group in ([rules[i] for i in indices] for indices in members):
        if not chunks or size + len(group) > chunk_rules or len(chunks[-1]) >= CHUNK_GROUPS:
            chunks.append([])
            size = 0
        chunks[-1].append(group)
        size += len(group)
    return chunks or [[]]


class _Chunk:
    """One durable ruleset: a band of consecutive-priority rules in fact groups (see `layout`)."""

    _names = itertools.count()

    def __init__(self, groups):
        self.groups = [f"g{index}" for index in range(len(groups))]
        definition = {BOOT: {"pri": 0, "all": [{"m": {"t": BOOT}}]}}
        # only what a group's conditions read is sent in its fact: the C core parses less per assert, and a
        # firing that adds nothing a group reads leaves that group's fact (and its matches) as they are
        self.group_reads = []
        for group, rules in zip(self.groups, groups, strict=True):
            patterns = {rule.id: rule_pattern(rule, group) for rule in rules}
            definition.update(patterns)
            self.group_reads.append(frozenset(
                pattern_names([term["m"] for p in patterns.values() for term in p["all"]]) - set(ENGINE_NAMES)))
        self.name = f"kentino{next(self._names)}"
        try:
            self.handle = _dre.create_ruleset(self.name, encode(definition))
        except _dre.error as exc:
            raise EngineError(f"durable-rules refused the rule set: {exc}") from None
        self.facts: dict = {}
        self.bodies: dict = {}  # group -> its fact's encoded members (the names it reads) in this session
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

    name = "durable"
    # the wrapper's version and the one durable-rules release it is built for (pyproject pins it)
    version = "kentino-expert/0.1 durable-rules/2.0.28"
    reserved_names = ENGINE_NAMES

    @classmethod
    def shape_problems(cls, rules) -> list[ShapeProblem]:
        """Conditions the translation refuses, and rules beyond the C core's network limits on their own."""
        return rule_shape_problems(rules)

    def __init__(self, ruleset, chunk_rules: int = CHUNK_RULES):
        problems = rule_shape_problems(ruleset.rules, network=False)  # the network is checked by `layout`
        if problems:
            problem = problems[0]
            raise EngineError(f"{problem.rule.location}: rule '{problem.rule.id}': {problem.message}")
        self.ruleset = ruleset
        self._chunks = []
        try:
            for groups in layout(list(ruleset.rules), chunk_rules):
                self._chunks.append(_Chunk(groups))
        except BaseException:
            self.close()
            raise
        self._sessions = itertools.count(1)
        self._lock = threading.Lock()

    def close(self) -> None:
        for chunk in self._chunks:
            chunk.close()

    def __del__(self):
        with contextlib.suppress(Exception):  # at interpreter exit the C core may be gone already
            self.close()

    def run(self, state: dict, apply: Apply, max_steps: int = MAX_STEPS) -> tuple[list[str], dict]:
        """Forward-chain from `state`; `apply(rule, state)` returns the properties a firing adds."""
        with self._lock:
            sid = str(next(self._sessions))
            try:
                self._open(sid, state)
                return self._chain(sid, state, apply, max_steps)
            except _dre.error as exc:
                raise EngineError(f"durable-rules failed while evaluating: {exc}") from None
            finally:
                self._close_session(sid)

    def _open(self, sid: str, state: dict) -> None:
        for chunk in self._chunks:
            result = _dre.assert_fact(chunk.handle, encode({"t": BOOT, "sid": sid}))
            chunk.state_handle = result[1]
            action = _dre.start_action_for_state(chunk.handle, chunk.state_handle)
            if not action or _rule_of(action[1]) != BOOT:
                raise EngineError("durable-rules did not run the boot rule first")
            chunk.pending = True
            self._complete(chunk)  # nothing else is asserted yet, so nothing starts
            chunk.facts = {}
            chunk.bodies = {group: encode_members(state.items(), reads)
                            for group, reads in zip(chunk.groups, chunk.group_reads, strict=True)}
            for group in chunk.groups:
                self._assert_group(chunk, group, sid, 0)

    def _assert_added(self, chunk: _Chunk, sid: str, added: dict, step: int) -> None:
        """Re-assert the fact of each group that reads a name the firing added. Encoding dominated a step: a
        group's members are encoded once, and a firing appends only what it adds (state properties are
        write-once, so appending never duplicates a key). A group that reads none of them keeps its fact: what
        it matches cannot have changed (a rule's guard reads what it writes, so the fired rule's group is
        always asserted again)."""
        for group, reads in zip(chunk.groups, chunk.group_reads, strict=True):
            if reads.isdisjoint(added):
                continue
            new, body = encode_members(added.items(), reads), chunk.bodies[group]
            chunk.bodies[group] = f"{body},{new}" if body and new else (body or new)
            _dre.retract_fact(chunk.handle, chunk.facts[group])
            self._assert_group(chunk, group, sid, step)

    @staticmethod
    def _assert_group(chunk: _Chunk, group: str, sid: str, step: int) -> None:
        body = chunk.bodies[group]
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

    def _chain(self, sid, state, apply, max_steps):
        fired = []
        for step in range(1, max_steps + 1):
            chunk, rule_id = self._next_firing()
            if chunk is None:
                return fired, state
            if rule_id == BOOT:
                raise EngineError("boot rule fired twice in one session")
            added = apply(self.ruleset.rule(rule_id), state)
            if state.keys() & added.keys():
                raise EngineError(f"rule '{rule_id}' re-wrote {sorted(state.keys() & added.keys())}: "
                                  "properties are write-once")
            state = {**state, **added}
            fired.append(rule_id)
            for each in self._chunks:
                self._assert_added(each, sid, added, step)
        raise EngineError(f"no quiescence after {max_steps} firings")

    def _close_session(self, sid: str) -> None:
        for chunk in self._chunks:
            guard = 0
            while chunk.pending and guard < 100_000:
                self._complete(chunk)
                guard += 1
            if chunk.state_handle is not None:
                _dre.delete_state(chunk.handle, sid)
            chunk.state_handle, chunk.facts, chunk.bodies = None, {}, {}
