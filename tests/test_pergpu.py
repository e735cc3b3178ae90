"""Memory per GPU: the in-node TP of a serving replica, replicated KV, node capacity, TP x PP units, training
state per GPU with and without FSDP, and the figures of a recommended plan, against hand arithmetic."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from kentino_expert.domain import pergpu, sizing
from kentino_expert.domain import serving_model as physics
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.domain.figures_serving import serving_load
from kentino_expert.domain.plan import plan_figures
from kentino_expert.expert import Expert

K = load_knowledge(Path(__file__).resolve().parent.parent / "knowledge")
C = K.sizing
ENGINE = physics.EngineConstants.of(K.constant("serving_model"))
PRO = K.gpu("rtx-pro-6000")
PARAMS = {"weights_fraction_max": 0.7, "workload_fraction_max": 0.9, "training_fraction_max": 0.9}
OVERHEAD = 0.05 * 96  # runtime overhead of each 96 GB GPU
EXPERT = Expert(backend="reference")


def load_of(model_id: str, precision: str = "fp8", context: int = 8192, gpu: str = "rtx-pro-6000"):
    return serving_load(K.model(model_id), K.gpu(gpu), precision, context, K, PARAMS)


class TestKvPerRank:
    """vLLM's per-rank KV cache."""

    def test_heads_split_while_tp_is_at_most_the_kv_heads(self):
        """Llama 3.1 70B has 8 KV heads: at TP=8 each rank keeps one, an eighth of 327,680 B per token."""
        assert pergpu.kv_rank_bytes_per_token(K.model("llama-3.1-70b"), 2.0, 8) == 327_680 / 8

    def test_heads_replicated_when_tp_exceeds_them(self):
        """Qwen2.5-7B has 4 KV heads: at TP=8 each rank still keeps one, 2 x 28 x 128 x 2 B = 14,336 B (x2)."""
        assert pergpu.kv_rank_bytes_per_token(K.model("qwen2.5-7b"), 2.0, 8) == 2 * 28 * 1 * 128 * 2

    def test_mla_latent_on_every_rank(self):
        """DeepSeek-V3 keeps its whole 61 x 576 x 2 B latent on every TP rank; PP=2 halves the layers."""
        model = K.model("deepseek-v3")
        assert pergpu.kv_rank_bytes_per_token(model, 2.0, 8) == 70_272
        assert pergpu.kv_rank_bytes_per_token(model, 2.0, 8, pp=2) == 70_272 / 2


class TestServing:
    """In-node TP, node capacity and TP x PP units."""

    def test_an_8b_model_runs_tp1_with_eight_replicas(self):
        """8B FP8 (9.08 GB) fits one card with headroom: TP=1, each of 8 replicas holds 4 of 32 requests."""
        load = load_of("llama-3.1-8b")
        assert pergpu.in_node_tp(load, 8, 32) == 1
        expected = sizing.weights_gb(K.model("llama-3.1-8b"), "fp8", C) + 4 * 8192 * 131_072 / 1e9 + OVERHEAD
        assert load.gpu_gb(1, 1, 4) == pytest.approx(expected)

    def test_70b_at_48_requests_needs_tp2(self):
        """70B FP8 weights (72.7 GB) exceed 70% of a 96 GB card alone; two GPUs hold them and 12 requests each."""
        load = load_of("llama-3.1-70b")
        assert not load.weights_fit(1) and load.weights_fit(2)
        room = 0.9 * 96 - OVERHEAD - load.weights_gb / 2
        assert load.group_capacity(2) == math.floor(room / (8192 * 327_680 / 2 / 1e9))
        assert pergpu.in_node_tp(load, 8, 48) == 2

    def test_node_capacity_takes_the_best_layout(self):
        """70B FP8 on 8 x 96 GB holds most requests as one TP=8 replica: (86.4 - 4.8 - 72.66/8) / (2.684/8)."""
        load = load_of("llama-3.1-70b")
        best = math.floor((0.9 * 96 - OVERHEAD - load.weights_gb / 8) / (8192 * 327_680 / 8 / 1e9))
        assert pergpu.node_capacity(load, 8) == best

    def test_no_layout_fits_is_none(self):
        """405B at FP8 needs more than one node's GPUs for its weights and KV: no in-node TP holds it."""
        assert pergpu.in_node_tp(load_of("llama-3.1-405b"), 8, 64) is None

    def test_deepseek_unit_for_64_x_32k(self):
        """DeepSeek-V3 FP8, 64 x 32k: 84 GB of weights + 147 GB of latent per GPU at PP=1, so 3 nodes (81.6 GB each)."""
        load = load_of("deepseek-v3", context=32768)
        per_node = load.weights_gb / 8 + 64 * 70_272 * 32768 / 1e9
        assert pergpu.unit_nodes(load, 8, 64) == math.ceil(per_node / (0.9 * 96 - OVERHEAD)) == 3

    def test_unit_capacity_is_the_budget_per_gpu(self):
        """DeepSeek-V3 FP8 at 32k on 8 x 96 GB: a 3-node unit holds the requests whose latent fits beside a third
        of the weights on each GPU, and one more request would not fit."""
        load = load_of("deepseek-v3", context=32768)
        held = pergpu.unit_capacity(load, 8, 3)
        assert held >= 1
        assert load.gpu_gb(8, 3, held) <= 0.9 * 96 < load.gpu_gb(8, 3, held + 1)

    def test_smallest_unit_holds_one_request(self):
        """405B FP8 at 128k tokens on 4 x L40: the smallest unit holds one request; a node fewer holds none."""
        load = load_of("llama-3.1-405b", context=131072, gpu="l40")
        nodes = pergpu.smallest_unit(load, 4)
        assert pergpu.unit_capacity(load, 4, nodes) >= 1 and pergpu.unit_capacity(load, 4, nodes - 1) == 0

    def test_divisors(self):
        """A node of 8 GPUs allows TP 1, 2, 4, 8; of 6 GPUs 1, 2, 3, 6."""
        assert pergpu.divisors(8) == [1, 2, 4, 8] and pergpu.divisors(6) == [1, 2, 3, 6]


class TestTraining:
    """Per-GPU training state (DeepSpeed's ZeRO-3 estimator plus each GPU's share of the activations)."""

    @pytest.mark.parametrize("gpu,nodes", [("rtx-pro-6000", 2), ("l40", 5), ("rtx-5090", 7)])
    def test_70b_full_finetune_nodes(self, gpu, nodes):
        """18 B x 70.6B / (8 x nodes) + 4 B x 1.05B gathered + one 8k sequence's checkpointed activations (each of 80
        layers' inputs, 2 B x 8192 x 8192, plus one layer recomputed, 34 B x 8192 x 8192: Korthikanti et al. 2022),
        split 8 ways by TP inside each node over nodes, <= 90% of the card, at the fewest nodes."""
        model = K.model("llama-3.1-70b")
        limit = 0.9 * K.gpu(gpu).memory_gb
        load = pergpu.laid_out(pergpu.training_load("full-finetune", model, C, 8192), limit, C["training"])
        activations = (80 * 2 + 34) * 8192 * 8192 / 1e9
        assert load.checkpointing and load.tokens_gb == pytest.approx(activations, rel=1e-6)
        per_gpu = lambda n: 18 * model.params_b / (8 * n) + 4 * 1.0507 + activations / 8  # noqa: E731
        assert per_gpu(nodes) <= limit < per_gpu(nodes - 1)
        assert pergpu.training_nodes(load, 8, limit) == nodes

    def test_fsdp_formula(self):
        """Sharded: states / GPUs + the gathered module + each GPU's own sequence; unsharded: all states + its
        sequence (every data-parallel GPU holds the activations of its own micro-batch)."""
        load = pergpu.TrainingLoad(states_gb=800, tokens_gb=80, gathered_gb=4)
        assert load.gpu_gb(16, pergpu.SHARDED) == pytest.approx(800 / 16 + 4 + 80)
        assert load.gpu_gb(16, pergpu.REPLICATED) == pytest.approx(800 + 80)

    def test_small_lora_is_replicated_and_70b_lora_is_sharded(self):
        """8B LoRA fits every GPU whole (DDP); 70B LoRA's 141 GB BF16 base does not, so FSDP shards it."""
        limit = 0.9 * 96
        small = pergpu.training_load("lora", K.model("llama-3.1-8b"), C, 8192)
        large = pergpu.training_load("lora", K.model("llama-3.1-70b"), C, 8192)
        assert pergpu.training_sharding(small, 8, limit) == pergpu.REPLICATED
        assert pergpu.training_sharding(large, 8, limit) == pergpu.SHARDED
        assert pergpu.training_nodes(large, 8, limit) == 1

    def test_a_module_larger_than_the_card_has_no_node_count(self):
        """When the gathered module alone exceeds the per-GPU limit, no number of nodes holds the job."""
        load = pergpu.TrainingLoad(states_gb=1000, tokens_gb=10, gathered_gb=50)
        assert pergpu.training_nodes(load, 8, 40) is None

    def test_a_module_beyond_the_gathered_share_is_split_by_tp(self):
        """A gathered module over gathered_share_max of the limit is capped there (TP splits it); a small one stays."""
        share = C["training"]["gathered_share_max"]
        huge = pergpu.TrainingLoad(states_gb=1000, tokens_gb=10, gathered_gb=50)
        small = pergpu.TrainingLoad(states_gb=1000, tokens_gb=10, gathered_gb=4)
        assert pergpu.laid_out(huge, 40, C["training"]).gathered_gb == share * 40
        assert pergpu.laid_out(small, 40, C["training"]) == small
        assert pergpu.training_nodes(pergpu.laid_out(huge, 40, C["training"]), 8, 40) is not None

    def test_a_bigger_module_never_needs_fewer_nodes(self):
        """Node counts grow with the gathered module across the cap (no cliff where splitting buys fewer GPUs)."""
        counts = [pergpu.training_nodes(pergpu.laid_out(pergpu.TrainingLoad(1000, 10, gathered), 40, C["training"]),
                                        8, 40) for gathered in (2, 10, 19, 20, 21, 39, 60)]
        assert counts == sorted(counts)


class TestAnswers:
    """The per-GPU layout as the whole pipeline answers it."""

    def test_multi_node_training_is_tp_by_pp_without_fsdp_at_one_replica(self):
        """70B full fine-tuning (asked on L40, built on the card the search picks) is TP inside each node and PP
        across them, one replica: the plan names no FSDP with dp = 1, and each GPU stays within the card."""
        answer = EXPERT.recommend({"task": "full-finetune", "model": "llama-3.1-70b", "gpu": "l40"})
        parallelism = answer.recommendation.parallelism
        assert parallelism.sharding is None and (parallelism.dp or 1) == 1
        assert parallelism.tp * parallelism.pp == answer.recommendation.nodes * answer.recommendation.gpus_per_node
        assert answer.recommendation.nodes == answer.figures["training_nodes"].value >= 2
        assert answer.figures["plan_gpu_memory_fraction"].value <= 0.9

    def test_lora_70b_names_fsdp_on_one_node(self):
        """70B LoRA's 141 GB BF16 base cannot sit whole on a 96 GB card: the one-node plan names FSDP."""
        answer = EXPERT.recommend({"task": "lora", "model": "llama-3.1-70b"})
        assert (answer.recommendation.nodes, answer.recommendation.parallelism.sharding) == (1, "fsdp")

    def test_8b_lora_keeps_every_gpu_whole(self):
        """8B LoRA fits each 96 GB GPU whole: the plan names no sharding (DDP)."""
        answer = EXPERT.recommend({"task": "lora", "model": "llama-3.1-8b", "gpu": "rtx-pro-6000"})
        assert answer.recommendation.parallelism.sharding is None
        assert answer.figures["training_sharding"].value == pergpu.REPLICATED

    def test_replicas_kept_when_users_need_their_speed(self):
        """70B for 256 interactive users: enough replicas that each user decodes at 25 tokens/s, no warning."""
        answer = EXPERT.recommend({"task": "inference", "model": "llama-3.1-70b", "concurrency": 256,
                                   "context_tokens": 4096, "latency": "interactive"})
        assert answer.recommendation.nodes >= answer.figures["latency_nodes_fp8"].value
        assert answer.figures["per_user_tokens_per_s"].value >= 25
        assert "decode-speed-below-target" not in {w.code for w in answer.warnings}

    def test_no_build_that_gives_the_speed_warns_with_the_closest_builds_figure(self):
        """405B at FP8 for 32 interactive users: no Kentino build gives each 25 tokens/s, so the answer is frontier
        work and the warning quotes the closest build's own per-user speed."""
        answer = EXPERT.recommend({"task": "inference", "model": "llama-3.1-405b", "concurrency": 32,
                                   "latency": "interactive"})
        warning = next(w for w in answer.warnings if w.code == "decode-speed-below-target")
        assert answer.recommendation.kind == "frontier"
        per_user = answer.figures["per_user_tokens_per_s"].value
        assert per_user < 25 and f"{per_user:,.1f} tokens/s" in warning.message

    def test_one_user_bound_by_bandwidth_moves_the_build(self):
        """70B INT4 on a 4 x L4 node for one interactive user: the node reads ~37 GB of 4-bit weights per token at
        80% of 4 x 300 GB/s, so under 26 tokens/s before its all-reduces, under 25 however few users share it: the
        named build fails the per-user test, is listed with that figure, and the answer moves to a card that works."""
        answer = EXPERT.recommend({"task": "inference", "model": "llama-3.1-70b", "gpu": "l4", "gpus_per_node": 4,
                                   "concurrency": 1, "context_tokens": 2048, "latency": "interactive"})
        named = next(a for a in answer.alternatives if a.gpu == "l4" and a.gpus_per_node == 4)
        bound = 4 * 300 * 0.8 / answer.figures["weights_gb_int4"].value
        assert named.fails == "meets-the-per-user-speed" and not named.works
        assert 10 < named.figures["per_user_tokens_per_s"] < min(25, bound)
        assert answer.recommendation.gpu != "l4" and "card-switch" in {w.code for w in answer.warnings}


class TestPlanFigures:
    """The recommended plan's busiest GPU and per-user decode speed."""

    FACTS = {"task": "inference", "concurrency": 48, "context_tokens": 8192, "latency": "production",
             "prompt_tokens": 1024, "output_tokens": 294}

    def test_single_node_replicas_inside_the_node(self):
        """70B FP8 at TP=2 x DP=4: each pair holds 12 of 48 requests; each user decodes at the serving model's speed
        of a TP=2 pair holding 12, under the pair's bandwidth bound (2 x 1,597 GB/s x 80% over 70.6 GB of FP8
        weights read per step)."""
        plan = {"kind": "single-node", "precision": "fp8", "nodes": 1, "tp": 2, "dp": 4, "gpu": "rtx-pro-6000",
                "gpus_per_node": 8}
        figures = plan_figures(plan, self.FACTS, K.model("llama-3.1-70b"), K, PARAMS)
        load = load_of("llama-3.1-70b")
        assert figures["plan_gpu_memory_gb"].value == pytest.approx(load.gpu_gb(2, 1, 12), rel=1e-5)
        assert figures["plan_gpu_memory_fraction"].value == pytest.approx(load.gpu_gb(2, 1, 12) / 96, rel=1e-5)
        unit = physics.make_unit(K.model("llama-3.1-70b"), K.gpu("rtx-pro-6000"), "fp8", "bf16", 2, 1, C, ENGINE,
                                 K.link("pcie-gen5-p2p"))
        point = physics.steady_state(unit, 12, 1024, 294, ENGINE)
        assert figures["per_user_tokens_per_s"].value == pytest.approx(point.per_user_tokens_per_s, rel=1e-5)
        assert figures["per_user_tokens_per_s"].value < 2 * 1597 * 0.8 / 70.6
        assert figures["output_tokens_per_s"].value == pytest.approx(4 * point.output_tokens_per_s, rel=1e-5)

    def test_multi_node_unit(self):
        """DeepSeek-V3 on a 3-node TP=8 x PP=3 unit: weights / 24 + 64 requests' latent over 3 stages + overhead."""
        facts = {"task": "inference", "concurrency": 64, "context_tokens": 32768, "latency": "interactive"}
        plan = {"kind": "multi-node-ib", "precision": "fp8", "nodes": 3, "tp": 8, "pp": 3, "gpu": "rtx-pro-6000",
                "gpus_per_node": 8}
        figures = plan_figures(plan, facts, K.model("deepseek-v3"), K, PARAMS)
        load = load_of("deepseek-v3", context=32768)
        expected = load.weights_gb / 24 + 64 * 70_272 / 3 * 32768 / 1e9 + OVERHEAD
        assert figures["plan_gpu_memory_gb"].value == pytest.approx(expected, rel=1e-5)
        assert figures["plan_gpu_memory_fraction"].value <= 0.9

    def test_training_plan_over_its_nodes(self):
        """70B full fine-tuning on 3 nodes, TP 8 x PP 3: 1,270.8 GB of states / 24 + the 4.2 GB gathered module +
        one sequence's checkpointed activations split 8 ways by TP (sequence parallel)."""
        plan = {"kind": "multi-node-ib", "precision": "bf16", "nodes": 3, "tp": 8, "pp": 3, "gpu": "rtx-pro-6000",
                "gpus_per_node": 8}
        figures = plan_figures(plan, {"task": "full-finetune"}, K.model("llama-3.1-70b"), K, PARAMS)
        load = pergpu.laid_out(pergpu.training_load("full-finetune", K.model("llama-3.1-70b"), C, 8192), 0.9 * 96,
                               C["training"])
        expected = load.states_gb / 24 + load.gathered_gb + load.tokens_gb / 8
        assert figures["plan_gpu_memory_gb"].value == pytest.approx(expected, rel=1e-5)
        assert "per_user_tokens_per_s" not in figures

    def test_lora_switched_to_qlora_is_sized_as_qlora(self):
        """A LoRA job the rules answered at INT4 is a QLoRA plan: its GPUs hold the NF4 base."""
        plan = {"kind": "single-node", "precision": "int4", "nodes": 1, "tp": 1, "dp": 8, "sharding": "fsdp",
                "gpu": "rtx-pro-6000", "gpus_per_node": 8}
        figures = plan_figures(plan, {"task": "lora"}, K.model("llama-3.1-405b"), K, PARAMS)
        qlora = pergpu.laid_out(pergpu.training_load("qlora", K.model("llama-3.1-405b"), C, 8192), 0.9 * 96,
                                C["training"])
        assert figures["plan_gpu_memory_gb"].value == pytest.approx(qlora.gpu_gb(8, pergpu.SHARDED), rel=1e-5)

    def test_no_model_no_plan_figures(self):
        """Without a model (size unknown) the plan has no per-GPU figures."""
        plan = {"kind": "single-node", "precision": "fp8", "nodes": 1, "gpu": "rtx-pro-6000", "gpus_per_node": 8}
        assert plan_figures(plan, self.FACTS, None, K, PARAMS) == {}
