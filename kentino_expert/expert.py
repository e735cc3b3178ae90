"""The in-process API: load a rule set once, answer many workloads (what chat bots and the CLI call)."""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from .answer.cache import DEFAULT_SIZE, AnswerCache, LruCache, facts_key
from .ruleset.compiler import RuleSet, compile_ruleset
from .engine.durable.engine import DurableEngine
from .domain.workload import Workload, read_facts, validate_facts
from .engine.chaining import run_rules
from .domain.catalog import Knowledge, load_knowledge
from .paths import bundled
from .answer.pipeline import evaluate, evaluate_traced
from .engine.reference import ReferenceEngine

if TYPE_CHECKING:
    from .answer.model import Answer


WHAT_IF_CACHE = 8192  # entries (~1 KB each): bounds the memory the what-if cache can take
ANSWER_CACHE = DEFAULT_SIZE


class Expert:
    """A loaded knowledge catalog + compiled rule set + engine backend.

    Without directories it loads the packaged ones: only the commands look for the checkout they run
    in (paths.locate), so a library's answers never depend on its process's working directory.
    """

    def __init__(self, rules_dir: str | Path | None = None, knowledge_dir: str | Path | None = None,
                 backend: str = "durable", what_if_cache: int = WHAT_IF_CACHE,
                 answer_cache: int = ANSWER_CACHE):
        # absolute, as given (symlinks kept): answers name the directories they came from
        self.knowledge_dir = Path(os.path.abspath(knowledge_dir or bundled("knowledge")))
        self.rules_dir = Path(os.path.abspath(rules_dir or bundled("rules")))
        self.knowledge: Knowledge = load_knowledge(self.knowledge_dir)
        self.ruleset: RuleSet = compile_ruleset(self.rules_dir, self.knowledge)
        self.backend_name = backend
        self.engine = DurableEngine(self.ruleset) if backend == "durable" else ReferenceEngine(self.ruleset)
        self.kinds = KindOracle(self.knowledge, self.ruleset, backend, what_if_cache)
        self.answer_cache = AnswerCache(answer_cache)  # whole decisions, for the service

    def close(self) -> None:
        self.engine.close()
        self.kinds.close()

    def recommend(self, facts) -> "Answer":
        """Answer a mapping of facts or a validated Workload."""
        workload = facts if isinstance(facts, Workload) else validate_facts(facts)
        return evaluate(workload, self.knowledge, self.ruleset, self.engine)

    def recommend_traced(self, facts):
        """(answer, firings, final state) for a mapping of facts or a validated Workload."""
        workload = facts if isinstance(facts, Workload) else validate_facts(facts)
        return evaluate_traced(workload, self.knowledge, self.ruleset, self.engine)

    def kind_of(self, facts) -> str | None:
        """The kind the rules reach for a mapping of facts (or a Workload); raises KentinoError on bad facts."""
        return self.kinds.kind_of(facts.known() if isinstance(facts, Workload) else facts)

    def recommend_text(self, text: str, source: str = "<stdin>"):
        return self.recommend(read_facts(text, source))

    def firings(self, state: dict):
        """Rule ids fired on a prepared state (used by the differential tests)."""
        return run_rules(self.ruleset, state, self.engine)


class KindOracle:
    """The recommended kind for facts, for what-if probes: only the rules that can decide the kind
    (on an engine of their own, built on first use) and bounded caches of the answers.

    A chat bot's first turn probes ~16 what-ifs; the advice rules (about 40% of the rule set) only
    warn, so leaving them out makes each probe cheaper, and the caches make a repeated probe free.
    An Expert never changes once built (a reload builds a new one), so the caches cannot go stale.
    """

    def __init__(self, knowledge: Knowledge, ruleset: RuleSet, backend: str, cache_size: int):
        from .ruleset.compiler import deciding_subset
        from .ruleset.namespace import recommendation_key
        self.knowledge = knowledge
        self.ruleset = deciding_subset(ruleset, recommendation_key("kind"))  # same parameters and defaults
        self._backend = backend
        self._engine = None
        self._lock = threading.Lock()
        self._reads = frozenset().union(*(rule.reads for rule in self.ruleset.rules))
        self._by_facts = LruCache(cache_size)
        self._by_state = LruCache(cache_size)

    def engine(self):
        with self._lock:
            if self._engine is None:
                cls = DurableEngine if self._backend == "durable" else ReferenceEngine
                self._engine = cls(self.ruleset)
            return self._engine

    def kind_of(self, mapping) -> str | None:
        return self._by_facts.get_or_compute(facts_key(mapping), lambda: self._uncached(mapping))

    def _uncached(self, mapping) -> str | None:
        from .domain.derive import derive
        from .engine.chaining import final_state
        state = derive(validate_facts(mapping), self.knowledge, self.ruleset).state()
        # Different facts often size to the same state as far as the deciding rules can see (a probe
        # equal to the default, a card the model fits on either way): the kind is then known.
        key = tuple(sorted((name, state[name]) for name in self._reads if name in state))
        return self._by_state.get_or_compute(
            key, lambda: final_state(self.ruleset, state, self.engine()).get("recommended_kind"))

    def close(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.close()
                self._engine = None


_DEFAULT: Expert | None = None
_LOCK = threading.Lock()


def default_expert() -> Expert:
    """The process-wide expert over the bundled rules (built on first use)."""
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is None:
            _DEFAULT = Expert()
        return _DEFAULT


def reset_default_expert() -> None:
    """Forget the process-wide expert (tests reset global engine state with this)."""
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is not None:
            _DEFAULT.close()
        _DEFAULT = None


def recommend(facts) -> "Answer":
    """Recommend a build for a mapping of workload facts, with the bundled rules."""
    return default_expert().recommend(facts)
