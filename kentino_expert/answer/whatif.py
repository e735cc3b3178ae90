"""What-if probes and the build search's candidates: plans and kinds for some facts from only the rules that
decide them, on the compiled evaluator, sharing what does not change between the probes of one turn (a Turn,
made once per request and passed down), cached."""
from __future__ import annotations

from itertools import repeat

from ..domain.catalog import Knowledge
from ..domain.derive import derive_state, prepare
from ..domain.incremental import derive_recorded, probe_state
from ..domain.state import RECOMMENDED_KIND
from ..domain.workload import Workload, validate_facts
from ..engine.compiled import CompiledEngine
from ..engine.onepass import OnePassEngine
from ..errors import KentinoError
from ..ruleset.compiler import RuleSet, deciding_subset
from .cache import LruCache, flat_facts_key
from .plans import Plan, plan_from, plan_inputs
from .search import decided_plan, decided_plans

_FAILURES = (KentinoError, ArithmeticError, ValueError, TypeError)
_ABSENT = object()  # a name the state lacks, in a state's key (unlike any value, None included)
_ABSENTS = repeat(_ABSENT)  # endless: map() pairs it with the names


class KindOracle:
    """Plans and kinds for facts, for what-if probes and the build search: only the rules that can decide
    the recommendation (and what the selection policy reads), on the compiled evaluator (engine/compiled.py;
    durable-rules decides every recorded answer), and bounded caches.

    A chat bot's first turn probes ~16 what-ifs, each one fact added to the turn's facts, and every answer
    sizes several candidate builds. A request's `Turn` (made by `turn`) carries what its probes share: a probe
    reuses the turn's derivation and recomputes only the figures that read the fact it sets. A plan whose state
    equals an earlier one's on every name a plan can see is not evaluated again. An Expert never changes once
    built, so the caches cannot go stale.
    """

    def __init__(self, knowledge: Knowledge, ruleset: RuleSet, cache_size: int):
        self.knowledge = knowledge
        policy_reads = ruleset.selection.reads if ruleset.selection else ()
        # same parameters, defaults and policy
        self.ruleset = deciding_subset(ruleset, {RECOMMENDED_KIND, *policy_reads})
        self.engine = CompiledEngine(self.ruleset)
        # one pass over the rules when the compiler proves it exact (stratified), else the agenda
        self.one_pass = OnePassEngine.of(self.engine)
        self._decide = self.one_pass or self.engine
        self._kinds = LruCache(cache_size)
        self._plans = LruCache(cache_size)
        self._by_state = LruCache(cache_size)
        self._starts = LruCache(START_STATES)
        self._inputs = tuple(sorted(plan_inputs(self.ruleset)))  # in one order: a state's key is a tuple
        self._alone = Turn(self, None)

    def turn(self, workload: Workload, probing: bool = True) -> Turn:
        """A request's evaluator: with `probing`, its probes share the derivation of `workload`'s facts (and of
        each build the search sizes for them, each made on first use); without, each plan is sized on its own."""
        return Turn(self, TurnBases(workload.known(), self._derive_recorded, self._prepare) if probing else None)

    def _derive_recorded(self, facts):
        workload = facts if isinstance(facts, Workload) else validate_facts(facts)
        ruleset = self.ruleset
        return derive_recorded(workload, self.knowledge, ruleset.fact_policies, ruleset.parameter_values)

    def _prepare(self, workload: Workload):
        ruleset = self.ruleset
        return prepare(workload, self.knowledge, ruleset.fact_policies, ruleset.parameter_values)

    def plan_of(self, mapping) -> Plan:
        """The plan the rules reach for exactly these facts (no search), sized on its own."""
        return self._alone.plan_of(mapping)

    def sized(self, mapping) -> tuple[Plan, dict | None]:
        """(plan, start state) for these facts, sized on their own (Turn.sized)."""
        return self._alone.sized(mapping)

    def plan_with(self, mapping, extra) -> Plan:
        """The plan for these facts with `extra` names in their state, sized on their own (Turn.plan_with)."""
        return self._alone.plan_with(mapping, extra)

    def kind_of(self, mapping) -> str | None:
        """The kind of the recommendation for these facts (build_of), sized on their own."""
        return self._alone.build_of(mapping)[0]

    def build_of(self, mapping) -> tuple:
        """(kind, nodes, gpu, gpus_per_node, precision) of the recommendation for these facts, sized on their own."""
        return self._alone.build_of(mapping)

    def kinds_of(self, workload: Workload, probes) -> list:
        """For each (fact, value) of `probes`: the build (build_of) for `workload`'s facts with that fact set, or
        the exception that evaluation raised (a probe that does not validate, arithmetic that fails)."""
        return self.turn(workload).kinds_of(probes)

    def _sized(self, mapping, bases: TurnBases | None) -> tuple[Plan, dict | None]:
        key = flat_facts_key(mapping)
        plan = self._plans.get_or_compute(key, lambda: self._plan_uncached(mapping, key, bases))
        return plan, self._starts.peek(key)

    def _plan_uncached(self, mapping, key: tuple | str | None, bases: TurnBases | None) -> Plan:
        state, seen = self._sized_state(mapping, key, bases)
        return self._by_state.get_or_compute(seen, lambda: self._plan_of_state(state))

    def _sized_state(self, mapping, key, bases: TurnBases | None) -> tuple[dict, tuple]:
        """(the state of these facts, its key as far as a plan can see): different facts often size to the same
        state there (a probe equal to the default, a card the model fits on either way), whose plan is known."""
        workload = mapping if isinstance(mapping, Workload) else validate_facts(dict(mapping))
        state, whole = self._state_of(workload, bases)
        if whole:  # a probe's state is not kept: its figures are in another order than a derivation's
            self._starts.get_or_compute(key, lambda: state)
        return state, tuple(map(state.get, self._inputs, _ABSENTS))  # C-level: a key per candidate, ~40 names

    def _sized_many(self, mappings: list, bases: TurnBases | None) -> list:
        """(plan, start state) or the exception raised, for each mapping: the facts not planned before sized one by
        one (their states), then every distinct state decided in one pass over the rules (one_pass's masks)."""
        out, waiting = _cached(mappings, self._plans, lambda plan, key: (plan, self._starts.peek(key)))
        deciding: dict = {}  # slot (the state's key) -> (state, its key, the facts' slots)
        for slot, (key, positions) in waiting.items():
            try:
                state, seen = self._sized_state(mappings[positions[0]], key, bases)
            except Exception as exc:  # noqa: BLE001 - handed back per mapping: the search decides
                self._planned(key, exc, positions, out)
                continue
            plan = self._by_state.lookup(seen)
            if plan is not None:
                self._planned(key, plan, positions, out)
            else:
                deciding.setdefault(_slot(seen, slot), (state, seen, []))[2].append(slot)
        entries = list(deciding.values())
        for (_, seen, slots), plan in zip(entries, self._plans_of_states([e[0] for e in entries]), strict=True):
            if not isinstance(plan, BaseException):
                self._by_state.put(seen, plan)
            for slot in slots:
                self._planned(waiting[slot][0], plan, waiting[slot][1], out)
        return out

    def _planned(self, key, plan, positions: list, out: list) -> None:
        if not isinstance(plan, BaseException):
            self._plans.put(key, plan)
            plan = (plan, self._starts.peek(key))
        for index in positions:
            out[index] = plan

    def _plans_of_states(self, states: list) -> list:
        """The plan (or the exception raised) of each state, the states decided together."""
        try:
            outcomes = self._decide.evaluate_many(states)
        except Exception:  # noqa: BLE001 - one state's failure must not fail the others: each on its own
            return [self._plan_or_error(lambda s=state: self._plan_of_state(s)) for state in states]
        return [self._plan_or_error(lambda o=outcome: plan_from(o.final, o.decider, self.ruleset, self.knowledge))
                for outcome in outcomes]

    @staticmethod
    def _plan_or_error(make):
        try:
            return make()
        except Exception as exc:  # noqa: BLE001 - handed back per state
            return exc

    def _plan_of_state(self, state: dict) -> Plan:
        outcome = self._decide.evaluate(state)  # the compiled rules' own effects: no callback per firing
        return plan_from(outcome.final, outcome.decider, self.ruleset, self.knowledge)

    def _build_uncached(self, mapping, turn: Turn) -> tuple:
        """One build, its search sized one candidate at a time, each decided on its own (the scalar path: the
        batch's oracle in the tests)."""
        workload = mapping if isinstance(mapping, Workload) else validate_facts(mapping)
        if self.ruleset.selection is not None:
            plan = decided_plan(workload, self.knowledge, self.ruleset, OneAtATime(turn))
        else:
            plan = turn.plan_of(workload.known())
        return plan.kind, plan.nodes, plan.gpu, plan.gpus_per_node, plan.precision

    def _builds_many(self, mappings: list, turn: Turn) -> list:
        """(kind, nodes, gpu, gpus_per_node, precision), or the exception raised, for each mapping of facts: the
        searches of those not known before sized together in rounds (search.decided_plans)."""
        out, todo = _cached(mappings, self._kinds, lambda build, key: build)
        workloads, valid = [], []
        for key, positions in todo.values():
            try:
                mapping = mappings[positions[0]]
                workloads.append(mapping if isinstance(mapping, Workload) else validate_facts(mapping))
                valid.append((key, positions))
            except Exception as exc:  # noqa: BLE001 - handed back per mapping
                for index in positions:
                    out[index] = exc
        if self.ruleset.selection is not None:
            plans = decided_plans(workloads, self.knowledge, self.ruleset, turn)
        else:
            plans = [self._plan_or_error(lambda w=w: turn.plan_of(w.known())) for w in workloads]
        for (key, positions), plan in zip(valid, plans, strict=True):
            build = plan if isinstance(plan, BaseException) else (
                plan.kind, plan.nodes, plan.gpu, plan.gpus_per_node, plan.precision)
            if not isinstance(build, BaseException):
                self._kinds.put(key, build)
            for index in positions:
                out[index] = build
        return out

    def close(self) -> None:
        self.engine.close()

    def _state_of(self, workload: Workload, bases: TurnBases | None) -> tuple[dict, bool]:
        """(the rules' starting state for `workload`, whether it is a whole derivation): from the turn's base of
        its build when its figures are bound to the same model, card, link and shape (only the figure groups that
        read a fact that differs are computed again), else derived anew."""
        shared = bases.state_of(workload) if bases is not None else None
        if shared is not None:
            return shared
        ruleset = self.ruleset
        return derive_state(workload, self.knowledge, ruleset.fact_policies, ruleset.parameter_values), True


class Turn:
    """One request's plan evaluator (a PlanEvaluator): the oracle's caches, and the bases the request's probes
    share (None for a final answer, which sizes no probe). Made once per request and handed down explicitly:
    the build search, the traced answer and the question probes of one request use the same Turn."""

    def __init__(self, oracle: KindOracle, bases: TurnBases | None):
        self.oracle, self.bases = oracle, bases

    def sized(self, mapping) -> tuple[Plan, dict | None]:
        """(the plan for exactly these facts, the state the rules started from when these facts were derived
        whole, else None): the search hands the chosen candidate's state to the traced answer with its plan."""
        return self.oracle._sized(mapping, self.bases)

    def plan_of(self, mapping) -> Plan:
        """The plan the rules reach for exactly these facts (no search)."""
        return self.oracle._sized(mapping, self.bases)[0]

    def plan_with(self, mapping, extra) -> Plan:
        """The plan for exactly these facts with `extra` names in their state (the search's closest build)."""
        workload = mapping if isinstance(mapping, Workload) else validate_facts(dict(mapping))
        state, _ = self.oracle._state_of(workload, self.bases)
        return self.oracle._plan_of_state({**state, **extra})

    def build_of(self, mapping) -> tuple:
        """(kind, nodes, gpu, gpus_per_node, precision) of the recommendation for these facts: the build search's
        pick when the rule set has a selection policy, else the rules' on the facts as given; raises KentinoError
        on facts that do not validate."""
        found = self.builds_of([mapping])[0]
        if isinstance(found, BaseException):
            raise found
        return found

    def builds_of(self, mappings: list) -> list:
        """build_of for each mapping of facts, or the exception it raised: their build searches sized together in
        rounds, each round's candidates one batch, decided in one pass (a turn's what-if probes)."""
        return self.oracle._builds_many(mappings, self)

    def sized_many(self, mappings: list) -> list:
        """sized for each mapping of facts, or the exception it raised: one batch, its states decided together."""
        return self.oracle._sized_many(mappings, self.bases)

    def kind_of(self, mapping) -> str | None:
        """The kind of the recommendation for these facts (build_of)."""
        return self.build_of(mapping)[0]

    def kinds_of(self, probes) -> list:
        """For each (fact, value) of `probes`: the build for the turn's facts with that fact set, or the exception
        that evaluation raised (a probe that does not validate, arithmetic that fails)."""
        known = self.bases.known
        return self.builds_of([{**known, fact: value} for fact, value in probes])


class OneAtATime:
    """A plan evaluator that sizes and decides one candidate at a time (no `sized_many`): the scalar path."""

    def __init__(self, turn: Turn):
        self.turn = turn
        self.plan_of, self.plan_with = turn.plan_of, turn.plan_with

    def sized(self, mapping) -> tuple[Plan, dict | None]:
        workload = mapping if isinstance(mapping, Workload) else validate_facts(dict(mapping))
        state, whole = self.turn.oracle._state_of(workload, self.turn.bases)
        return self.turn.oracle._plan_of_state(state), state if whole else None


def _cached(mappings: list, cache: LruCache, found) -> tuple[list, dict]:
    """(out, to do): out[i] = found(value, key) for each mapping whose facts `cache` holds, else None; to do maps
    a slot per distinct facts not held (their key, the positions of the mappings with those facts)."""
    out: list = [None] * len(mappings)
    todo: dict = {}
    for index, mapping in enumerate(mappings):
        key = flat_facts_key(mapping)
        value = cache.lookup(key)
        if value is not None:
            out[index] = found(value, key)
        else:
            todo.setdefault(_slot(key, index), (key, []))[1].append(index)
    return out, todo


def _slot(key, index: int):
    """A dict key for facts or a state keyed `key`: the key itself, or one of its own when it has none (unhashable,
    or a non-finite number: such facts are never cached, so never shared)."""
    if key is None:
        return ("unkeyed", index)
    try:
        hash(key)
    except TypeError:
        return ("unkeyed", index)
    return key


BUILD_FACTS = ("gpu", "gpus_per_node", "precision")  # what the build search sets on a candidate's facts
MAX_BUILDS = 24  # bases kept per turn: the shipped cards x their shapes x precisions, with room
START_STATES = 64  # candidates' start states kept for the answer that picks one of them (a few per answer)


class TurnBases:
    """The derivations a turn's probes start from: the turn's facts, and (made on first use) the turn's facts
    on each build the search sizes, so that a probe's candidate (one fact set, and a card, a shape or a
    precision) recomputes only the figures that read the probe's fact."""

    def __init__(self, known: dict, derive_recorded, prepare):
        self.known = known
        self._derive, self._prepare = derive_recorded, prepare
        self._builds: dict = {}  # build -> (its facts, its derivation or None when it cannot be sized)

    @property
    def derivation(self):
        """The derivation of the turn's own facts (None when they cannot be sized); made on first use: a turn
        whose facts name no card never sizes them as given, only on each card."""
        entry = self._base_of(())
        return entry[1] if entry else None

    def state_of(self, workload: Workload) -> tuple[dict, bool] | None:
        """(the state of `workload`'s facts, whether it is the base's own) from the base of its build, the
        figures that read no fact that differs taken from it; None when its figures are bound otherwise (the
        caller derives anew)."""
        known = workload.known()
        build = tuple((name, known[name]) for name in BUILD_FACTS
                      if name in known and known[name] != self.known.get(name))
        entry = self._base_of(build)
        if entry is None or entry[1] is None:
            return None
        base_known, derivation = entry
        if known == base_known:
            return dict(derivation.state), True
        probed = probe_state(derivation, self._prepare(workload))
        return None if probed is None else (probed, False)

    def _base_of(self, build: tuple) -> tuple | None:
        """(facts, derivation) of the turn's facts on `build`, derived on first use; None past MAX_BUILDS."""
        entry = self._builds.get(build)
        if entry is None:
            if len(self._builds) >= MAX_BUILDS:
                return None
            known = {**self.known, **dict(build)}
            try:
                entry = known, self._derive(known)
            except _FAILURES:  # this build cannot size the turn's facts: its candidates derive their own state
                entry = known, None
            self._builds[build] = entry
        return entry
