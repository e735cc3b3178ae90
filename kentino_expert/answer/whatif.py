"""What-if probes: the kind the rules reach for some facts, on the compiled evaluator with only the rules that
decide the kind, sharing what does not change between the probes of one turn, cached."""
from __future__ import annotations

import threading
from contextlib import contextmanager

from ..domain.catalog import Knowledge
from ..domain.derive import derive_state
from ..domain.incremental import derive_recorded, probe_state
from ..domain.state import RECOMMENDED_KIND
from ..domain.workload import Workload, validate_facts
from ..engine.compiled import CompiledEngine
from ..errors import KentinoError
from ..ruleset.compiler import RuleSet, deciding_subset
from .cache import LruCache, facts_key

_FAILURES = (KentinoError, ArithmeticError, ValueError, TypeError)


class KindOracle:
    """The recommended kind for facts, for what-if probes: only the rules that can decide the kind, on the
    compiled evaluator (engine/compiled.py; durable-rules decides every recorded answer), and bounded caches.

    A chat bot's first turn probes ~16 what-ifs, each one fact added to the turn's facts. Inside `around`,
    a probe reuses the turn's derivation and recomputes only the figures that read the fact it sets (none
    for the tenancy, say), and a probe whose state is the same as an earlier one's on every name the
    deciding rules read is not evaluated again. An Expert never changes once built, so the caches cannot go stale.
    """

    def __init__(self, knowledge: Knowledge, ruleset: RuleSet, cache_size: int):
        self.knowledge = knowledge
        self.ruleset = deciding_subset(ruleset, RECOMMENDED_KIND)  # same parameters and defaults
        self.engine = CompiledEngine(self.ruleset)
        self._by_facts = LruCache(cache_size)
        self._by_state = LruCache(cache_size)
        self._base = threading.local()

    @contextmanager
    def around(self, workload: Workload):
        """Probes of this thread, inside the block, may share the derivation of `workload`'s facts."""
        ruleset = self.ruleset
        try:
            base = derive_recorded(workload, self.knowledge, ruleset.fact_policies, ruleset.parameter_values)
            base = (workload.known(), base)
        except _FAILURES:  # facts the sizing cannot take: every probe derives its own state (and may fail)
            base = None
        previous = getattr(self._base, "value", None)
        self._base.value = base
        try:
            yield base[1] if base else None
        finally:
            self._base.value = previous

    def kind_of(self, mapping) -> str | None:
        """The kind the rules reach for a mapping of facts; raises KentinoError on facts that do not validate."""
        return self._by_facts.get_or_compute(facts_key(mapping), lambda: self._uncached(mapping))

    def kinds_of(self, workload: Workload, probes) -> list:
        """For each (fact, value) of `probes`: the kind the rules reach for `workload`'s facts with that fact
        set, or the exception that evaluation raised (a probe that does not validate, arithmetic that fails)."""
        known = workload.known()
        out = []
        with self.around(workload):
            for fact, value in probes:
                try:
                    out.append(self.kind_of({**known, fact: value}))
                except Exception as exc:  # noqa: BLE001 - handed back per probe: the caller decides
                    out.append(exc)
        return out

    def _uncached(self, mapping) -> str | None:
        workload = validate_facts(mapping)
        state = self._shared_state(workload)
        if state is None:
            ruleset = self.ruleset
            state = derive_state(workload, self.knowledge, ruleset.fact_policies, ruleset.parameter_values)
        # Different facts often size to the same state as far as the deciding rules can see (a probe
        # equal to the default, a card the model fits on either way): the kind is then known.
        return self._by_state.get_or_compute(self.engine.key_of(state), lambda: self.engine.evaluate(state).kind)

    def close(self) -> None:
        self.engine.close()

    def _shared_state(self, workload: Workload) -> dict | None:
        """The state of `workload` from this thread's probe base, when its facts differ from the base's in one
        fact: only the figures that read it are computed again (domain/incremental.py). None: derive anew."""
        base = getattr(self._base, "value", None)
        if base is None:
            return None
        base_known, derivation = base
        known = workload.known()
        changed = [name for name in known.keys() | base_known.keys() if known.get(name) != base_known.get(name)]
        if len(changed) != 1 or changed[0] not in known:
            return None
        return probe_state(derivation, changed[0], known[changed[0]])
