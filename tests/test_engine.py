"""The durable-rules backend: it agrees with the reference evaluator and survives its known defects."""
from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kentino_expert.domain.derive import derive
from kentino_expert.domain.workload import validate_facts
from kentino_expert.engine.chaining import run_rules
from kentino_expert.engine.durable.engine import DurableEngine
from kentino_expert.engine.durable.terms import encode, encode_value, translate
from kentino_expert.engine.reference import ReferenceEngine
from kentino_expert.errors import EngineError, KentinoError
from kentino_expert.expert import Expert
from kentino_expert.lang.parser import parse

EXPERT = Expert()
KNOWLEDGE, RULESET = EXPERT.knowledge, EXPERT.ruleset
REFERENCE = ReferenceEngine(RULESET)
CHUNKED = DurableEngine(RULESET, chunk_rules=5)  # ten durable rulesets: exercises the cross-chunk agenda

TASKS = ["inference", "batch-inference", "lora", "qlora", "full-finetune", "pretraining"]
workloads = st.fixed_dictionaries(
    {"task": st.sampled_from(TASKS)},
    optional={
        "model": st.sampled_from(sorted(KNOWLEDGE.models)),
        "params_b": st.floats(0.5, 3000),
        "precision": st.sampled_from(["bf16", "fp8", "int4"]),
        "gpu": st.sampled_from(sorted(KNOWLEDGE.gpus)),
        "gpus_per_node": st.integers(1, 8),
        "concurrency": st.integers(1, 512),
        "context_tokens": st.integers(256, 131072),
        "qps": st.floats(0.01, 500_000),
        "tokens_per_s": st.floats(1, 2_000_000),
        "latency": st.sampled_from(["interactive", "production", "offline"]),
        "tenancy": st.sampled_from(["single", "multi"]),
        "training_tokens": st.sampled_from(["1B", "300B", "2T", "15T", 5e9]),
        "corpus_tokens": st.sampled_from(["50M", "2B", "50B"]),
        "deadline_days": st.floats(0.5, 365),
        "proposed_build": st.fixed_dictionaries({"nodes": st.integers(1, 4), "gpus_per_node": st.integers(1, 8)}),
        "interconnect": st.sampled_from(sorted(KNOWLEDGE.links)),
    })


def _state(facts):
    try:
        return derive(validate_facts(facts), KNOWLEDGE, RULESET.fact_policies, RULESET.parameter_values).state()
    except KentinoError:
        return None  # e.g. an intra-node link id given as interconnect is still a valid catalog entry


def _run(engine, state):
    firings, final = run_rules(RULESET, state, engine)
    return [f.rule.id for f in firings], final


class TestDifferential:
    """durable-rules and the reference evaluator fire the same rules in the same order."""

    @settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(workloads)
    def test_same_firings_and_recommendation(self, facts):
        """Thousands of generated workloads: identical firing sequences and final states."""
        state = _state(facts)
        if state is None:
            return
        durable_ids, durable_final = _run(EXPERT.engine, state)
        reference_ids, reference_final = _run(REFERENCE, state)
        assert durable_ids == reference_ids
        assert durable_final == reference_final
        assert durable_final.get("recommended_kind") is not None

    @settings(max_examples=300, deadline=None)
    @given(workloads)
    def test_chunked_rulesets_agree(self, facts):
        """Split over ten durable rulesets, priorities still decide across them."""
        state = _state(facts)
        if state is None:
            return
        assert _run(CHUNKED, state)[0] == _run(REFERENCE, state)[0]


class TestGroupFacts:
    """A firing re-asserts only the facts of the groups that read what it added."""

    def test_a_group_that_reads_nothing_added_keeps_its_fact(self, monkeypatch):
        """Across a run, each group's fact is asserted once at the start and once per firing that added a name
        it reads, never for the others; the run still fires what the reference evaluator fires."""
        from kentino_expert.engine.durable import engine as durable
        state = _state({"task": "inference", "model": "llama-3.1-70b", "concurrency": 64, "gpu": "l40"})
        asserted, real = [], durable._dre.assert_fact
        monkeypatch.setattr(durable._dre, "assert_fact",
                            lambda handle, fact: asserted.append(fact) or real(handle, fact))
        ids, _ = _run(CHUNKED, state)
        firings, _ = run_rules(RULESET, state, REFERENCE)
        assert ids == [f.rule.id for f in firings]
        chunks = CHUNKED._chunks
        expected = sum(1 + len(chunk.groups) for chunk in chunks)  # the boot fact and each group's first
        for firing in firings:
            expected += sum(not reads.isdisjoint(firing.added) for chunk in chunks for reads in chunk.group_reads)
        assert len(asserted) == expected
        assert expected < sum(1 + len(c.groups) for c in chunks) * (len(firings) + 1)  # some were left alone


class TestEncoding:
    """Values reach the C core in forms it reads correctly."""

    @pytest.mark.parametrize("value,expected", [(1e-05, "0.00001"), (1e16, "10000000000000000.0"),
                                                (2**64, "18446744073709552000.0"), (0.7, "0.7"), (3, "3")])
    def test_numbers_have_no_exponent(self, value, expected):
        """Floats Python prints with an exponent are written out; huge ints become floats."""
        assert encode_value(value) == expected

    def test_non_finite_is_refused(self):
        """NaN and infinity never reach the engine."""
        with pytest.raises(EngineError):
            encode_value(float("inf"))

    def test_encoding_is_valid_json(self):
        """Encoded facts parse back to the same values."""
        import json
        data = {"a": 1e-7, "b": "ščť", "c": True, "d": [1, 2.5]}
        assert json.loads(encode(data)) == data


class TestEngineSafety:
    """The wrapper avoids the defects listed in durable-rules' field notes."""

    def test_no_background_threads(self):
        """Building and running an engine starts no threads (the stock Host starts two timers)."""
        before = threading.active_count()
        engine = DurableEngine(RULESET)
        state = _state({"task": "inference", "model": "llama-3.1-70b"})
        _run(engine, state)
        engine.close()
        assert threading.active_count() == before

    def test_action_exceptions_reach_the_caller(self):
        """An exception inside an action propagates, and the engine keeps working afterwards."""
        engine = DurableEngine(RULESET)
        state = _state({"task": "inference", "model": "llama-3.1-8b"})

        def failing(rule, current):
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            engine.run(state, failing)
        assert _run(engine, state)[0] == _run(REFERENCE, state)[0]
        engine.close()

    def test_many_sessions_are_cleaned(self):
        """More evaluations than the engine's 1,024 live-session limit run without MemoryError."""
        engine = DurableEngine(RULESET)
        state = _state({"task": "lora", "model": "llama-3.1-70b"})
        for _ in range(1100):
            ids, _ = _run(engine, state)
        assert "lora-fits-one-node" in ids
        engine.close()

    def test_state_without_any_match_is_safe(self):
        """A session where no rule matches (delete_state's segfault case) is cleaned safely."""
        saturated = {name: True for rule in RULESET.rules for name in rule.writes}
        saturated["recommended_kind"] = "frontier"
        engine = DurableEngine(RULESET)
        for _ in range(3):
            assert engine.run(saturated, lambda r, s: {})[0] == []
        engine.close()

    def test_non_ascii_strings_compare_equal(self):
        """String constants and fact values are escaped the same way on both sides."""
        node = parse("model == 'ščť-model'")
        term = translate(node)
        assert "\\u0161" in encode(term)


class TestShapes:
    """Rule shapes the engine cannot run are refused when the rules are compiled."""

    @pytest.mark.parametrize("text", ["params_b + 1 > 3", "max(params_b, 2) > 3"])
    def test_refused(self, text):
        """Arithmetic on the left, or functions in a condition, have no durable-rules form."""
        from kentino_expert.engine.durable.terms import ShapeError
        with pytest.raises(ShapeError):
            translate(parse(text))

    def test_constant_comparisons_fold(self):
        """A comparison of two constants becomes always-true (dropped) or never-true."""
        assert translate(parse("3 > 2")) is None
        assert translate(parse("3 < 2")) == {"$nex": {"t": 1}}


class TestKindSubset:
    """The what-if engine runs only the rules that can decide the kind, and reaches the same kind."""

    def test_subset_drops_the_advice_rules_and_keeps_every_decider(self):
        """Every rule that recommends a kind is in the subset; warn-only advice rules are not."""
        subset = {rule.id for rule in EXPERT.kinds.ruleset.rules}
        deciders = {rule.id for rule in RULESET.rules if rule.recommend}
        assert deciders <= subset < {rule.id for rule in RULESET.rules}
        assert "one-node-is-the-market" not in subset

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(workloads)
    def test_same_kind_as_the_full_rule_set(self, facts):
        """For any workload, the subset on durable-rules gives the build (kind, nodes, card, shape, precision) the
        whole rule set gives."""
        from kentino_expert.errors import KentinoError
        try:
            rec = EXPERT.recommend(facts).recommendation
        except KentinoError:
            return
        built = EXPERT.kinds._build_uncached(facts, EXPERT.kinds._alone)
        assert built == (rec.kind, rec.nodes, rec.gpu, rec.gpus_per_node, rec.precision)
