"""The rules in one pass over a batch of states, as masks: exact when the rule set is stratified, which
`stratification_problems` checks when the evaluator is built (else the compiled evaluator's agenda decides).

The agenda (reference.py, compiled.py) fires, again and again, the first rule by order whose conditions hold.
When no rule reads a name that it or a later rule writes (a refraction guard `not exists name` aside: a write
only makes it false), a firing never makes an earlier rule true, so the agenda's firings go forward in rule
order; when each rule also always writes a name its own guard reads, it fires at most once. The agenda then
fires exactly the rules that one pass in order finds true, in that order, each seeing the same state: one pass
over the rules, each rule's conditions taken as a mask over the batch of states, its effects applied where the
mask holds. tests/test_onepass.py checks it against the agenda, the reference evaluator and durable-rules.
"""
from __future__ import annotations

from itertools import chain

from ..domain.state import RECOMMENDED_KIND, warning_key
from ..lang import nodes
from .backend import MAX_STEPS
from .compiled import CompiledEngine, Outcome, _index_term


def _is_guard(condition) -> bool:
    return type(condition) is nodes.Not and type(condition.operand) is nodes.Exists


def _always_written(rule) -> set[str]:
    """Names every firing of `rule` writes with a value: its conclusions and warning (constants), and the kind
    when the rule recommends a literal one (a computed value may be missing, and then is not written)."""
    then = rule.source.then
    names = {name for name, _ in then.conclude}
    if then.warn:
        names.add(warning_key(then.warn[0]))
    kind = dict(rule.recommend).get("kind")
    if kind is not None and not hasattr(kind, "pos"):
        names.add(RECOMMENDED_KIND)
    return names


def stratification_problems(rules, max_steps: int = MAX_STEPS) -> list[str]:
    """Why one pass in rule order would not fire what the agenda fires (empty: it would): a rule reading a name
    it or a later rule writes (its guards aside), a rule that can stay true after it fires."""
    problems = []
    if len(rules) > max_steps:
        problems.append(f"{len(rules)} rules, more than the {max_steps} firings an evaluation allows")
    written_from: set = set()
    for rule in reversed(rules):
        written_from.update(rule.writes)
        reads = {n.id for c in rule.conditions if not _is_guard(c) for n in nodes.names_in(c)}
        for name in sorted(reads & written_from):
            writer = next(r.id for r in rules[rules.index(rule):] if name in r.writes)
            problems.append(f"rule {rule.id} reads `{name}`, which {'it' if writer == rule.id else writer} writes"
                            + ("" if writer == rule.id else " later"))
        guards = {c.operand.name.id for c in rule.conditions if _is_guard(c)}
        if not guards & _always_written(rule):
            problems.append(f"rule {rule.id} may stay true after it fires (no guard on a name it always writes)")
    return problems[::-1]


class OnePassEngine:
    """The compiled evaluator's rules, decided in one pass over a batch (see the module docstring); built only
    for a stratified rule set (`of` returns None otherwise). Same Outcome as CompiledEngine.evaluate."""

    name = "one-pass"

    def __init__(self, compiled: CompiledEngine):
        self.compiled = compiled
        self.ruleset = compiled.ruleset
        rules = compiled._rules
        # a rule's index term: (name, admitted values) on a name no rule writes, or None (every state admitted)
        written = set(chain.from_iterable(rule.writes for rule in rules))
        self._terms = tuple(_term(rule.conditions, written) for rule in rules)
        self._steps = tuple(zip(rules, compiled._holds, compiled._effects, self._terms, strict=True))

    @classmethod
    def of(cls, compiled: CompiledEngine) -> OnePassEngine | None:
        """The one-pass evaluator of `compiled`'s rules, or None when they are not stratified."""
        return None if stratification_problems(compiled.ruleset.rules) else cls(compiled)

    def evaluate(self, state: dict) -> Outcome:
        """One state's Outcome: the pass over the rules the index admits for it (evaluate_many's, for one)."""
        live, fired, decider = dict(state), [], None
        rules, holds, effects = self.compiled._rules, self.compiled._holds, self.compiled._effects
        for position in self.compiled.candidates(live):
            if holds[position](live):
                adds = effects[position].of(live)
                if decider is None and RECOMMENDED_KIND in adds:
                    decider = rules[position]
                live.update(adds)
                fired.append(rules[position])
        return Outcome(tuple(fired), live, decider)

    def evaluate_many(self, states) -> list[Outcome]:
        """One Outcome per state, in order: each rule's mask over the states still distinct by what the rules
        read, its effects applied where the mask holds."""
        states = list(states)
        keys, slots, live = [], {}, []
        for state in states:
            key = self.compiled.key_of(state)
            slot = slots.get(key) if key is not None else None
            if slot is None:
                slot = len(live)
                live.append(dict(state))
                if key is not None:
                    slots[key] = slot
            keys.append(slot)
        fired = [[] for _ in live]
        added = [{} for _ in live]
        deciders = [None] * len(live)
        for rule, holds, effects, term in self._steps:
            if term is None:
                mask = [at for at, state in enumerate(live) if holds(state)]
            else:
                name, values = term
                mask = [at for at, state in enumerate(live) if _admitted(state, name, values) and holds(state)]
            for at in mask:
                adds = effects.of(live[at])
                if deciders[at] is None and RECOMMENDED_KIND in adds:
                    deciders[at] = rule
                live[at].update(adds)
                added[at].update(adds)
                fired[at].append(rule)
        fired = [tuple(rules) for rules in fired]
        return [Outcome(fired[slot], {**state, **added[slot]}, deciders[slot])
                for state, slot in zip(states, keys, strict=True)]


def _admitted(state: dict, name: str, values: frozenset) -> bool:
    value = state.get(name)
    try:
        return value in values
    except TypeError:  # an unhashable value: the conditions decide
        return True


def _term(conditions, written: set) -> tuple[str, frozenset] | None:
    """The compiled evaluator's index term of a rule (compiled._index_term) as (name, frozenset of values)."""
    term = _index_term(conditions, written)
    return None if term is None else (term[0], frozenset(term[1]))
