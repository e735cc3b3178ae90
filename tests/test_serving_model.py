"""The serving model against independent formulas (hand-computed here from config.json and data-sheet numbers, not
from the model's own functions) and against the world: the published measurements of knowledge/measurements.yaml
meet the calibration target, and every row outside it is explained in docs/calibration.md."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from kentino_expert.domain import calibration
from kentino_expert.domain import serving_model as physics
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.paths import bundled

ROOT = Path(__file__).resolve().parent.parent
K = load_knowledge(bundled("knowledge"))
ENGINE = physics.EngineConstants.of(K.constant("serving_model"))


def _unit(model: str, gpu: str, precision: str = "bf16", tp: int = 1, pp: int = 1, kv: str = "bf16"):
    card = K.gpu(gpu)
    return physics.make_unit(K.model(model), card, precision, kv, tp, pp, K.sizing, ENGINE,
                             K.link(card.intra_node_link))


def test_the_published_measurements_meet_the_calibration_target():
    """At least 75% of the rows used are within 1.5x, and the median ratio is between 0.8 and 1.25."""
    found = calibration.summary(calibration.predictions(K))
    assert found.rows >= 40
    assert found.share_within >= 0.75, f"{found.within} of {found.rows} within 1.5x"
    assert 0.8 <= found.median_ratio <= 1.25


def test_every_row_outside_the_target_is_explained_in_the_docs():
    """docs/calibration.md names each row outside 1.5x in its explanations (the generated table lists them all)."""
    text = (ROOT / "docs" / "calibration.md").read_text(encoding="utf-8")
    explained = text.split("## Rows outside 1.5x", 1)[1].split("<!-- generated: calibration -->", 1)[0]
    outside = [item.row.id for item in calibration.predictions(K) if not item.row.excluded and not item.within]
    missing = [row for row in outside if f"`{row}`" not in explained]
    assert not missing, f"rows outside 1.5x without an explanation: {missing}"


def test_a_single_user_step_reads_the_dense_weights_at_the_cards_bandwidth():
    """Llama 3.1 8B, BF16, one user on an L4 (300 GB/s): the step is the weights' bytes (2 x 8.03B, the LM head
    included) over 300 GB/s x the bandwidth efficiency, plus the KV of one short context and the step overhead."""
    model = K.model("llama-3.1-8b")
    weights = 2 * 8.03e9  # every linear weight and the LM head at 2 bytes; the input embedding is a row lookup
    weights -= 2 * model.vocab_size * model.hidden  # ... so one of the two vocab x hidden matrices is not read
    kv = 2 * 32 * 8 * 128 * 2 * 100  # K and V, 32 layers, 8 KV heads of 128, 2 bytes, 100 tokens
    expected = (weights + kv) / (300e9 * ENGINE.bandwidth_efficiency) + ENGINE.step_overhead_s
    got = physics.decode_round_seconds(_unit("llama-3.1-8b", "l4"), 1, 100, ENGINE)
    assert got == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize("batch, expected", [(1, 8), (8, 128 * (1 - (1 - 8 / 128) ** 8)), (512, 127.98)])
def test_a_moe_batch_touches_the_expected_distinct_experts(batch, expected):
    """Qwen3-30B-A3B routes 8 of 128 experts: a batch of b tokens touches E(1 - (1 - k/E)^b) of them."""
    assert physics.expected_experts(128, 8, batch) == pytest.approx(expected, rel=1e-3)


def test_a_large_moe_batch_reads_nearly_every_expert():
    """At 256 requests an MoE step reads almost all its experts, far more than the active parameters alone."""
    unit = _unit("qwen3-30b-a3b", "rtx-pro-6000", "fp8")
    assert physics.weights_read_bytes(unit, 256) > 4 * physics.weights_read_bytes(unit, 1)


def test_prefill_flops_are_2nt_plus_causal_attention():
    """Prefill of T tokens: 2 x (active parameters less the input embedding) x T + 2 x layers x T^2 x heads x
    head_dim (the causal half of QK^T and of AV)."""
    model, tokens = K.model("llama-3.1-70b"), 4096
    linear = 2 * (model.active_b * 1e9 - model.vocab_size * model.hidden) * tokens
    attention = 2 * model.layers * tokens * tokens * model.attention_heads * model.head_dim
    assert physics.prefill_flops(model, tokens) == pytest.approx(linear + attention, rel=1e-9)


def test_a_ring_allreduce_moves_2_t_minus_1_over_t_of_its_payload():
    """Over 8 ranks at 50 GB/s: 2 x 7/8 of 1 MB at 50 GB/s, plus 14 hops of latency."""
    link = K.link("pcie-gen5-p2p")
    got = physics.allreduce_seconds(link, 8, 1e6, ENGINE)
    expected = 2 * 7 / 8 * 1e6 / 50e9 + 14 * link.latency_us * 1e-6 * ENGINE.collective_latency_factor
    assert got == pytest.approx(expected, rel=1e-9)


def test_more_requests_in_flight_mean_more_tokens_and_a_slower_user():
    """Continuous batching: throughput rises with the batch, each user's speed falls."""
    unit = _unit("llama-3.1-8b", "rtx-pro-6000", "fp8")
    points = [physics.steady_state(unit, batch, 1024, 294, ENGINE) for batch in (1, 8, 32, 128)]
    assert [p.output_tokens_per_s for p in points] == sorted(p.output_tokens_per_s for p in points)
    assert [p.per_user_tokens_per_s for p in points] == sorted((p.per_user_tokens_per_s for p in points),
                                                               reverse=True)


def test_littles_law_holds_at_the_steady_state():
    """Requests/s x (TTFT + output x TPOT) is the batch in flight."""
    unit = _unit("llama-3.1-70b", "rtx-pro-6000", "fp8", tp=2)
    point = physics.steady_state(unit, 24, 1024, 294, ENGINE)
    assert point.requests_per_s * (point.ttft_s + 294 * point.tpot_s) == pytest.approx(24, rel=1e-6)


def test_an_open_loop_rate_is_served_at_the_batch_it_keeps_in_flight():
    """At a rate the unit keeps up with, the steady state's requests/s is that rate; beyond its top, None."""
    unit = _unit("llama-3.1-8b", "rtx-pro-6000", "fp8")
    point = physics.open_loop(unit, 3.0, 1024, 294, ENGINE, 256)
    assert point is not None and point.requests_per_s == pytest.approx(3.0, rel=1e-3)
    assert physics.open_loop(unit, 1e6, 1024, 294, ENGINE, 256) is None


def test_the_open_loop_memo_answers_as_a_fresh_search_and_tells_units_apart():
    """The memoized open loop gives what a fresh bisection gives, for a unit built again from the same specs, and a
    unit that differs only in its card's bandwidth (another catalog's object) gets its own answer."""
    unit = _unit("llama-3.1-70b", "l40", "fp8", tp=8)
    fresh = physics.Load(unit, 1024, 294, ENGINE).open_loop(0.7, 200)
    assert physics.open_loop(unit, 0.7, 1024, 294, ENGINE, 200) == fresh
    assert physics.open_loop(_unit("llama-3.1-70b", "l40", "fp8", tp=8), 0.7, 1024, 294, ENGINE, 200) == fresh
    faster = unit.gpu.model_copy(update={"memory_bandwidth_gbs": unit.gpu.memory_bandwidth_gbs * 2})
    other = physics.Unit(**{**unit.__dict__, "gpu": faster})
    assert physics.open_loop(other, 0.7, 1024, 294, ENGINE, 200).tpot_s < fresh.tpot_s


def test_a_load_gives_the_steady_state_of_the_formula_at_every_batch():
    """Load.at (the bisections' form) equals steady_state, and its TPOT is the round plus the prefill share."""
    unit = _unit("qwen3-235b-a22b", "rtx-pro-6000", "fp8", tp=8)
    load = physics.Load(unit, 2048, 300, ENGINE)
    for batch in (1, 7.5, 64, 256):
        point = load.at(batch)
        assert point == physics.steady_state(unit, batch, 2048, 300, ENGINE)
        round_s = physics.decode_round_seconds(unit, batch, 2048 + 150, ENGINE)
        work = physics.prefill_seconds(unit, 2048, ENGINE)
        assert point.tpot_s == pytest.approx(round_s + batch * work / 300, rel=1e-12)


def test_pipeline_stages_add_memory_not_speed_for_one_user():
    """A token passes every stage: PP 2 of a TP 1 pair is no faster for one user than TP 1 alone (it is slower by
    the hand-off), while TP 2 is faster."""
    alone = physics.steady_state(_unit("llama-3.1-8b", "rtx-pro-6000", "fp8"), 1, 512, 128, ENGINE).tpot_s
    staged = physics.steady_state(_unit("llama-3.1-8b", "rtx-pro-6000", "fp8", pp=2), 1, 512, 128, ENGINE).tpot_s
    split = physics.steady_state(_unit("llama-3.1-8b", "rtx-pro-6000", "fp8", tp=2), 1, 512, 128, ENGINE).tpot_s
    assert staged >= alone > split


def test_fp4_needs_fp4_tensor_cores():
    """FP4 runs on the Blackwell cards' FP4 peak; a card without FP4 tensor cores has no FP4."""
    assert physics.compute_tflops(K.gpu("rtx-pro-6000"), "fp4", ENGINE) == K.gpu("rtx-pro-6000").fp4_dense_tflops
    with pytest.raises(ValueError, match="no FP4"):
        physics.compute_tflops(K.gpu("l40"), "fp4", ENGINE)


def test_the_documents_anchor_one_pro_6000_node_holds_70b_at_32_to_64_users():
    """"8 x Pro 6000 handles 70B at 32-64 concurrent requests": one node at FP8 serves 64 interactive users at
    the interactive per-user speed (25 tokens/s) and its first-token limit."""
    from kentino_expert.expert import Expert
    answer = Expert().recommend({"task": "inference", "model": "llama-3.1-70b", "concurrency": 64,
                                 "context_tokens": 8192, "latency": "interactive"})
    rec, figures = answer.recommendation, answer.figures
    assert (rec.kind, rec.nodes, rec.gpu) == ("single-node", 1, "rtx-pro-6000")
    assert figures["per_user_tokens_per_s"].value >= 25
    assert figures["time_to_first_token_s"].value <= figures["ttft_target_s"].value


def test_the_calibration_table_in_the_docs_is_current():
    """docs/calibration.md's generated table is what the code renders from the bundled knowledge now."""
    from kentino_expert.authoring.calibration_table import calibration_table
    text = (ROOT / "docs" / "calibration.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- generated: calibration -->\n\n(.*?)\n\n<!-- end generated -->", text, re.S)
    assert block is not None and block.group(1) == calibration_table(None, K)
    assert math.isfinite(calibration.summary(calibration.predictions(K)).median_ratio)
