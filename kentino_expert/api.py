"""The in-process API: load a rule set once, answer many workloads (what chat bots and the CLI call)."""
from __future__ import annotations

import functools
import json
import threading
from pathlib import Path

from .answercache import DEFAULT_SIZE, AnswerCache
from .compiler import RuleSet, compile_ruleset
from .engine import DurableEngine
from .facts import Workload, read_facts, validate_facts
from .inference import run_rules
from .knowledge import Knowledge, load_knowledge
from .paths import bundled
from .recommend import evaluate, evaluate_traced
from .reference import ReferenceEngine


WHAT_IF_CACHE = 8192  # entries (~1 KB each): bounds the memory the what-if cache can take
ANSWER_CACHE = DEFAULT_SIZE


class Expert:
    """A loaded knowledge catalog + compiled rule set + engine backend."""

    def __init__(self, rules_dir: str | Path | None = None, knowledge_dir: str | Path | None = None,
                 backend: str = "durable", what_if_cache: int = WHAT_IF_CACHE,
                 answer_cache: int = ANSWER_CACHE):
        self.knowledge_dir = Path(knowledge_dir or bundled("knowledge"))
        self.rules_dir = Path(rules_dir or bundled("rules"))
        self.knowledge: Knowledge = load_knowledge(self.knowledge_dir)
        self.ruleset: RuleSet = compile_ruleset(self.rules_dir, self.knowledge)
        self.backend_name = backend
        self.engine = DurableEngine(self.ruleset) if backend == "durable" else ReferenceEngine(self.ruleset)
        # what-if probes repeat across the turns and conversations of chat bots; an Expert never
        # changes after it is built (a reload builds a new one), so its answers can be cached
        # (a closure over the parts, not a bound method: no cycle keeps a replaced Expert alive)
        knowledge, ruleset, engine = self.knowledge, self.ruleset, self.engine
        self._kind_of_key = functools.lru_cache(maxsize=what_if_cache)(
            lambda key: kind_reached(json.loads(key), knowledge, ruleset, engine))
        self.answer_cache = AnswerCache(answer_cache)  # whole decisions, for the service

    def close(self) -> None:
        self.engine.close()

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
        mapping = facts.known() if isinstance(facts, Workload) else facts
        try:
            key = json.dumps(mapping, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError):  # not JSON-shaped: validation will say why; nothing to cache
            return kind_reached(mapping, self.knowledge, self.ruleset, self.engine)
        return self._kind_of_key(key)

    def recommend_text(self, text: str, source: str = "<stdin>"):
        return self.recommend(read_facts(text, source))

    def firings(self, state: dict):
        """Rule ids fired on a prepared state (used by the differential tests)."""
        return run_rules(self.ruleset, state, self.engine)


def kind_reached(mapping, knowledge: Knowledge, ruleset: RuleSet, engine) -> str | None:
    """The recommended kind for a mapping of facts, without a trace (what a what-if needs)."""
    from .derive import derive
    from .inference import final_state
    derived = derive(validate_facts(mapping), knowledge, ruleset)
    return final_state(ruleset, derived.state(), engine).get("recommended_kind")


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
