"""The facade: load a knowledge catalog and a rule set once, answer many workloads (what chat bots and the CLI call)."""
from __future__ import annotations

import functools
import logging
import os
import threading
from pathlib import Path

from .answer.cache import DEFAULT_SIZE, AnswerCache
from .answer.failures import evaluation_failures
from .answer.model import Answer
from .answer.pipeline import answer_traced
from .answer.questions import missing_facts, rank_questions
from .answer.whatif import KindOracle
from .domain.catalog import Knowledge, load_knowledge
from .domain.workload import Workload, read_facts, validate_facts
from .engine.chaining import run_rules
from .engine.compiled import CompiledEngine
from .engine.registry import DEFAULT, backend_class
from .paths import bundled
from .ruleset.compiler import RuleSet, compile_ruleset

_log = logging.getLogger(__name__)
WHAT_IF_CACHE = 8192  # entries (~1 KB each): bounds the memory the what-if cache can take
ANSWER_CACHE = DEFAULT_SIZE


class Expert:
    """A loaded knowledge catalog + compiled rule set + engine backend ("durable" or "reference").

    Without directories it loads the packaged ones: only the commands look for the checkout they run
    in (paths.locate), so a library's answers never depend on its process's working directory.
    """

    def __init__(self, rules_dir: str | Path | None = None, knowledge_dir: str | Path | None = None,
                 backend: str = DEFAULT, what_if_cache: int = WHAT_IF_CACHE,
                 answer_cache: int = ANSWER_CACHE):
        engine_class = backend_class(backend)
        # absolute, as given (symlinks kept): answers name the directories they came from
        self.knowledge_dir = Path(os.path.abspath(knowledge_dir or bundled("knowledge")))
        self.rules_dir = Path(os.path.abspath(rules_dir or bundled("rules")))
        self.knowledge: Knowledge = load_knowledge(self.knowledge_dir)
        self.ruleset: RuleSet = compile_ruleset(self.rules_dir, self.knowledge, backend=engine_class)
        self.backend_name = engine_class.name
        self.engine = engine_class(self.ruleset)
        self.kinds = KindOracle(self.knowledge, self.ruleset, what_if_cache)  # on the compiled evaluator
        # whole evaluations keyed by their facts, for whoever answers the same facts again (the decide
        # use case, service/decide.py): it lives and dies with this expert, so a reload starts it empty
        self.answer_cache = AnswerCache(answer_cache)

    def close(self) -> None:
        self.engine.close()
        self.kinds.close()

    @functools.cached_property
    def probe_engine(self) -> CompiledEngine:
        """The whole rule set on the compiled evaluator, for hypothetical states (build-search candidates):
        `evaluate(state)` / `evaluate_many(states)` give the rules fired and the final state, and it is a
        backend (`run(state, apply)`), so run_rules traces on it. Never for a recorded answer."""
        return CompiledEngine(self.ruleset)

    def recommend(self, facts) -> Answer:
        """Answer a mapping of facts or a validated Workload; arithmetic that fails on them is an EngineError."""
        return self.recommend_traced(facts)[0]

    def recommend_traced(self, facts):
        """(answer, firings, final state) for a mapping of facts or a validated Workload; arithmetic that fails
        on them is an EngineError. The answer is provisional only while a question is worth asking."""
        return self.decide_parts(facts)[:3]

    def decide_parts(self, facts):
        """(answer, firings, final state, questions): the traced answer and the questions still worth asking (some
        value of each changes the build); the answer is provisional exactly when there are questions."""
        workload = facts if isinstance(facts, Workload) else validate_facts(facts)
        # the probes' shared bases only when questions may be probed: a final answer sizes its candidates
        # directly (recording what each figure read costs a third more and serves no probe)
        turn = self.kinds.turn(workload, probing=bool(missing_facts(workload, self.ruleset)))
        with evaluation_failures(facts, _log):
            answer, firings, final = answer_traced(workload, self.knowledge, self.ruleset, self.engine, turn)
            questions = rank_questions(self, workload, answer.recommendation.kind, turn) \
                if answer.status == "provisional" else []
        if answer.status == "provisional" and not questions:
            answer = answer.model_copy(update={"status": "final"})
        return answer, firings, final, questions

    def kind_of(self, facts) -> str | None:
        """The kind of the recommendation for a mapping of facts (or a Workload), the build search included;
        raises KentinoError on bad facts."""
        return self.kinds.kind_of(facts.known() if isinstance(facts, Workload) else facts)

    def build_of(self, facts) -> tuple:
        """(kind, nodes, gpu, gpus_per_node, precision) of the recommendation for facts (as kind_of)."""
        return self.kinds.build_of(facts.known() if isinstance(facts, Workload) else facts)

    def recommend_text(self, text: str, source: str = "<stdin>"):
        return self.recommend(read_facts(text, source))

    def firings(self, state: dict):
        """Rule ids fired on a prepared state (used by the differential tests)."""
        return run_rules(self.ruleset, state, self.engine)


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


def recommend(facts) -> Answer:
    """Recommend a build for a mapping of workload facts, with the bundled rules."""
    return default_expert().recommend(facts)
