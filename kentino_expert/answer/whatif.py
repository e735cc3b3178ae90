"""What-if probes and the build search's candidates: plans for some facts from only the rules that decide
them, and the kind the search picks, cached."""
from __future__ import annotations

import threading

from ..domain.catalog import Knowledge
from ..domain.derive import derive
from ..domain.state import RECOMMENDED_KIND
from ..domain.workload import Workload, validate_facts
from ..engine.chaining import final_state
from ..ruleset.compiler import RuleSet, deciding_subset
from .cache import LruCache, facts_key
from .plans import EngineEvaluator, Plan, plan_inputs
from .search import search


class KindOracle:
    """Plans and kinds for facts, for what-if probes and the build search: only the rules that can decide
    the recommendation (and what the selection policy reads), on an engine of their own built on first
    use, and bounded caches of the answers.

    A chat bot's first turn probes ~16 what-ifs, and every answer sizes several candidate builds; the advice
    rules (about 40% of the rule set) only warn, so leaving them out makes each evaluation cheaper, and the
    caches make a repeated one free. An Expert never changes once built (a reload builds a new one), so the
    caches cannot go stale.
    """

    def __init__(self, knowledge: Knowledge, ruleset: RuleSet, backend_class, cache_size: int):
        self.knowledge = knowledge
        policy_reads = ruleset.selection.reads if ruleset.selection else ()
        # same parameters, defaults and policy
        self.ruleset = deciding_subset(ruleset, {RECOMMENDED_KIND, *policy_reads})
        self._backend_class = backend_class
        self._engine = None
        self._lock = threading.Lock()
        self._kinds = LruCache(cache_size)
        self._plans = LruCache(cache_size)
        self._by_state = LruCache(cache_size)
        self._inputs = plan_inputs(self.ruleset)

    def engine(self):
        with self._lock:
            if self._engine is None:
                self._engine = self._backend_class(self.ruleset)
            return self._engine

    def plan_of(self, mapping) -> Plan:
        """The plan the rules reach for exactly these facts (no search)."""
        return self._plans.get_or_compute(facts_key(mapping), lambda: self._plan_uncached(mapping))

    def _plan_uncached(self, mapping) -> Plan:
        evaluator = EngineEvaluator(self.knowledge, self.ruleset, self.engine())
        state = evaluator.state_of(mapping)
        # Different facts often size to the same state as far as a plan can see (a probe equal to the
        # default, a card the model fits on either way): the plan is then known.
        key = tuple(sorted((name, state[name]) for name in self._inputs if name in state))
        return self._by_state.get_or_compute(key, lambda: evaluator.plan_of_state(state))

    def kind_of(self, mapping) -> str | None:
        """The kind of the recommendation for these facts: the build search's pick when the rule set has a
        selection policy, else the rules' on the facts as given."""
        return self._kinds.get_or_compute(facts_key(mapping), lambda: self._uncached(mapping))

    def _uncached(self, mapping) -> str | None:
        workload = mapping if isinstance(mapping, Workload) else validate_facts(mapping)
        if self.ruleset.selection is not None:
            return search(workload, self.knowledge, self.ruleset, self, alternatives=False).chosen.plan.kind
        ruleset = self.ruleset
        state = derive(workload, self.knowledge, ruleset.fact_policies, ruleset.parameter_values).state()
        return final_state(ruleset, state, self.engine()).get(RECOMMENDED_KIND)

    def close(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.close()
                self._engine = None
