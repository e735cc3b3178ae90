"""Parameter counts of a model's parts from its config: embedding and head, experts, largest module, LoRA adapters.

Counts are in parameters (not billions). The catalog's `params_b` / `active_params_b` are the published
totals; the parts below come from the architecture fields (Hugging Face module shapes), so a part is never
larger than the total it is taken from.
"""
from __future__ import annotations

from .catalog import ModelSpec


def embedding_params(model: ModelSpec) -> float:
    """The input embedding matrix: vocabulary x hidden."""
    return float(model.vocab_size * model.hidden)


def embedding_and_head_params(model: ModelSpec) -> float:
    """Embedding plus LM head (one matrix when tied), capped at the model's total."""
    matrices = 1 if model.tie_word_embeddings else 2
    return min(matrices * embedding_params(model), model.params_b * 1e9)


def routed_expert_params(model: ModelSpec) -> float:
    """Every routed expert's three SwiGLU matrices (gate, up: hidden x width; down: width x hidden) in all
    MoE layers, capped at the total less embedding and head; 0 for a dense model."""
    if model.moe is None:
        return 0.0
    moe = model.moe
    experts = moe.moe_layers * moe.experts * 3 * model.hidden * moe.expert_intermediate_size
    return min(float(experts), model.params_b * 1e9 - embedding_and_head_params(model))


def largest_module_params(model: ModelSpec) -> float:
    """The biggest single module's own parameters (DeepSpeed's `largest_layer_params`): the embedding, a
    dense MLP matrix, an attention projection or one expert's matrix, whichever is largest."""
    candidates = [embedding_params(model), model.hidden * model.attention_heads * model.head_dim]
    if model.dense_layers:
        candidates.append(model.hidden * model.intermediate_size)
    if model.moe is not None:
        candidates.append(model.hidden * model.moe.expert_intermediate_size * max(1, model.moe.shared_experts))
    return float(max(candidates))


def _attention_in_out(model: ModelSpec) -> int:
    """Sum of (in + out) over one layer's attention projections."""
    h, heads = model.hidden, model.attention_heads
    mla = model.mla
    if mla is None:
        q_out, kv_out = heads * model.head_dim, model.kv_heads * model.head_dim
        return (h + q_out) + 2 * (h + kv_out) + (q_out + h)
    query_out = heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
    query = (h + mla.q_lora_rank) + (mla.q_lora_rank + query_out) if mla.q_lora_rank else h + query_out
    latent = (h + mla.kv_lora_rank + mla.qk_rope_head_dim) + (
        mla.kv_lora_rank + heads * (mla.qk_nope_head_dim + mla.v_head_dim))
    return query + latent + (heads * mla.v_head_dim + h)


def _mlp_in_out(hidden: int, width: int) -> int:
    """Sum of (in + out) over one SwiGLU MLP: gate and up (hidden -> width), down (width -> hidden)."""
    return 2 * (hidden + width) + (width + hidden)


def lora_trainable_params(model: ModelSpec, rank: int) -> float:
    """LoRA of rank r on every linear layer of the decoder blocks: r x (in + out) per layer (Hu et al. 2021),
    routed and shared experts included, router gates and the LM head not."""
    per_layer_attention = _attention_in_out(model)
    total = model.layers * per_layer_attention
    total += model.dense_layers * _mlp_in_out(model.hidden, model.intermediate_size)
    if model.moe is not None:
        moe = model.moe
        expert = _mlp_in_out(model.hidden, moe.expert_intermediate_size)
        shared_width = moe.expert_intermediate_size * moe.shared_experts
        shared = _mlp_in_out(model.hidden, shared_width) if moe.shared_experts else 0
        total += moe.moe_layers * (moe.experts * expert + shared)
    return float(rank * total)
