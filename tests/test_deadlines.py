"""Deadline sizing (domain/deadlines.py) against hand computations, and deadlines and time to result in answers."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kentino_expert.domain import deadlines
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.domain.scaling import calibrated_model

K = load_knowledge(Path(__file__).resolve().parent.parent / "knowledge")
MODEL = calibrated_model(K)
INTRA, HDR, ROCE = K.link("pcie-gen5-p2p"), K.link("hdr-200g-ib"), K.link("roce-100gbe")


class TestScaleOut:
    """DP across nodes with a tree all-reduce, and the time of a plan."""

    def test_tree_equals_the_ring_at_the_calibration_point(self):
        """At one and two nodes log2(n) = n - 1: the tree model is the calibrated ring model."""
        for nodes in (1, 2):
            assert deadlines.dp_efficiency_at_scale(MODEL, nodes, 8, INTRA, HDR) == pytest.approx(
                MODEL.dp_efficiency(nodes, 8, INTRA, HDR))

    def test_tree_latency_grows_with_log2(self):
        """At 1,024 nodes the inter-node latency term is 10 hops, not 1,023: efficiency stays near 0.9."""
        ring = MODEL.dp_efficiency(1024, 8, INTRA, HDR)
        tree = deadlines.dp_efficiency_at_scale(MODEL, 1024, 8, INTRA, HDR)
        assert ring < 0.2 < 0.85 < tree

    @given(st.integers(1, 5000))
    def test_speedup_grows_with_the_units(self, units):
        """One more unit is always faster (so the first count that meets a deadline is the answer)."""
        assert deadlines.dp_speedup(units + 1, 2, 8, MODEL, INTRA, ROCE) > deadlines.dp_speedup(units, 2, 8, MODEL,
                                                                                               INTRA, ROCE)

    def test_one_unit_is_its_own_time(self):
        """A plan of one unit takes the unit's days: one node is days_on_one_node, two PP nodes / (2 x pp)."""
        assert deadlines.plan_days(100.0, 1, 1, 8, MODEL, INTRA, HDR) == 100.0
        assert deadlines.plan_days(100.0, 2, 2, 8, MODEL, INTRA, HDR) == pytest.approx(
            100.0 / 2 / MODEL.pp_efficiency(2, 8, INTRA, HDR))

    def test_units_for_deadline_is_the_fewest(self):
        """8B on 1T tokens (348.5 days on one node) in 30 days: 13 nodes meet it and 12 do not."""
        units = deadlines.units_for_deadline(30, 348.52, 1, 8, MODEL, INTRA, HDR)
        assert units == 13
        assert deadlines.plan_days(348.52, 13, 1, 8, MODEL, INTRA, HDR) <= 30 < deadlines.plan_days(
            348.52, 12, 1, 8, MODEL, INTRA, HDR)

    def test_unreachable_deadline_is_none(self):
        """A deadline that would need more than the search's node limit is out of reach."""
        assert deadlines.units_for_deadline(1e-6, 1e9, 1, 8, MODEL, INTRA, HDR) is None


class TestDeadlineFigures:
    """The figures the deadline rules read."""

    def test_no_deadline_no_figures(self, expert):
        """Without deadline_days there is no node count for it."""
        answer = expert.recommend({"task": "pretraining", "model": "llama-3.1-8b", "training_tokens": "1T"})
        assert "nodes_for_deadline" not in answer.figures and "deadline_reachable" not in answer.figures

    def test_units_follow_the_training_state(self, expert):
        """70B full fine-tuning needs several nodes for its state: the deadline adds whole units of them."""
        answer = expert.recommend({"task": "full-finetune", "model": "llama-3.1-70b", "training_tokens": "300B",
                                   "deadline_days": 300})
        unit, needed = answer.figures["training_nodes"].value, answer.figures["nodes_for_deadline"].value
        assert unit >= 2 and needed > unit and needed % unit == 0


def _training_facts():
    return st.fixed_dictionaries({
        "task": st.sampled_from(["full-finetune", "pretraining", "lora", "qlora"]),
        "model": st.sampled_from(["llama-3.1-8b", "qwen2.5-32b", "llama-3.1-70b", "mixtral-8x7b"]),
        "gpu": st.sampled_from(["rtx-pro-6000", "rtx-5090", "l40", "l4"]),
        "training_tokens": st.sampled_from(["10B", "300B", "1T", "15T"]),
    }, optional={"deadline_days": st.sampled_from([3, 30, 120, 365, 3650]),
                 "interconnect": st.sampled_from(["hdr-200g-ib", "ndr-400g-ib", "roce-100gbe"])})


class TestTimeToResult:
    """Every training plan reports its time to result, and a deadline the rules size for is met."""

    def test_a_plan_sized_in_units_of_the_deadline_is_timed_in_them(self, expert):
        """Mixtral 8x7B full fine-tune on RTX PRO 6000 in 30 days: the deadline needs 9 nodes as 3 units of 3 (its
        state needs 2 nodes); the plan's time is the 3-node units' (within 30 days), not 2-node units' (30.13)."""
        answer = expert.recommend({"task": "full-finetune", "model": "mixtral-8x7b", "gpu": "rtx-pro-6000",
                                   "training_tokens": "300B", "deadline_days": 30})
        figures = {name: figure.value for name, figure in answer.figures.items()}
        assert figures["nodes_for_deadline"] == answer.recommendation.nodes == 9
        assert figures["deadline_unit_nodes"] == 3 and figures["training_nodes"] == 2
        assert figures["deadline_reachable"] is True and figures["time_to_result_days"] <= 30

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.function_scoped_fixture])
    @given(_training_facts())
    def test_every_training_plan_has_its_days(self, expert, facts):
        """time_to_result_days is present; every training plan meets its deadline, or says no count of nodes does."""
        answer = expert.recommend(facts)
        days = answer.figures["time_to_result_days"].value
        assert days > 0
        if "deadline_days" in facts:
            codes = {warning.code for warning in answer.warnings}
            assert days <= facts["deadline_days"] * (1 + 1e-6) or (
                answer.figures["deadline_reachable"].value is False and "deadline-out-of-reach" in codes)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                     HealthCheck.function_scoped_fixture])
    @given(_training_facts(), st.sampled_from([3, 30, 120, 365]), st.sampled_from([2, 4, 10]))
    def test_a_shorter_deadline_never_buys_fewer_gpus(self, expert, facts, deadline, factor):
        """On the same build (the rules' plan for the named card, no search), dividing the deadline never gives
        fewer GPUs, whether the plan is an IB cluster or frontier work with its real count."""
        def gpus(days):
            plan = expert.kinds.plan_of({**facts, "deadline_days": days})
            return plan.gpus

        assert gpus(deadline / factor) >= gpus(deadline)


class TestPeftDeadlines:
    """LoRA and QLoRA are training too: a deadline sizes their nodes the same way."""

    def test_qlora_trains_data_parallel_to_meet_it(self, expert):
        """QLoRA of 70B on 20B tokens takes 61 days on one node; 30 days needs 3 INT4 nodes training data-parallel."""
        answer = expert.recommend({"task": "qlora", "model": "llama-3.1-70b", "training_tokens": "20B",
                                   "deadline_days": 30})
        rec = answer.recommendation
        assert (rec.kind, rec.nodes, rec.precision) == ("multi-node-ib", 3, "int4")
        assert answer.figures["time_to_result_days"].value <= 30
        assert "deadline-drives-nodes" in {warning.code for warning in answer.warnings}
        slower = answer.alternatives[0]
        assert (slower.nodes, slower.works) == (1, False)
        assert slower.figure.value == pytest.approx(answer.figures["days_on_one_node"].value, rel=1e-5)

    def test_lora_too_big_for_bf16_meets_it_as_a_qlora_cluster(self, expert):
        """LoRA of 405B on 2B tokens: one QLoRA node takes 35 days; for 30 days the QLoRA cluster is sized to it."""
        answer = expert.recommend({"task": "lora", "model": "llama-3.1-405b", "training_tokens": "2B",
                                   "deadline_days": 30})
        assert answer.recommendation.kind == "multi-node-ib"
        assert answer.recommendation.precision == "int4"
        assert answer.figures["time_to_result_days"].value <= 30


    def test_a_deadline_one_qlora_node_meets_keeps_one_node(self, expert):
        """LoRA of 405B on 1B tokens is one QLoRA node (18 days); a 100-year deadline must not make it a cluster."""
        facts = {"task": "lora", "model": "llama-3.1-405b", "training_tokens": "1B"}
        without = expert.recommend(facts).recommendation
        answer = expert.recommend({**facts, "deadline_days": 36500})
        rec = answer.recommendation
        assert (without.kind, without.nodes) == ("single-node", 1)
        assert (rec.kind, rec.nodes, rec.precision) == ("single-node", 1, "int4")
        assert answer.figures["qlora_nodes_for_deadline"].value == 1

    def test_lora_as_qlora_trains_data_parallel_in_qlora_units(self, expert):
        """LoRA of 405B on 5B tokens in 30 days: one QLoRA node takes 88 days, so QLoRA nodes train
        data-parallel, counted in QLoRA units (not the BF16 state's), and the plan meets the deadline."""
        answer = expert.recommend({"task": "lora", "model": "llama-3.1-405b", "training_tokens": "5B",
                                   "deadline_days": 30})
        rec = answer.recommendation
        assert (rec.kind, rec.precision, rec.parallelism.tp) == ("multi-node-ib", "int4", 1)
        assert rec.nodes == answer.figures["qlora_nodes_for_deadline"].value < answer.figures[
            "nodes_for_deadline"].value
        assert answer.figures["time_to_result_days"].value <= 30

    @pytest.mark.parametrize("deadline", [30, 60])
    def test_lora_as_qlora_deadline_warning_names_the_plan(self, expert, deadline):
        """LoRA of 405B on 5B tokens run as QLoRA: the deadline warning names the plan's QLoRA node count (3 or 2),
        not the BF16 state's (4 or 2 nodes, when none was given at 60 days)."""
        answer = expert.recommend({"task": "lora", "model": "llama-3.1-405b", "training_tokens": "5B",
                                   "deadline_days": deadline})
        nodes = answer.recommendation.nodes
        messages = {warning.code: warning.message for warning in answer.warnings}
        assert "deadline-drives-nodes" not in messages
        assert f"data-parallel on {nodes} nodes" in messages["deadline-drives-qlora-nodes"]

    def test_lora_as_qlora_cluster_summary_compares_units(self, expert):
        """LoRA of Kimi K2 on 1B tokens in half a day: 2 DP copies of a 2-node QLoRA unit against 4 BF16 nodes;
        the summary compares the units, never '4 nodes instead of 4'."""
        answer = expert.recommend({"task": "lora", "model": "kimi-k2", "training_tokens": "1B", "deadline_days": 0.5})
        rec = answer.recommendation
        assert (rec.nodes, rec.parallelism.pp, rec.parallelism.dp) == (4, 2, 2)
        assert answer.figures["training_nodes"].value == 4
        assert "a 2-node unit instead of 4 nodes in BF16" in rec.summary

    def test_a_long_deadline_leaves_a_qlora_cluster_as_it_is(self, expert):
        """LoRA of Kimi K2 is a 2-node QLoRA cluster; a 100-year deadline must not turn it into frontier work
        because the BF16 state's units fill the IB cluster."""
        facts = {"task": "lora", "model": "kimi-k2", "training_tokens": "1B"}
        plan = expert.kinds.plan_of({**facts, "deadline_days": 36500})
        assert (plan.kind, plan.nodes) == (expert.kinds.plan_of(facts).kind, 2) == ("multi-node-ib", 2)


class TestOutOfReach:
    """A deadline no count of nodes meets is frontier work at the search's bound, with a warning."""

    def test_out_of_reach_names_the_bound(self, expert):
        """8B on 1,000T tokens in a day: deadline_reachable is false, the count is the bound, and a warning says so."""
        answer = expert.recommend({"task": "pretraining", "model": "llama-3.1-8b", "training_tokens": "1000T",
                                   "deadline_days": 1})
        assert answer.figures["deadline_reachable"].value is False
        assert answer.figures["nodes_for_deadline"].value == deadlines.SEARCH_LIMIT_NODES
        assert answer.recommendation.kind == "frontier"
        assert answer.recommendation.nodes == deadlines.SEARCH_LIMIT_NODES
        assert "deadline-out-of-reach" in {warning.code for warning in answer.warnings}

    def test_the_bound_is_the_same_for_every_unit(self):
        """Out of reach, 3-node and 7-node units name the bound itself: a card with more memory (smaller units)
        never names more nodes than one with less (the floor to whole units did: 99,999 against 99,995)."""
        for unit in (3, 7):
            values = {"days_on_one_node": 1e12, "training_nodes": unit}
            deadlines.deadline_figures(values, {"deadline_days": 1}, K.gpu("rtx-pro-6000"), 8, HDR, K)
            assert values["deadline_reachable"] is False
            assert values["nodes_for_deadline"] == deadlines.SEARCH_LIMIT_NODES

    def test_one_node_plan_is_its_days_on_one_node(self, expert):
        """A one-node plan takes exactly days_on_one_node."""
        answer = expert.recommend({"task": "full-finetune", "params_b": 13, "training_tokens": "30B"})
        assert answer.recommendation.nodes == 1
        assert answer.figures["time_to_result_days"].value == pytest.approx(answer.figures["days_on_one_node"].value,
                                                                             rel=1e-5)

    def test_batch_corpus_meets_its_deadline(self, expert):
        """1B tokens in 2 days on 70B: 3 FP8 replicas finish in under 2 days; the one-node plan (5.8 days) is an
        alternative that does not work."""
        answer = expert.recommend({"task": "batch-inference", "model": "llama-3.1-70b", "corpus_tokens": "1B",
                                   "deadline_days": 2})
        assert answer.recommendation.nodes == 3
        assert answer.figures["time_to_result_days"].value <= 2
        slower = answer.alternatives[0]
        assert (slower.gpu, slower.nodes, slower.works, slower.figure.name) == (
            "rtx-pro-6000", 1, False, "time_to_result_days")
        assert slower.figure.value == pytest.approx(answer.figures["batch_days_one_node"].value, rel=1e-5)
