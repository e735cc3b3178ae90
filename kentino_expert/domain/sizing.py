"""Sizing: memory, KV cache, training state, throughput, time to result and scaling, as pure functions."""
from __future__ import annotations

import math

from ..errors import EngineError
from . import architecture
from .catalog import GpuSpec, Knowledge, ModelSpec


def _bytes(constants: dict, precision: str) -> float:
    return constants["precision_bytes"][precision]


def weights_gb(model: ModelSpec, precision: str, constants: dict) -> float:
    """Weight memory at a precision: the decoder blocks' linear layers at its bytes per weight, the embedding
    and LM head in BF16 (as FP8 and AWQ checkpoints keep them); a native MXFP4 checkpoint is its INT4 and FP4."""
    total = model.params_b * 1e9
    native = model.native_precision
    if precision in ("int4", "fp4") and native is not None and native.format == "mxfp4" \
            and native.scope == "routed-experts":
        experts = architecture.routed_expert_params(model)
        size = experts * constants["native_format_bytes"]["mxfp4"] + (total - experts) * constants["unquantised_bytes"]
    elif precision == "bf16":
        size = total * _bytes(constants, "bf16")
    else:
        kept = architecture.embedding_and_head_params(model)
        size = (total - kept) * _bytes(constants, precision) + kept * constants["unquantised_bytes"]
    return size / constants["gb"]


def qlora_base_gb(model: ModelSpec, constants: dict) -> float:
    """QLoRA's frozen base: NF4 with double quantisation on the linear layers, embedding and head in BF16."""
    kept = architecture.embedding_and_head_params(model)
    linear = model.params_b * 1e9 - kept
    return (linear * constants["qlora_base_bytes"] + kept * constants["unquantised_bytes"]) / constants["gb"]


def decode_bytes_gb(model: ModelSpec, precision: str, constants: dict) -> float:
    """Weights one decode step reads per token: the active linear weights at the precision and the LM head
    matrix in BF16 (the input embedding is read one row per token)."""
    head = architecture.embedding_params(model)
    linear = max(0.0, model.active_b * 1e9 - architecture.embedding_and_head_params(model))
    return (linear * _bytes(constants, precision) + head * constants["unquantised_bytes"]) / constants["gb"]


def kv_cache_bytes_per_token(model: ModelSpec, kv_bytes: float) -> float:
    """2 * layers * kv_heads * head_dim * bytes; for MLA one latent of rank + rope dims per layer."""
    if model.mla is not None:
        return model.layers * (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * kv_bytes
    return 2 * model.layers * model.kv_heads * model.head_dim * kv_bytes


def held_tokens(model: ModelSpec, context_tokens: int) -> float:
    """Tokens a request's KV cache holds per layer on average: layers with local attention (sliding or chunked)
    hold at most their window (an upper bound for chunks), the others the whole context."""
    if model.local_attention is None:
        return float(context_tokens)
    local = min(model.local_attention.layers, model.layers) / model.layers
    return context_tokens * (1 - local) + min(context_tokens, model.local_attention.window) * local


def kv_cache_gb(model: ModelSpec, concurrency: int, context_tokens: int, kv_bytes: float) -> float:
    """KV cache for `concurrency` requests each holding `context_tokens` (no TP replication)."""
    return kv_cache_bytes_per_token(model, kv_bytes) * concurrency * held_tokens(model, context_tokens) / 1e9


def node_vram_gb(gpu: GpuSpec, gpus_per_node: int) -> float:
    """Usable VRAM of one node: cards x card memory."""
    return gpu.memory_gb * gpus_per_node


def activations_gb(model: ModelSpec, bytes_per_hidden: float, tokens_in_flight: float) -> float:
    """Activation memory: layers x hidden x tokens in flight x bytes per hidden element per layer."""
    return model.layers * model.hidden * tokens_in_flight * bytes_per_hidden / 1e9


def logits_gb(model: ModelSpec, training: dict, tokens: float) -> float:
    """The logits buffer of the tokens in flight: vocabulary x tokens x (BF16 logits + their FP32 copy)."""
    return model.vocab_size * tokens * training["logits_bytes_per_vocab_token"] / 1e9


def lora_adapter_gb(model: ModelSpec, training: dict) -> float:
    """Trainable adapters at the LoRA rank, in mixed-precision Adam."""
    params = architecture.lora_trainable_params(model, training["lora_rank"])
    return params * training["bytes_per_trainable_param_peft"] / 1e9


def serving_tokens_per_s(model: ModelSpec, gpu: GpuSpec, gpus: int, precision: str, latency: str,
                         knowledge: Knowledge) -> float:
    """Aggregate decode tokens/s of one node, scaled from the document's 70B FP8 calibration point.

    Decode is memory-bandwidth bound: throughput scales with node bandwidth over the bytes of weights
    read per generated token (decode_bytes_gb); INT4 (W4A16) reads like FP8 times its speed-up.
    """
    serving = knowledge.constant("serving")
    constants = knowledge.sizing
    reference_gpu = knowledge.gpu(serving["reference_gpu"])
    reference_model = knowledge.model(serving["reference_model"])
    reference_bytes = decode_bytes_gb(reference_model, serving["reference_precision"], constants)
    speedup = serving["int4_speedup_vs_fp8"] if precision == "int4" else 1.0
    bytes_per_token = decode_bytes_gb(model, "fp8" if precision == "int4" else precision, constants)
    reference_bandwidth = reference_gpu.memory_bandwidth_gbs * serving["reference_gpus"]
    bandwidth_ratio = (gpu.memory_bandwidth_gbs * gpus) / reference_bandwidth
    per_node = serving["tokens_per_s_by_latency"][latency] * reference_bytes / bytes_per_token * bandwidth_ratio
    return per_node * speedup


def prefill_tokens_per_s(model: ModelSpec, gpu: GpuSpec, gpus: int, precision: str, knowledge: Knowledge) -> float:
    """Prompt tokens/s of one node: compute bound, 2 x active parameters (the input embedding is a lookup)
    FLOPs per token at the card's dense peak for the precision (FP8 weights run FP8 matmuls; INT4 W4A16 and
    BF16 run BF16) x the prefill MFU."""
    serving = knowledge.constant("serving")
    peak_tflops = gpu.fp8_dense_tflops if precision == "fp8" else gpu.bf16_dense_tflops
    active = model.active_b * 1e9
    lookup = 0.0 if model.tie_word_embeddings else architecture.embedding_params(model)  # a lookup, no matmul
    flops_per_token = serving["prefill_flops_per_param_token"] * (active - lookup if active > lookup else active)
    return gpus * peak_tflops * 1e12 * serving["prefill_mfu"] / flops_per_token


def corpus_tokens_per_s(decode_rate: float, prefill_rate: float, generated_share: float) -> float:
    """Corpus tokens/s of one node when `generated_share` of them are generated (decode speed) and the rest
    are prompt tokens (prefill speed): the harmonic blend."""
    return 1 / (generated_share / decode_rate + (1 - generated_share) / prefill_rate)


def replicas_needed(demand_tokens_per_s: float | None, per_node_tokens_per_s: float) -> int:
    """Single-node replicas needed to sustain the demand (1 when no demand is stated)."""
    if not demand_tokens_per_s:
        return 1
    replicas = demand_tokens_per_s / per_node_tokens_per_s
    if not math.isfinite(replicas):
        raise EngineError(f"the demand of {demand_tokens_per_s:g} tokens/s cannot be sized: check the throughput facts")
    return max(1, math.ceil(replicas))


def training_compute_flops(params_b: float, tokens: float, flops_per_param_token: float) -> float:
    """Training compute ~ 6 N D, N the parameters each token passes through (the active ones of an MoE)."""
    return flops_per_param_token * params_b * 1e9 * tokens


def gpu_months(flops: float, gpu: GpuSpec, mfu: float, seconds_per_month: float) -> float:
    """GPU-months of the card at the stated utilisation (dense BF16 peak x MFU)."""
    return flops / (gpu.bf16_dense_tflops * 1e12 * mfu) / seconds_per_month


def estimated_model(params_b: float, constants: dict) -> ModelSpec:
    """A dense Llama-style architecture for a model known only by its size."""
    est = constants["estimation"]
    hidden = (params_b * 1e9 * est["hidden_per_layer"] / est["params_per_layer_hidden2"]) ** (1 / 3)
    hidden = max(est["head_dim"], int(round(hidden / est["head_dim"])) * est["head_dim"])
    layers = max(1, round(hidden / est["hidden_per_layer"]))
    heads = max(1, hidden // est["head_dim"])
    intermediate = max(1, round(hidden * est["intermediate_per_hidden"]))
    return ModelSpec(id=f"estimated-{params_b:g}b", name=f"a {params_b:g}B dense transformer (estimated)",
                     params_b=params_b, layers=layers, hidden=hidden, attention_heads=heads,
                     kv_heads=min(est["kv_heads"], heads), head_dim=est["head_dim"], max_context=est["max_context"],
                     vocab_size=est["vocab_size"], intermediate_size=intermediate, source=est["source"],
                     estimated=True)
