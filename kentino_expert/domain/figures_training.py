"""The training figures: the job's state and each GPU's share of it (FSDP / ZeRO-3, activation checkpointing), the
nodes that hold it, the same job as QLoRA, and its compute and time on one node at the card class's MFU."""
from __future__ import annotations

from . import pergpu, sizing
from .catalog import GpuSpec, Knowledge, ModelSpec
from .vocabulary import TRAINING_TASKS


def training_load_of(facts: dict, model: ModelSpec, gpu: GpuSpec, knowledge: Knowledge, params: dict,
                     task: str | None = None) -> pergpu.TrainingLoad | None:
    """The training job's memory as the plan lays it out, each GPU at one sequence of sequence_tokens (None for
    inference)."""
    task = task or facts.get("task")
    if task not in TRAINING_TASKS:
        return None
    limit = params["training_fraction_max"] * gpu.memory_gb
    load = pergpu.training_load(task, model, knowledge.sizing, facts.get("sequence_tokens", 8192))
    return pergpu.laid_out(load, limit, knowledge.sizing["training"])


def training_mfu(facts: dict, gpu: GpuSpec, params: dict, knowledge: Knowledge) -> float:
    """Model FLOPs utilisation on this card class: the tuned-SXM MFU of knowledge/sizing.yaml, divided on a PCIe card
    by the document's wall-clock penalty (H-SXM-PENALTY, the midpoint of its range: fine-tuning, or tensor-parallel
    pretraining of 70B+)."""
    mfu = knowledge.constant("training", "mfu")
    if gpu.form_factor != "pcie":
        return mfu
    large = facts.get("task") == "pretraining" and facts.get("params_b", 0) >= params.get("large_model_params_b", 1e9)
    low, high = (("sxm_penalty_pretrain_low", "sxm_penalty_pretrain_high") if large else
                 ("sxm_penalty_finetune_low", "sxm_penalty_finetune_high"))
    if low not in params or high not in params:
        return mfu
    return mfu / ((params[low] + params[high]) / 2)


def training_figures(values: dict, facts: dict, model: ModelSpec, gpu: GpuSpec, gpus: int, knowledge: Knowledge,
                     params: dict) -> None:
    """State, sharding, per-GPU memory and nodes of a training job, its QLoRA form for LoRA, and its time."""
    load = training_load_of(facts, model, gpu, knowledge, params)
    if load is None:
        return
    limit = params["training_fraction_max"] * gpu.memory_gb
    sharding = pergpu.training_sharding(load, gpus, limit)
    values["training_state_gb"] = load.total_gb
    values["training_state_fraction"] = load.total_gb / values["node_vram_gb"]
    values["training_sharding"] = sharding
    values["activation_checkpointing"] = load.checkpointing
    values["training_gpu_state_gb"] = load.gpu_gb(gpus, sharding)
    values["training_gpu_fraction"] = values["training_gpu_state_gb"] / gpu.memory_gb
    nodes = pergpu.training_nodes(load, gpus, limit)
    values["training_sharding_at_nodes"] = sharding if nodes == 1 else pergpu.SHARDED
    if nodes is not None:  # absent when no count of nodes holds the job (its largest module overflows a GPU)
        values["training_nodes"] = nodes
        # as training_nodes lays a multi-node job out: TP inside each node splits a sequence's activations
        values["training_gpu_state_gb_at_nodes"] = load.gpu_gb(nodes * gpus, values["training_sharding_at_nodes"],
                                                               gpus if nodes > 1 else 1)
    if facts.get("task") == "lora":  # what the same job needs as QLoRA: the rules may switch to it
        _qlora_figures(values, facts, model, gpu, gpus, knowledge, params)
    values["training_precision"] = "fp8" if facts.get("precision") == "fp8" else "bf16"
    if "training_tokens" in facts:
        _time_figures(values, facts, model, gpu, gpus, knowledge, params)


def _qlora_figures(values, facts, model, gpu, gpus, knowledge, params) -> None:
    limit = params["training_fraction_max"] * gpu.memory_gb
    qlora = training_load_of(facts, model, gpu, knowledge, params, task="qlora")
    values["qlora_state_gb"] = qlora.total_gb
    values["qlora_state_fraction"] = qlora.total_gb / values["node_vram_gb"]
    values["qlora_sharding"] = pergpu.training_sharding(qlora, gpus, limit)
    qlora_nodes = pergpu.training_nodes(qlora, gpus, limit)
    if qlora_nodes is not None:
        values["qlora_nodes"] = qlora_nodes


def _time_figures(values, facts, model, gpu, gpus, knowledge, params) -> None:
    """Compute (6 N_active D: model FLOPs, as the MFU counts them), GPU-months at the card class's MFU (faster by
    the FP8 speed-up when training in FP8), and days on one node."""
    training = knowledge.constant("training")
    flops = sizing.training_compute_flops(model.active_b, facts["training_tokens"], training["flops_per_param_token"])
    mfu = training_mfu(facts, gpu, params, knowledge)
    months = sizing.gpu_months(flops, gpu, mfu, training["seconds_per_month"])
    if values["training_precision"] == "fp8":  # FP8 matmuls on the gradient path (Transformer Engine)
        months /= training["fp8_speedup"]
    values["training_mfu"] = mfu
    values["training_compute_zflop"] = flops / 1e21
    values["training_gpu_months"] = months
    values["days_on_one_node"] = months * 30 / gpus
