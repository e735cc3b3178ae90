"""What-if probes on the compiled evaluator: a probe's shared state is the state its own facts derive to, and
a batch of probes reaches the kinds durable-rules reaches for the same facts."""
from __future__ import annotations

import itertools
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kentino_expert.answer.pipeline import answer_for
from kentino_expert.answer.plans import EngineEvaluator
from kentino_expert.answer.questions import missing_facts, probe_values
from kentino_expert.answer.whatif import KindOracle
from kentino_expert.domain import derive as derive_module
from kentino_expert.domain.derive import derive, derive_state
from kentino_expert.domain.incremental import Recorder, derive_recorded
from kentino_expert.domain.workload import validate_facts
from kentino_expert.errors import KentinoError
from kentino_expert.expert import Expert

EXPERT = Expert()
KNOWLEDGE, RULESET = EXPERT.knowledge, EXPERT.ruleset
POLICIES, PARAMS = RULESET.fact_policies, RULESET.parameter_values

first_turns = st.fixed_dictionaries(
    {"task": st.sampled_from(["inference", "batch-inference", "lora", "qlora", "full-finetune", "pretraining"])},
    optional={
        "model": st.sampled_from(sorted(KNOWLEDGE.models)),
        "gpu": st.sampled_from(sorted(KNOWLEDGE.gpus)),
        "concurrency": st.integers(1, 512),
        "context_tokens": st.integers(256, 131072),
        "latency": st.sampled_from(["interactive", "production", "offline"]),
        "training_tokens": st.sampled_from(["1B", "300B", "15T"]),
        "corpus_tokens": st.sampled_from(["50M", "2B", "50B"]),
    })


def _workload(facts):
    try:
        workload = validate_facts(facts)
        derive(workload, KNOWLEDGE, POLICIES, PARAMS)
        return workload
    except (KentinoError, ArithmeticError, ValueError):
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first_turns)
def test_derive_state_is_the_state_derive_gives(facts):
    """derive_state and derive_recorded (no assumptions, no units) give derive(...).state() exactly."""
    workload = _workload(facts)
    if workload is None:
        return
    expected = derive(workload, KNOWLEDGE, POLICIES, PARAMS).state()
    assert derive_state(workload, KNOWLEDGE, POLICIES, PARAMS) == expected
    recorded = derive_recorded(workload, KNOWLEDGE, POLICIES, PARAMS)
    assert recorded.state == expected and recorded.facts == {k: v for k, v in expected.items() if k in recorded.facts}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first_turns)
def test_a_shared_probe_state_is_the_probe_facts_own_state(facts):
    """Every probe of a turn whose state is taken from the turn's derivation (or from the base of a build the
    search sizes: another card and node shape) equals its own derivation."""
    workload = _workload(facts)
    if workload is None:
        return
    known, oracle, shared = workload.known(), EXPERT.kinds, 0
    builds = [{}, {"gpu": "l40", "gpus_per_node": 4}, {"gpu": "rtx-5090", "gpus_per_node": 8}]
    bases = oracle.turn(workload).bases
    for fact in missing_facts(workload, RULESET):
        for value, build in itertools.product(probe_values(EXPERT, fact), builds):
            probe = _workload({**known, fact: value, **build})
            found = bases.state_of(probe) if probe is not None else None
            if found is not None:
                shared += 1
                state, whole = found
                own = derive_state(probe, KNOWLEDGE, POLICIES, PARAMS)
                assert state == own, (fact, value, build)
                if whole:  # a base's own state is in the derivation's order (an answer reuses it)
                    assert list(state) == list(own), (fact, value, build)
    assert oracle.turn(workload, probing=False).bases is None  # a turn that probes nothing shares nothing


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first_turns)
def test_an_answer_on_the_search_state_is_the_answer_sized_anew(facts):
    """The traced answer that takes the chosen candidate's figures from the build search's state (alone and
    inside a turn) is, to the order of its figures, the answer whose search keeps no state and sizes them anew;
    the search's state is taken, not sized again."""
    workload = _workload(facts)
    if workload is None:
        return
    anew = answer_for(workload, KNOWLEDGE, RULESET, EXPERT.engine, EngineEvaluator(KNOWLEDGE, RULESET, EXPERT.engine))
    oracle = KindOracle(KNOWLEDGE, RULESET, 64)  # empty caches: the candidates are sized here
    sizing = mock.patch.object(derive_module, "compute_figures", wraps=derive_module.compute_figures)
    with sizing as sized_again:
        alone = answer_for(workload, KNOWLEDGE, RULESET, EXPERT.engine, oracle.turn(workload, probing=False))
    assert sized_again.call_count == 0
    oracle = KindOracle(KNOWLEDGE, RULESET, 64)
    in_turn = answer_for(workload, KNOWLEDGE, RULESET, EXPERT.engine, oracle.turn(workload))
    assert alone.model_dump_json() == anew.model_dump_json() == in_turn.model_dump_json()


def test_a_probe_recomputes_only_the_figures_that_read_its_fact():
    """The sizing never reads the tenancy: its probe reuses every figure; a context probe recomputes the
    memory figures; a concurrency or rate probe re-prepares its facts (Little's law) and recomputes what reads
    them; a probe of the node shape derives anew."""
    workload = validate_facts({"task": "inference", "model": "llama-3.1-70b"})
    bases = EXPERT.kinds.turn(workload).bases
    base = bases.derivation
    assert all("tenancy" not in step.reads for step in base.steps)
    assert any("concurrency" in step.reads for step in base.steps)
    tenancy, whole = bases.state_of(validate_facts({**workload.known(), "tenancy": "multi"}))
    assert tenancy == {**base.state, "tenancy": "multi"} and not whole
    context, _ = bases.state_of(validate_facts({**workload.known(), "context_tokens": 32768}))
    assert context["kv_cache_gb"] > base.state["kv_cache_gb"]
    # the concurrency a rate implies is prepared anew (Little's law), then only what reads it is recomputed
    for probe in ({"concurrency": 900}, {"qps": 20}, {"tokens_per_s": 4000}):
        facts = validate_facts({**workload.known(), **probe})
        assert bases.state_of(facts) == (derive_state(facts, KNOWLEDGE, POLICIES, PARAMS), False), probe
    # a probe of another model: the figure groups are bound to the base's model, so it derives anew
    assert bases.state_of(validate_facts({**workload.known(), "model": "llama-3.1-8b"})) is None
    # the node shape is a build: its own derivation, made once, is the base of that build's probes
    shape = validate_facts({**workload.known(), "gpus_per_node": 4})
    assert bases.state_of(shape) == (derive_state(shape, KNOWLEDGE, POLICIES, PARAMS), True)
    probe = validate_facts({**workload.known(), "gpus_per_node": 4, "context_tokens": 32768})
    assert bases.state_of(probe) == (derive_state(probe, KNOWLEDGE, POLICIES, PARAMS), False)
    two = validate_facts({**workload.known(), "gpus_per_node": 4, "context_tokens": 32768, "latency": "offline"})
    assert bases.state_of(two) == (derive_state(two, KNOWLEDGE, POLICIES, PARAMS), False)


def test_the_recorder_sees_lookups_writes_and_walks():
    """Recorder records get/[]/in as reads, item and update writes, and a walk over it as reading everything."""
    seen = Recorder({"a": 1, "b": 2})
    seen.get("a"), "c" in seen, seen["b"]
    seen["d"] = 4
    seen.update(e=5)
    assert seen.read == {"a", "b", "c"} and seen.written == {"d": 4, "e": 5} and not seen.everything
    list(seen.items())
    assert seen.everything


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first_turns)
def test_a_batch_of_probes_reaches_the_kinds_durable_reaches(facts):
    """kinds_of (compiled evaluator, deciding rules only, shared state) reaches the build of durable-rules' full
    answer: kind, nodes, card, node shape and precision."""
    workload = _workload(facts)
    if workload is None:
        return
    probes = [(fact, value) for fact in missing_facts(workload, RULESET) for value in probe_values(EXPERT, fact)]
    for (fact, value), kind in zip(probes, EXPERT.kinds.kinds_of(workload, probes), strict=True):
        try:
            rec = EXPERT.recommend({**workload.known(), fact: value}).recommendation
            expected = (rec.kind, rec.nodes, rec.gpu, rec.gpus_per_node, rec.precision)
        except (KentinoError, ArithmeticError, ValueError) as exc:
            assert isinstance(kind, Exception), (fact, value, exc)
            continue
        assert kind == expected, (fact, value)


def test_an_experts_probe_table_is_its_knowledge_dirs_read_once(tmp_path):
    """An Expert on a knowledge dir with its own probes.yaml probes with those values, and keeps them for its
    life; a new Expert on the same dir (a reload) reads the file again."""
    import shutil

    from kentino_expert.paths import bundled
    knowledge = tmp_path / "knowledge"
    shutil.copytree(bundled("knowledge"), knowledge)
    (knowledge / "probes.yaml").write_text("probes:\n  concurrency: [3, 33]\n", encoding="utf-8")
    expert = Expert(knowledge_dir=knowledge)
    assert probe_values(expert, "concurrency") == (3, 33)
    (knowledge / "probes.yaml").write_text("probes:\n  concurrency: [7]\n", encoding="utf-8")
    assert probe_values(expert, "concurrency") == (3, 33)  # an Expert never changes once built
    assert probe_values(Expert(knowledge_dir=knowledge), "concurrency") == (7,)
