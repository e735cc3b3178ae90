"""The compiled evaluator: the reference evaluator's semantics on conditions compiled once into closures
(closures.py) and indexed rules, for hypothetical probes (what-ifs, build-search candidates).

durable-rules decides every recorded answer; this backend answers the what-ifs of a turn, where one answer
needs dozens of evaluations. tests/test_compiled.py proves it fires the same rules in the same order and
reaches the same final state as the reference evaluator and durable-rules.

A rule that cannot fire costs next to nothing:
- the index: a rule with a condition `name in [...]` or `name == literal` on a name no rule writes (the
  task, the card, a fact) is a candidate only when the state's value is one of those literals (one dict
  lookup per indexed name and evaluation, whatever the rule count);
- the falsity cache: a rule found false leaves the agenda until a firing writes a name its conditions
  read, so it is evaluated again only then (the reference evaluator tries every rule after every firing).
"""
from __future__ import annotations

from bisect import insort
from dataclasses import dataclass
from itertools import chain

from ..domain.state import RECOMMENDED_KIND, recommendation_key, warning_key
from ..errors import EngineError
from ..lang import nodes
from ..lang.semantics import MISSING
from .backend import MAX_STEPS, Apply, ShapeProblem
from .closures import compile_conditions, compile_value


@dataclass(frozen=True)
class Outcome:
    """One evaluation without a trace: the rules fired in order and the final state."""

    fired: tuple  # CompiledRule, in firing order
    final: dict
    decider: object = None  # the first rule whose firing added the recommended kind (None when none did)

    @property
    def kind(self) -> str | None:
        return self.final.get(RECOMMENDED_KIND)


def _whole(value):
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class _Effects:
    """What a firing adds, precompiled (chaining.effects_of's meaning)."""

    __slots__ = ("conclude", "recommend", "warn")

    def __init__(self, rule, params):
        self.conclude = dict(rule.source.then.conclude)
        self.recommend = tuple((recommendation_key(key), compile_value(value, params) if hasattr(value, "pos")
                                else (lambda env, constant=value: constant)) for key, value in rule.recommend)
        self.warn = warning_key(rule.source.then.warn[0]) if rule.source.then.warn else None

    def of(self, state: dict) -> dict:
        added = dict(self.conclude)
        for key, value in self.recommend:
            computed = value(state)
            if computed is not MISSING:
                added[key] = _whole(computed)
        if self.warn:
            added[self.warn] = True
        return added


def _index_term(conditions, written: set) -> tuple[str, tuple] | None:
    """(name, literals) of the first condition that admits only those values of a name no rule writes."""
    for condition in conditions:
        kind = type(condition)
        if kind is nodes.In and not condition.negated and type(condition.left) is nodes.Name:
            name, values = condition.left.id, tuple(item.value for item in condition.items)
        elif (kind is nodes.Compare and condition.op == "==" and type(condition.left) is nodes.Name
              and type(condition.right) is nodes.Literal):
            name, values = condition.left.id, (condition.right.value,)
        else:
            continue
        if name not in written and all(_indexable(value) for value in values):
            return name, values
    return None


def _indexable(value) -> bool:
    """A literal a dict lookup finds exactly when == holds (hashable, and equal to itself: no NaN)."""
    try:
        hash(value)
    except TypeError:
        return False
    return value == value


def _closers(rules) -> dict[str, frozenset]:
    """name -> the rules that a write of the name makes false for good: those whose only mention of it is a
    refraction guard `not exists name` (compiler._guard). Their other conditions read nothing the write
    changed, so the reference evaluator would find them false too (conditions are type-checked: they do not
    raise on a state of the rules' types)."""
    out: dict[str, set] = {}
    for position, rule in enumerate(rules):
        guarded = [c.operand.name.id for c in rule.conditions
                   if type(c) is nodes.Not and type(c.operand) is nodes.Exists]
        others = {n.id for c in rule.conditions if not (type(c) is nodes.Not and type(c.operand) is nodes.Exists)
                  for n in nodes.names_in(c)}
        for name in guarded:
            if name not in others:
                out.setdefault(name, set()).add(position)
    return {name: frozenset(positions) for name, positions in out.items()}


class CompiledEngine:
    """Forward chaining with the reference evaluator's semantics: fire, again and again, the first rule (by
    order) whose conditions hold, until none does."""

    name = "compiled"
    version = "kentino-expert/0.1 compiled"
    reserved_names: tuple[str, ...] = ()  # the state is a plain dict: every name is the rules'

    def __init__(self, ruleset):
        self.ruleset = ruleset
        rules = self._rules = ruleset.rules
        params = ruleset.parameter_values
        self._holds = tuple(compile_conditions(rule.conditions) for rule in rules)
        self._effects = tuple(_Effects(rule, params) for rule in rules)
        written = set(chain.from_iterable(rule.writes for rule in rules))
        readers: dict[str, set[int]] = {}
        buckets: dict[str, dict] = {}
        unindexed = []
        for position, rule in enumerate(rules):
            for condition in rule.conditions:
                for name in nodes.names_in(condition):
                    readers.setdefault(name.id, set()).add(position)
            term = _index_term(rule.conditions, written)
            if term is None:
                unindexed.append(position)
                continue
            by_value = buckets.setdefault(term[0], {})
            for value in dict.fromkeys(term[1]):
                by_value.setdefault(value, []).append(position)
        self._readers = {name: frozenset(positions) for name, positions in readers.items()}
        self._closers = _closers(rules)
        self._buckets = {name: {value: tuple(p) for value, p in by_value.items()} for name, by_value in buckets.items()}
        self._unindexed = tuple(unindexed)
        self._indexed_on = {name: tuple(sorted(set(chain.from_iterable(by_value.values()))))
                            for name, by_value in self._buckets.items()}
        effect_names = {n.id for rule in rules for _, value in rule.recommend if hasattr(value, "pos")
                        for n in nodes.names_in(value)}
        # every state name the rules read (conditions, recommended values): states equal on them end equal
        self.reads = frozenset(readers) | effect_names
        self._read_order = tuple(sorted(self.reads))

    @classmethod
    def shape_problems(cls, rules) -> list[ShapeProblem]:
        return []  # every condition the language allows has a meaning here

    def close(self) -> None:
        pass

    def candidates(self, state: dict) -> list[int]:
        """The positions (in order) of the rules the index admits for `state`."""
        picked = list(self._unindexed)
        for name, by_value in self._buckets.items():
            value = state.get(name, MISSING)
            try:
                picked.extend(by_value.get(value, ()))
            except TypeError:  # an unhashable value: every rule indexed on the name stays a candidate
                picked.extend(self._indexed_on[name])
        picked.sort()
        return picked

    def run(self, state: dict, apply: Apply, max_steps: int = MAX_STEPS) -> tuple[list[str], dict]:
        """Backend protocol: forward-chain from `state`, `apply` giving each firing's additions."""
        fired, final, _, _ = self._chain(state, apply, max_steps)
        return [rule.id for rule in fired], final

    def evaluate(self, state: dict, max_steps: int = MAX_STEPS) -> Outcome:
        """Forward-chain from `state` with the rules' own effects (no trace): the rules fired, the end state and
        the rule that recommended."""
        fired, final, _, decider = self._chain(state, None, max_steps)
        return Outcome(tuple(fired), final, decider)

    def evaluate_many(self, states, max_steps: int = MAX_STEPS) -> list[Outcome]:
        """One Outcome per state, in order. States equal on every name the rules read (conditions and
        recommended values) fire the same rules and add the same values: each such group is evaluated once."""
        done: dict = {}
        out = []
        for state in states:
            key = self.key_of(state)
            if key is not None and key in done:
                fired, added, decider = done[key]
                out.append(Outcome(fired, {**state, **added}, decider))
                continue
            fired, final, added, decider = self._chain(state, None, max_steps)
            if key is not None:
                done[key] = (tuple(fired), added, decider)
            out.append(Outcome(tuple(fired), final, decider))
        return out

    def key_of(self, state: dict):
        """A hashable key of the state's values of the names the rules read (None if one is unhashable)."""
        key = tuple(state.get(name, MISSING) for name in self._read_order)
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def _chain(self, state: dict, apply, max_steps: int):
        """The firing loop. `pending` holds, in order, the candidates whose truth is not known to be false;
        a rule found false leaves it and comes back only when a firing writes a name it reads."""
        state = dict(state)
        rules, holds, effects, readers, closers = self._rules, self._holds, self._effects, self._readers, self._closers
        pending = self.candidates(state)
        admitted, waiting, closed = set(pending), set(pending), set()
        fired, added_all, decider = [], {}, None
        for _ in range(max_steps):
            for at, position in enumerate(pending):  # noqa: B007 - `at` is read after the break
                if position not in closed and holds[position](state):
                    break
                waiting.discard(position)
            else:
                return fired, state, added_all, decider
            del pending[:at]  # the rules before it are false until a name they read changes
            rule = rules[position]
            added = apply(rule, state) if apply is not None else effects[position].of(state)
            if decider is None and RECOMMENDED_KIND in added:
                decider = rule
            state.update(added)
            added_all.update(added)
            fired.append(rule)
            for name, value in added.items():
                shut = closers.get(name)
                if shut:
                    if value is MISSING:
                        closed.difference_update(shut)
                    else:
                        closed.update(shut)
                for again in readers.get(name, ()):
                    if again in admitted and again not in waiting and again not in closed:
                        waiting.add(again)
                        insort(pending, again)
        raise EngineError(f"no quiescence after {max_steps} firings")
