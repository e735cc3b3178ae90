"""The recommended plan's own figures, computed once the rules have decided it: the memory of its busiest GPU
and, for inference, the decode speed each user sees. The one place a plan's precision, kind, nodes and
parallelism select the sizing that describes it."""
from __future__ import annotations

import math
from collections.abc import Mapping

from . import pergpu, sizing
from .catalog import Knowledge, ModelSpec
from .figure_specs import PLAN_FIGURE_SPECS
from .figures import checked_figure
from .figures_serving import serving_load
from .vocabulary import INFERENCE_TASKS, TRAINING_TASKS

UNIT_KINDS = ("multi-node-ib", "frontier")  # one TP x PP unit over all of the plan's nodes


def plan_figures(plan: Mapping, facts: Mapping, model: ModelSpec | None, knowledge: Knowledge,
                 params: Mapping) -> dict:
    """{name: Figure} of the plan (kind, precision, nodes, replicas, tp, pp, sharding, gpu, gpus_per_node);
    empty when the model, the card or the node size is unknown, or the plan names no precision."""
    if model is None or not plan.get("gpu") or not plan.get("gpus_per_node") or not plan.get("precision"):
        return {}
    gpu = knowledge.gpu(plan["gpu"])
    values = {}
    if facts.get("task") in TRAINING_TASKS:
        parts = _training_gpu_parts(plan, facts, model, gpu, knowledge, params)
        values.update({f"plan_gpu_{part}_gb": gb for part, gb in parts.items()})
        values["plan_gpu_memory_gb"] = sum(parts.values())
    elif facts.get("task") in INFERENCE_TASKS and "concurrency" in facts and "context_tokens" in facts:
        values.update(_serving_figures(plan, facts, model, gpu, knowledge, params))
    if "plan_gpu_memory_gb" in values:
        values["plan_gpu_memory_fraction"] = values["plan_gpu_memory_gb"] / gpu.memory_gb
    return {name: checked_figure(name, value, PLAN_FIGURE_SPECS) for name, value in values.items()}


def _count(plan: Mapping, field: str, default: int) -> int:
    value = plan.get(field)
    return max(1, int(value)) if value else default


def _training_gpu_parts(plan, facts, model, gpu, knowledge, params) -> dict:
    """Each GPU's state over all of the plan's GPUs: unsharded when the plan says so (or it fits unsharded),
    else the FSDP / ZeRO-3 formula (also the bound for a TP x PP split of the same states)."""
    task = facts["task"]
    if task == "lora" and plan["precision"] == "int4":
        task = "qlora"  # the rules switched a LoRA job to QLoRA
    limit = params["training_fraction_max"] * gpu.memory_gb
    load = pergpu.laid_out(pergpu.training_load(task, model, knowledge.sizing), limit, knowledge.sizing["training"])
    gpus = _count(plan, "nodes", 1) * int(plan["gpus_per_node"])
    sharding = plan.get("sharding") or pergpu.training_sharding(load, gpus, limit)
    return load.gpu_parts(gpus, sharding)


def _serving_figures(plan, facts, model, gpu, knowledge, params) -> dict:
    """The busiest GPU of a replica (or TP x PP unit) at its share of the requests, and the decode speed of
    the plan's nodes shared by every concurrent request."""
    gpus, nodes = int(plan["gpus_per_node"]), _count(plan, "nodes", 1)
    # a plan over nodes that names no PP is TP x PP units of `unit_nodes` (the scale-out unit), or one unit
    pp = _count(plan, "pp", min(nodes, _count(plan, "unit_nodes", nodes)) if plan.get("kind") in UNIT_KINDS else 1)
    units = _count(plan, "replicas", max(1, nodes // pp))
    tp = min(_count(plan, "tp", gpus), gpus)
    load = serving_load(model, gpu, plan["precision"], facts["context_tokens"], knowledge, params)
    per_unit = math.ceil(facts["concurrency"] / units)
    per_group = per_unit if pp > 1 else math.ceil(per_unit / max(1, gpus // tp))
    parts = load.gpu_parts(tp, pp, per_group)
    out = {f"plan_gpu_{part}_gb": gb for part, gb in parts.items()}
    out["plan_gpu_memory_gb"] = sum(parts.values())
    if "latency" in facts:
        decode = sizing.serving_tokens_per_s(model, gpu, gpus, plan["precision"], facts["latency"], knowledge)
        ceiling = load.decode_ceiling_tokens_per_s(tp, pp, per_group)
        out["per_user_tokens_per_s"] = min(nodes * decode / facts["concurrency"], ceiling)
    return out
