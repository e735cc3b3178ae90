"""Sizing: memory, KV cache, training state, throughput, time to result and scaling, as pure functions."""
from __future__ import annotations

import math

from ..errors import EngineError
from .catalog import GpuSpec, Knowledge, ModelSpec


def weights_gb(params_b: float, precision: str, constants: dict) -> float:
    """Weight memory: parameters x bytes per weight (+ scale overhead at INT4)."""
    size = params_b * constants["precision_bytes"][precision]
    if precision == "int4":
        size *= 1 + constants["int4_overhead"]
    return size


def kv_cache_bytes_per_token(model: ModelSpec, kv_bytes: float) -> float:
    """2 * layers * kv_heads * head_dim * bytes; for MLA one latent of rank + rope dims per layer."""
    if model.mla is not None:
        return model.layers * (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * kv_bytes
    return 2 * model.layers * model.kv_heads * model.head_dim * kv_bytes


def kv_cache_gb(model: ModelSpec, concurrency: int, context_tokens: int, kv_bytes: float) -> float:
    """KV cache for `concurrency` requests each holding `context_tokens`.

    Layers with local attention (Gemma 2: every other layer, 4,096 tokens) hold at most their window.
    """
    held = context_tokens
    if model.sliding_window is not None:
        local = min(model.sliding_window.layers, model.layers) / model.layers
        held = context_tokens * (1 - local) + min(context_tokens, model.sliding_window.window) * local
    return kv_cache_bytes_per_token(model, kv_bytes) * concurrency * held / 1e9


def node_vram_gb(gpu: GpuSpec, gpus_per_node: int) -> float:
    """Usable VRAM of one node: cards x card memory."""
    return gpu.memory_gb * gpus_per_node


def activations_gb(model: ModelSpec, bytes_per_hidden: float, tokens_in_flight: int) -> float:
    """Activation memory: layers x hidden x tokens in flight x bytes per hidden element per layer."""
    return model.layers * model.hidden * tokens_in_flight * bytes_per_hidden / 1e9


def full_training_state_gb(model: ModelSpec, training: dict) -> float:
    """Mixed-precision Adam state (16 bytes/param) plus activations without recomputation."""
    states = model.params_b * training["bytes_per_param_full"]
    return states + activations_gb(model, training["activation_bytes_per_hidden_full"], training["tokens_in_flight"])


def peft_state_gb(model: ModelSpec, base_precision: str, constants: dict) -> float:
    """Frozen base (BF16 for LoRA, 4-bit for QLoRA) + trainable adapters + checkpointed activations."""
    training = constants["training"]
    base = weights_gb(model.params_b, base_precision, constants)
    adapters = model.params_b * training["lora_adapter_fraction"] * training["bytes_per_trainable_param_peft"]
    acts = activations_gb(model, training["activation_bytes_per_hidden_peft"], training["tokens_in_flight"])
    return base + adapters + acts


def training_state_gb(task: str, model: ModelSpec, constants: dict) -> float:
    """The memory a training task keeps resident, by task."""
    if task == "lora":
        return peft_state_gb(model, "bf16", constants)
    if task == "qlora":
        return peft_state_gb(model, "int4", constants)
    return full_training_state_gb(model, constants["training"])


def nodes_for(demand_gb: float, vram_gb: float, usable_fraction: float) -> int:
    """Nodes needed so that `demand_gb` stays within `usable_fraction` of each node's VRAM."""
    return max(1, math.ceil(demand_gb / (vram_gb * usable_fraction)))


def requests_per_node(weights_gb: float, kv_gb_per_request: float, budget_gb: float) -> int:
    """Concurrent requests one node holds: the KV cache that fits beside the weights in the budget."""
    if kv_gb_per_request <= 0:
        return 0
    return max(0, math.floor((budget_gb - weights_gb) / kv_gb_per_request))


def serving_tokens_per_s(model: ModelSpec, gpu: GpuSpec, gpus: int, precision: str, latency: str,
                         knowledge: Knowledge) -> float:
    """Aggregate decode tokens/s of one node, scaled from the document's 70B FP8 calibration point.

    Decode is memory-bandwidth bound: throughput scales with node bandwidth over the bytes of
    active weights read per token.
    """
    serving = knowledge.constant("serving")
    constants = knowledge.sizing
    reference_gpu = knowledge.gpu(serving["reference_gpu"])
    reference_bytes = weights_gb(serving["reference_active_params_b"], serving["reference_precision"], constants)
    speedup = serving["int4_speedup_vs_fp8"] if precision == "int4" else 1.0
    bytes_per_token = weights_gb(model.active_b, "fp8" if precision == "int4" else precision, constants)
    reference_bandwidth = reference_gpu.memory_bandwidth_gbs * serving["reference_gpus"]
    bandwidth_ratio = (gpu.memory_bandwidth_gbs * gpus) / reference_bandwidth
    per_node = serving["tokens_per_s_by_latency"][latency] * reference_bytes / bytes_per_token * bandwidth_ratio
    return per_node * speedup


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
    return ModelSpec(id=f"estimated-{params_b:g}b", name=f"a {params_b:g}B dense transformer (estimated)",
                     params_b=params_b, layers=layers, hidden=hidden, attention_heads=heads,
                     kv_heads=min(est["kv_heads"], heads), head_dim=est["head_dim"], max_context=est["max_context"],
                     source=est["source"], estimated=True)
