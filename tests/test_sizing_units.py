"""Sizing functions against figures computed by hand, and the scaling model's calibration and monotonicity."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kentino_expert.domain import pergpu, sizing
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.domain.scaling import calibrated_model, ring_factor

K = load_knowledge(Path(__file__).resolve().parent.parent / "knowledge")
C = K.sizing
LLAMA70, LLAMA405, DSV3 = K.model("llama-3.1-70b"), K.model("llama-3.1-405b"), K.model("deepseek-v3")
PRO, R5090 = K.gpu("rtx-pro-6000"), K.gpu("rtx-5090")


EMBED_70B = 128256 * 8192  # Llama 3.1 70B: vocabulary x hidden, the embedding (and, untied, the LM head)


class TestMemory:
    """Weights, KV cache and node capacity."""

    def test_weights_per_precision(self):
        """70.6B: 141.2 GB at BF16; FP8 and AWQ-INT4 quantise all but the BF16 embedding and LM head (2 x 1.05B)."""
        kept = 2 * EMBED_70B
        assert sizing.weights_gb(LLAMA70, "bf16", C) == pytest.approx(141.2)
        assert sizing.weights_gb(LLAMA70, "fp8", C) == pytest.approx((70.6e9 - kept + 2 * kept) / 1e9)
        awq = 0.5 + (2 + 0.5) / 128
        assert sizing.weights_gb(LLAMA70, "int4", C) == pytest.approx(((70.6e9 - kept) * awq + 2 * kept) / 1e9)

    def test_tied_embedding_is_kept_once(self):
        """Gemma 2 ties its LM head to the embedding: FP8 keeps one 256,000 x 4,608 matrix in BF16."""
        gemma = K.model("gemma-2-27b")
        kept = 256000 * 4608
        assert sizing.weights_gb(gemma, "fp8", C) == pytest.approx((27.2e9 + kept) / 1e9)

    def test_native_mxfp4_checkpoint_is_the_int4_weights(self):
        """gpt-oss-120b: 36 layers x 128 experts x 3 x 2880 x 2880 at 4.25 bits, the rest BF16 = the 60.8 GiB card."""
        model = K.model("gpt-oss-120b")
        experts = 36 * 128 * 3 * 2880 * 2880
        expected = (experts * 4.25 / 8 + (116.83e9 - experts) * 2) / 1e9
        assert sizing.weights_gb(model, "int4", C) == pytest.approx(expected)
        assert sizing.weights_gb(model, "int4", C) * 1e9 / 2**30 == pytest.approx(60.8, rel=0.01)

    def test_qlora_base_is_nf4_with_bf16_embeddings(self):
        """NF4 with double quantisation is (4 + 8/64 + 32/16384) / 8 bytes per quantised weight."""
        kept = 2 * EMBED_70B
        nf4 = (4 + 8 / 64 + 32 / (64 * 256)) / 8
        assert sizing.qlora_base_gb(LLAMA70, C) == pytest.approx(((70.6e9 - kept) * nf4 + 2 * kept) / 1e9)

    def test_kv_bytes_per_token_gqa(self):
        """Llama 3.1 70B: 2 x 80 layers x 8 KV heads x 128 x 2 bytes = 327,680 bytes per token."""
        assert sizing.kv_cache_bytes_per_token(LLAMA70, 2.0) == 327_680

    def test_kv_bytes_per_token_mla(self):
        """DeepSeek-V3 caches one latent: 61 x (512 + 64) x 2 bytes = 70,272 bytes per token."""
        assert sizing.kv_cache_bytes_per_token(DSV3, 2.0) == 70_272

    def test_local_attention_layers_hold_their_window_only(self):
        """Gemma 2 27B at 8,192 tokens: 23 global layers hold 8,192 tokens, 23 local ones 4,096 (6,144 on average)."""
        gemma = K.model("gemma-2-27b")
        per_token = 2 * 46 * 16 * 128 * 2.0
        assert sizing.kv_cache_gb(gemma, 1, 8192, 2.0) == pytest.approx(per_token * 6144 / 1e9)
        assert sizing.kv_cache_gb(gemma, 1, 2048, 2.0) == pytest.approx(per_token * 2048 / 1e9)  # inside the window

    def test_chunked_attention_is_bounded_like_a_window(self):
        """Llama 4 Scout at 32k: 12 global layers hold 32,768 tokens, 36 chunked ones at most 8,192."""
        scout = K.model("llama-4-scout")
        per_token = 2 * 48 * 8 * 128 * 2.0
        held = (12 * 32768 + 36 * 8192) / 48
        assert sizing.kv_cache_gb(scout, 1, 32768, 2.0) == pytest.approx(per_token * held / 1e9)

    def test_kv_cache_at_concurrency(self):
        """48 requests x 8,192 tokens x 327,680 B = 128.85 GB."""
        assert sizing.kv_cache_gb(LLAMA70, 48, 8192, 2.0) == pytest.approx(48 * 8192 * 327_680 / 1e9)

    def test_node_vram(self):
        """8 x 96 GB = 768 GB; 8 x 32 GB = 256 GB."""
        assert sizing.node_vram_gb(PRO, 8) == 768
        assert sizing.node_vram_gb(R5090, 8) == 256


class TestTrainingState:
    """Full fine-tuning, LoRA and QLoRA state of the whole job."""

    def test_full_finetune_70b_in_document_range(self):
        """70.6B x 18 B (ZeRO-3 estimator) + 80 x 8192 x 8192 x 34 B = 1,270.8 + 182.5 GB: in the document's
        1.2-1.5 TB."""
        state = pergpu.training_load("full-finetune", LLAMA70, C, 8192).total_gb
        assert state == pytest.approx(70.6 * 18 + 80 * 8192 * 8192 * 34 / 1e9)
        assert 1200 <= state <= 1500

    def test_lora_state_counts_rank_adapters_and_logits(self):
        """LoRA on 8B: BF16 base + 41.9M rank-16 adapters x 16 B + 2 B x hidden x layers x 8k + 128,256 x 8k x 6 B."""
        model = K.model("llama-3.1-8b")
        adapters = 16 * 32 * (8192 + 2 * 5120 + 8192 + 2 * (4096 + 14336) + (14336 + 4096))
        expected = 16.06 + adapters * 16 / 1e9 + 2 * 4096 * 32 * 8192 / 1e9 + 128256 * 8192 * 6 / 1e9
        assert pergpu.training_load("lora", model, C, 8192).total_gb == pytest.approx(expected, rel=1e-4)

    def test_qlora_405b_fits_one_node(self):
        """The NF4 base of 405.9B (216 GB) plus adapters, activations and logits fits 8 x 96 GB."""
        state = pergpu.training_load("qlora", LLAMA405, C, 8192).total_gb
        assert sizing.qlora_base_gb(LLAMA405, C) < state < 768 * 0.9

    def test_compute_and_gpu_months(self):
        """6 x 70e9 x 15e12 = 6.3e24 FLOP; at 500 TFLOPS x 0.4 that is 6.3e24 / 2e14 / 2,592,000 s GPU-months."""
        flops = sizing.training_compute_flops(70, 15e12, 6)
        assert flops == pytest.approx(6.3e24)
        expected = 6.3e24 / (PRO.bf16_dense_tflops * 1e12 * 0.4) / 2_592_000
        assert sizing.gpu_months(flops, PRO, 0.4, 2_592_000) == pytest.approx(expected)

    def test_estimated_13b(self):
        """12 x L x h^2 = 13e9 with L = h / 128 gives h ~ 5,120 and 40 layers (the Llama 2 13B shape)."""
        model = sizing.estimated_model(13, C)
        assert (model.hidden, model.layers) == (5120, 40)
        assert (model.vocab_size, model.intermediate_size) == (128256, 17920)
        assert model.estimated


class TestThroughput:
    """Serving throughput calibrated to the document's 500-2,000 tokens/s at 70B FP8."""

    @pytest.mark.parametrize("latency,reference", [("interactive", 500), ("production", 1250), ("offline", 2000)])
    def test_calibration_point(self, latency, reference):
        """8 x Pro 6000 at FP8 on Llama 3.1 70B, the calibration model, gives the document's figure exactly."""
        assert sizing.serving_tokens_per_s(LLAMA70, PRO, 8, "fp8", latency, K) == pytest.approx(reference)

    def test_moe_scales_with_active_parameters(self):
        """Mixtral reads its 12.9B active parameters per token: 70.6 / 12.9 times the 70B's speed (both untied, so
        reading the BF16 head instead of the embedding leaves the byte count at the active count)."""
        mixtral = K.model("mixtral-8x7b")
        assert sizing.serving_tokens_per_s(mixtral, PRO, 8, "fp8", "production", K) == pytest.approx(1250 * 70.6 / 12.9)

    def test_prefill_is_compute_bound(self):
        """70B prompt tokens: 8 x 1,000 TFLOPS FP8 x 0.40 / (2 x (70.6B - the 1.05B input embedding)) ~ 23,000/s."""
        expected = 8 * 1000e12 * 0.4 / (2 * (70.6e9 - EMBED_70B))
        assert sizing.prefill_tokens_per_s(LLAMA70, PRO, 8, "fp8", K) == pytest.approx(expected)
        assert sizing.prefill_tokens_per_s(LLAMA70, PRO, 8, "int4", K) == pytest.approx(expected / 2)  # BF16 peak

    def test_corpus_rate_blends_decode_and_prefill(self):
        """10% generated at 2,000/s and 90% prompt at 23,000/s: 1 / (0.1 / 2000 + 0.9 / 23000) tokens/s."""
        assert sizing.corpus_tokens_per_s(2000, 23000, 0.1) == pytest.approx(1 / (0.1 / 2000 + 0.9 / 23000))
        assert sizing.corpus_tokens_per_s(2000, 23000, 1.0) == pytest.approx(2000)

    def test_replicas(self):
        """3,500 tokens/s at 1,239.4 per node needs 3 replicas; no demand needs one."""
        assert sizing.replicas_needed(3500, 1239.4) == 3
        assert sizing.replicas_needed(None, 1239.4) == 1


MODEL = calibrated_model(K)
INTRA = K.link("pcie-gen5-p2p")
LINKS = [K.link(name) for name in ("ndr-400g-ib", "hdr-200g-ib", "roce-100gbe", "eth-25gbe")]


class TestScaling:
    """The efficiency model reproduces the document's two points and never rewards a worse fabric."""

    def test_document_points(self):
        """TP=8 inside one PCIe node is 0.73; TP=8 over two 4-GPU nodes on HDR IB is 0.65."""
        assert MODEL.tp_efficiency(8, 1, INTRA, None) == pytest.approx(0.73, abs=0.005)
        assert MODEL.tp_efficiency(8, 2, INTRA, K.link("hdr-200g-ib")) == pytest.approx(0.65, abs=0.005)

    def test_ring_factor(self):
        """A ring all-reduce moves 2(t-1)/t bytes per byte."""
        assert ring_factor(8) == pytest.approx(1.75) and ring_factor(1) == 0

    @settings(max_examples=300, deadline=None)
    @given(gpus=st.integers(2, 64), nodes=st.integers(1, 16), link=st.integers(0, 2))
    def test_monotone(self, gpus, nodes, link):
        """A slower link or more nodes never raises TP efficiency; DP is never below TP on the same fabric."""
        nodes = min(nodes, gpus)
        faster, slower = LINKS[link], LINKS[link + 1]
        eff = MODEL.tp_efficiency(gpus, nodes, INTRA, faster)
        assert 0 < eff <= 1
        assert MODEL.tp_efficiency(gpus, nodes, INTRA, slower) <= eff + 1e-12
        if nodes < gpus:
            assert MODEL.tp_efficiency(gpus, nodes + 1, INTRA, faster) <= eff + 1e-12
        per_node = max(1, gpus // nodes)
        tp = MODEL.tp_efficiency(nodes * per_node, nodes, INTRA, faster)
        assert MODEL.dp_efficiency(nodes, per_node, INTRA, faster) >= tp - 1e-12
        assert math.isfinite(MODEL.plan_efficiency(nodes, per_node, INTRA, faster))


class TestProposedBuildFigures:
    """The proposed_* figures describe the build the customer proposed, on its own card."""

    def test_proposed_gpu_sets_the_in_box_link(self):
        """2 x 4 L40 (PCIe Gen4 P2P) proposed beside the default RTX Pro 6000 node: its TP figures use the L40's
        link."""
        from kentino_expert.domain.derive import derive
        from kentino_expert.domain.workload import validate_facts
        from kentino_expert.expert import Expert
        expert = Expert()
        facts = {"task": "lora", "model": "llama-3.1-70b",
                 "proposed_build": {"nodes": 2, "gpus_per_node": 4, "gpu": "l40"}}
        ruleset = expert.ruleset
        workload = validate_facts(facts)
        figures = derive(workload, expert.knowledge, ruleset.fact_policies, ruleset.parameter_values).figures
        gen4, hdr = K.link("pcie-gen4-p2p"), K.link("hdr-200g-ib")
        assert figures["gpu_memory_gb"].value == PRO.memory_gb  # the node itself is still the default card
        assert figures["proposed_tp_efficiency"].value == pytest.approx(MODEL.tp_efficiency(8, 2, gen4, hdr), rel=1e-5)
        one_node = MODEL.tp_efficiency(8, 1, gen4, None)
        assert figures["proposed_one_node_efficiency"].value == pytest.approx(one_node, rel=1e-5)
        assert figures["proposed_one_node_efficiency"].value < MODEL.tp_efficiency(8, 1, INTRA, None)


class TestTrainingCompute:
    """Time to result counts the FLOPs a token really costs."""

    def test_moe_training_compute_uses_active_parameters(self):
        """DeepSeek-V3 on 14.8T tokens: 6 x 37B active x D = 3.3e24 FLOP, about 2.3M H100-hours at 40% MFU.

        Its technical report gives 2.788M H800 GPU-hours; 6 x 671B total x D would claim 42M.
        """
        from kentino_expert.domain.derive import derive
        from kentino_expert.domain.workload import validate_facts
        from kentino_expert.expert import Expert
        expert = Expert()
        facts = {"task": "pretraining", "model": "deepseek-v3", "training_tokens": 14.8e12, "gpu": "h100-sxm"}
        ruleset = expert.ruleset
        workload = validate_facts(facts)
        figures = derive(workload, expert.knowledge, ruleset.fact_policies, ruleset.parameter_values).figures
        zflop = 6 * DSV3.active_b * 1e9 * 14.8e12 / 1e21
        assert figures["training_compute_zflop"].value == pytest.approx(zflop, rel=1e-5)
        gpu_hours = figures["training_gpu_months"].value * 720
        assert 1.5e6 < gpu_hours < 3.5e6
