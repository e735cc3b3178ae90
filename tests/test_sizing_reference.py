"""Sizing figures per catalog model against independent formulas, each within 5%.

The expected numbers were computed outside the project (issue 11 research, a separate calculator working
from each model's config.json) with the formulas and sources below; they are copied here so the test reads
nothing outside the repository. Columns (GB = 1e9 bytes):

- bf16, fp8, int4: weight memory. BF16 = 2 B x all parameters. FP8 = 1 B per weight of the linear layers
  inside the decoder blocks + 2 B for the rest (embedding, LM head, norms, routers): RedHatAI
  Meta-Llama-3.1-70B-Instruct-FP8 card ("only the linear operators within transformers blocks are
  quantized"). INT4 = AWQ group 128, 0.5 + (2 + 0.5) / 128 B per quantised weight (vLLM AWQLinearMethod:
  int4 weights, fp16 scales, 4-bit zeros per group), the rest BF16; for gpt-oss the native checkpoint,
  MXFP4 (4.25 bits) on the routed experts and BF16 elsewhere (gpt-oss model card, arXiv 2508.10925: 60.8 /
  12.8 GiB).
- kv: KV bytes per token, BF16, all layers: 2 x layers x kv_heads x head_dim x 2 B (GQA); layers x
  (kv_lora_rank + qk_rope_head_dim) x 2 B (MLA; vLLM's MLA cache).
- lora_m: LoRA rank 16 trainable parameters (millions) on every linear layer of the decoder blocks, experts
  included, routers and LM head not: r x (in + out) per layer (Hu et al., arXiv 2106.09685, sec. 4.1).
- qlora: single-job QLoRA state at 8,192 tokens: NF4 base with double quantisation ((4 + 8/64 +
  32/16384) / 8 B per weight; Dettmers et al., arXiv 2305.14314, sec. 3) + adapters x 16 B (mixed-precision
  Adam) + logits vocab x 8,192 x 6 B (BF16 logits and the FP32 copy of transformers' ForCausalLMLoss) +
  checkpointed activations 2 B x hidden x layers x 8,192.
- zero3: ZeRO-3 model states per GPU over 8 GPUs, no offload: 18 x params / 8 + 4 x the largest module's
  parameters (DeepSpeed deepspeed/runtime/zero/stage3.py, estimate_zero3_model_states_mem_needs), each
  expert's linear layers counted as their own modules.

Where the catalog's published total differs from the config arithmetic (Kimi K2 "1T" vs 1,026.4B; Llama 4
Scout's 109B with the vision encoder vs 107.8B of text model) the deviation shows it, within 5%.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kentino_expert.domain import architecture, pergpu, sizing
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.domain.figures_serving import serving_load

K = load_knowledge(Path(__file__).resolve().parent.parent / "knowledge")
C = K.sizing
TOLERANCE = 0.05

# model: (bf16 GB, fp8 GB, int4 GB, kv B/token, LoRA r16 M params, QLoRA state GB, ZeRO-3 GB/GPU at 8 GPUs)
EXPECTED = {
    "llama-3.1-8b": (16.06, 9.08, 5.73, 131_072, 41.9, 14.82, 20.2),
    "llama-3.1-70b": (141.11, 72.66, 39.77, 327_680, 207.1, 59.87, 162.9),
    "llama-3.1-405b": (811.71, 410.06, 217.08, 516_096, 623.4, 265.71, 921.6),
    "llama-3.3-70b": (141.11, 72.66, 39.77, 327_680, 207.1, 59.87, 162.9),
    "qwen2.5-7b": (15.23, 8.71, 5.57, 57_344, 40.4, 15.31, 19.3),
    "qwen2.5-14b": (29.54, 16.33, 9.98, 196_608, 68.8, 22.53, 36.3),
    "qwen2.5-32b": (65.53, 34.32, 19.33, 262_144, 134.2, 34.20, 76.8),
    "qwen2.5-72b": (145.41, 75.20, 41.46, 327_680, 210.5, 62.79, 168.6),
    "mistral-7b": (14.50, 7.52, 4.16, 131_072, 41.9, 8.57, 16.8),
    "mixtral-8x7b": (93.41, 46.97, 24.65, 131_072, 240.1, 32.05, 105.6),
    "gemma-2-27b": (54.45, 28.41, 15.89, 376_832, 114.2, 33.68, 66.0),
    "deepseek-v3": (1342.05, 672.99, 351.52, 70_272, 6694.6, 469.70, 1513.5),
    "deepseek-r1": (1342.05, 672.99, 351.52, 70_272, 6694.6, 469.70, 1513.5),
    "deepseek-v3.1": (1342.05, 672.99, 351.52, 70_272, 6694.6, 469.70, 1513.5),
    "kimi-k2": (2052.82, 1028.92, 536.97, 70_272, 10281.0, 712.94, 2314.1),
    "llama-4-scout": (215.54, 109.84, 59.06, 196_608, 546.6, 81.38, 246.6),
    "llama-4-maverick": (801.42, 402.80, 211.27, 196_608, 2028.2, 256.22, 905.7),
    "qwen3-235b-a22b": (470.19, 236.39, 124.06, 192_512, 3303.5, 189.83, 531.4),
    "qwen3-30b-a3b": (61.06, 31.17, 16.80, 98_304, 843.8, 39.27, 69.9),
    "gpt-oss-120b": (233.66, 118.04, 65.25, 73_728, 1286.0, 94.23, 265.2),
    "gpt-oss-20b": (41.83, 22.08, 13.76, 49_152, 220.3, 27.06, 49.4),
    # the models the published measurements need (knowledge/measurements.yaml): the same formulas, computed by a
    # separate calculator from the config.json values models.yaml cites (it reproduces the rows above exactly)
    "llama-2-70b": (137.95, 69.50, 36.61, 327_680, 207.1, 51.99, 156.2),
    "llama-2-7b": (13.48, 7.00, 3.89, 524_288, 40.0, 8.23, 15.7),
    "qwen3-32b": (65.52, 34.32, 19.33, 262_144, 134.2, 34.20, 76.8),
    "glm-4.5-air": (213.70, 108.12, 57.39, 188_416, 1566.0, 92.59, 242.9),
    "glm-4.6": (705.60, 354.42, 185.70, 376_832, 4649.8, 273.98, 796.9),
}
COLUMNS = ("bf16", "fp8", "int4", "kv", "lora_m", "qlora", "zero3")


def project_figures(model_id: str) -> tuple:
    """The project's figures for one model, in the table's columns."""
    model = K.model(model_id)
    full = pergpu.training_load("full-finetune", model, C, 8192)
    return (sizing.weights_gb(model, "bf16", C), sizing.weights_gb(model, "fp8", C),
            sizing.weights_gb(model, "int4", C), sizing.kv_cache_bytes_per_token(model, C["kv_cache_bytes"]),
            architecture.lora_trainable_params(model, C["training"]["lora_rank"]) / 1e6,
            pergpu.training_load("qlora", model, C, 8192).total_gb, full.states_gb / 8 + full.gathered_gb)


def test_the_table_covers_the_catalog():
    """Every catalog model has a row, so a new entry cannot skip the check."""
    assert set(EXPECTED) == set(K.models)


@pytest.mark.parametrize("model_id", sorted(EXPECTED))
@pytest.mark.parametrize("column", range(len(COLUMNS)), ids=COLUMNS)
def test_figure_within_five_percent_of_the_independent_formula(model_id, column):
    """The project's figure is within 5% of the independent value for this model and column."""
    expected = EXPECTED[model_id][column]
    actual = project_figures(model_id)[column]
    assert actual == pytest.approx(expected, rel=TOLERANCE), f"{model_id} {COLUMNS[column]}: {actual} vs {expected}"


# KV replication under vLLM's per-rank rule at TP=8 (formulas: max(1, kv_heads // tp) heads per rank; the MLA
# latent on every rank): Qwen2.5-7B and both Qwen3 MoE have 4 KV heads, DeepSeek and Kimi use MLA.
REPLICATION_AT_TP8 = {"qwen2.5-7b": 2, "qwen3-235b-a22b": 2, "qwen3-30b-a3b": 2, "deepseek-v3": 8, "kimi-k2": 8,
                      "llama-3.1-70b": 1, "gemma-2-27b": 1, "gpt-oss-120b": 1}


@pytest.mark.parametrize("model_id,expected", sorted(REPLICATION_AT_TP8.items()))
def test_kv_replication_at_tp8(model_id, expected):
    """Eight ranks together keep `expected` times the model's KV cache (vLLM get_num_kv_heads)."""
    model = K.model(model_id)
    per_rank = pergpu.kv_rank_bytes_per_token(model, 2.0, 8)
    assert 8 * per_rank / sizing.kv_cache_bytes_per_token(model, 2.0) == pytest.approx(expected)


# KV GB of 32 requests x 8,192 tokens, local layers at min(context, window) (formulas (e), table 3)
KV_32X8K = {"gemma-2-27b": 74.09, "llama-4-scout": 51.54, "gpt-oss-120b": 9.81, "gpt-oss-20b": 6.54,
            "deepseek-v3": 18.42, "qwen3-235b-a22b": 50.47, "llama-3.1-70b": 85.90}


@pytest.mark.parametrize("model_id,expected", sorted(KV_32X8K.items()))
def test_kv_cache_with_local_attention(model_id, expected):
    """32 x 8k of KV cache within 5% of the independent figure (sliding and chunked layers bounded)."""
    assert sizing.kv_cache_gb(K.model(model_id), 32, 8192, 2.0) == pytest.approx(expected, rel=TOLERANCE)


# Prefill tokens/s of one 8 x RTX Pro 6000 node at FP8, 2 x (active - input embedding) FLOPs per token at
# 40% MFU (Kaplan et al., arXiv 2001.08361, Table 1; formulas (g), table 7)
PREFILL = {"llama-3.1-70b": 23_021, "llama-3.1-8b": 213_193, "deepseek-v3": 43_685, "qwen3-235b-a22b": 74_182,
           "gpt-oss-120b": 311_718, "mixtral-8x7b": 125_501}


@pytest.mark.parametrize("model_id,expected", sorted(PREFILL.items()))
def test_prefill_throughput(model_id, expected):
    """One node's prompt tokens/s within 5% of the independent figure."""
    rate = sizing.prefill_tokens_per_s(K.model(model_id), K.gpu("rtx-pro-6000"), 8, "fp8", K)
    assert rate == pytest.approx(expected, rel=TOLERANCE)


# Per-user decode ceiling on one 8 x RTX Pro 6000 node at TP=8, FP8 weights, 8k context (formulas (f), table 7):
# 1 / step, step = (weights read per token + the batch's BF16 KV) / (8 x 1,597 GB/s). The independent table pools
# the node's bandwidth; the project reads per rank (vLLM), which is the same wherever TP=8 neither replicates KV
# heads nor the MLA latent - so the rows below are those models. MoE rows are at batch 1 only: at batch 32 the
# table counts the distinct experts the batch touches, the project only the active ones (knowledge/sizing.yaml).
DECODE_BATCH_1 = {"llama-3.1-8b": 1403, "llama-3.1-70b": 174, "llama-3.1-405b": 31, "qwen2.5-14b": 780,
                  "qwen2.5-72b": 169, "mistral-7b": 1535, "mixtral-8x7b": 916, "llama-4-scout": 680,
                  "llama-4-maverick": 679, "gpt-oss-120b": 2091, "gpt-oss-20b": 2899}
DECODE_BATCH_32 = {"llama-3.1-8b": 301, "llama-3.1-70b": 82, "llama-3.1-405b": 24, "qwen2.5-32b": 126,
                   "qwen2.5-72b": 81, "mistral-7b": 307, "gemma-2-27b": 128}


@pytest.mark.parametrize("batch,model_id,expected",
                         [(1, m, v) for m, v in sorted(DECODE_BATCH_1.items())]
                         + [(32, m, v) for m, v in sorted(DECODE_BATCH_32.items())])
def test_decode_ceiling_per_user(batch, model_id, expected):
    """One user's bandwidth-bound decode speed at the batch within 5% of the independent figure."""
    load = serving_load(K.model(model_id), K.gpu("rtx-pro-6000"), "fp8", 8192, K,
                        {"weights_fraction_max": 0.7, "workload_fraction_max": 0.9})
    assert load.decode_ceiling_tokens_per_s(8, 1, batch) == pytest.approx(expected, rel=TOLERANCE)


def test_replicated_kv_slows_decode_below_the_pooled_figure():
    """Qwen2.5-7B at TP=8 replicates its 4 KV heads: each rank reads twice its share, so 32 users decode well
    below the pooled 564 tokens/s (the per-rank rule matters, not only memory)."""
    load = serving_load(K.model("qwen2.5-7b"), K.gpu("rtx-pro-6000"), "fp8", 8192, K,
                        {"weights_fraction_max": 0.7, "workload_fraction_max": 0.9})
    assert load.decode_ceiling_tokens_per_s(8, 1, 32) < 0.7 * 564
