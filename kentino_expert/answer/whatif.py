"""What-if probes: the kind the rules reach for some facts, with only the rules that decide the kind, cached."""
from __future__ import annotations

import threading

from ..domain.catalog import Knowledge
from ..domain.derive import derive
from ..domain.state import RECOMMENDED_KIND
from ..domain.workload import validate_facts
from ..engine.chaining import final_state
from ..ruleset.compiler import RuleSet, deciding_subset
from .cache import LruCache, facts_key


class KindOracle:
    """The recommended kind for facts, for what-if probes: only the rules that can decide the kind
    (on an engine of their own, built on first use) and bounded caches of the answers.

    A chat bot's first turn probes ~16 what-ifs; the advice rules (about 40% of the rule set) only
    warn, so leaving them out makes each probe cheaper, and the caches make a repeated probe free.
    An Expert never changes once built (a reload builds a new one), so the caches cannot go stale.
    """

    def __init__(self, knowledge: Knowledge, ruleset: RuleSet, backend_class, cache_size: int):
        self.knowledge = knowledge
        self.ruleset = deciding_subset(ruleset, RECOMMENDED_KIND)  # same parameters and defaults
        self._backend_class = backend_class
        self._engine = None
        self._lock = threading.Lock()
        self._reads = frozenset().union(*(rule.reads for rule in self.ruleset.rules))
        self._by_facts = LruCache(cache_size)
        self._by_state = LruCache(cache_size)

    def engine(self):
        with self._lock:
            if self._engine is None:
                self._engine = self._backend_class(self.ruleset)
            return self._engine

    def kind_of(self, mapping) -> str | None:
        return self._by_facts.get_or_compute(facts_key(mapping), lambda: self._uncached(mapping))

    def _uncached(self, mapping) -> str | None:
        ruleset = self.ruleset
        state = derive(validate_facts(mapping), self.knowledge, ruleset.fact_policies, ruleset.parameter_values).state()
        # Different facts often size to the same state as far as the deciding rules can see (a probe
        # equal to the default, a card the model fits on either way): the kind is then known.
        key = tuple(sorted((name, state[name]) for name in self._reads if name in state))
        return self._by_state.get_or_compute(
            key, lambda: final_state(ruleset, state, self.engine()).get(RECOMMENDED_KIND))

    def close(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.close()
                self._engine = None
