"""The figures of a decided plan (the recommendation, and every build the search weighs): the memory of its busiest
GPU; for serving its throughput, each user's speed, the first token's time and the requests in flight (the serving
model at the plan's own layout and share of the demand); for training and batch work its time to result and, for
training, its efficiency. The one place a plan's precision, kind, nodes and parallelism select the sizing that
describes it."""
from __future__ import annotations

import math
from collections.abc import Mapping

from . import pergpu, serving_lane
from . import serving_model as physics
from .catalog import Knowledge, ModelSpec
from .deadlines import time_figures
from .figure_specs import PLAN_FIGURE_SPECS
from .figures import plan_figures_checked
from .figures_serving import document_quote, serving_load
from .figures_training import training_load_of
from .sizing import estimated_model
from .state import recommendation_key, whole_count
from .vocabulary import INFERENCE_TASKS, TRAINING_TASKS

UNIT_KINDS = ("multi-node-ib", "frontier")  # one TP x PP unit over all of the plan's nodes
_FIELDS = ("kind", "precision", "nodes", "replicas", "tp", "pp", "dp", "sharding", "interconnect", "gpu",
           "gpus_per_node")


def plan_of_state(state: Mapping) -> dict:
    """The plan a final state recommends (its recommended_* fields, the facts' card and shape where it names
    none), with the scale-out unit the rules sized for a plan over nodes that names no PP."""
    plan = {field: state.get(recommendation_key(field)) for field in _FIELDS}
    plan["gpu"] = plan["gpu"] or state.get("gpu")
    plan["gpus_per_node"] = plan["gpus_per_node"] or state.get("gpus_per_node")
    plan["unit_nodes"] = state.get("scale_out_nodes")
    return plan


def model_of(state: Mapping, knowledge: Knowledge) -> ModelSpec | None:
    """The state's model: the catalog's, or the estimate of a model known by its size."""
    if state.get("model"):
        return knowledge.model(state["model"])
    if state.get("params_b"):
        return estimated_model(state["params_b"], knowledge.sizing)
    return None


def build_figures(state: Mapping, knowledge: Knowledge, params: Mapping) -> dict:
    """name -> value of the plan figures of a final state (PLAN_FIGURE_SPECS and time_to_result_days)."""
    plan = plan_of_state(state)
    values = dict(time_figures(state, knowledge))
    figures = plan_figures(plan, state, model_of(state, knowledge), knowledge, params)
    values.update({name: figure.value for name, figure in figures.items()})
    return values


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
        values["plan_gpu_memory_limit"] = params["training_fraction_max"]
        efficiency = _training_efficiency(plan, facts, knowledge)
        if efficiency is not None:
            values["plan_efficiency"] = efficiency
    elif facts.get("task") in INFERENCE_TASKS and "concurrency" in facts and "context_tokens" in facts:
        values.update(_serving_figures(plan, facts, model, gpu, knowledge, params))
        values["plan_gpu_memory_limit"] = params["workload_fraction_max"]
    if "plan_gpu_memory_gb" in values:
        values["plan_gpu_memory_fraction"] = values["plan_gpu_memory_gb"] / gpu.memory_gb
    return plan_figures_checked(values, PLAN_FIGURE_SPECS)


def _count(plan: Mapping, field: str, default: int) -> int:
    """A count of the plan as the answer states it (whole_count: a fraction rounds up; a count past 2**53 stays
    a float, so the figures it scales overflow to inf and are left out instead of raising)."""
    value = plan.get(field)
    if not value:
        return default
    value = whole_count(value)
    if abs(value) >= 2 ** 53:  # float arithmetic from here: an int this large would raise on the first float
        value = float(value) if abs(value) < 1e308 else math.inf
    return max(1, value)


def _training_gpu_parts(plan, facts, model, gpu, knowledge, params) -> dict:
    """Each GPU's state over all of the plan's GPUs: unsharded when the plan says so (or it fits unsharded),
    else the FSDP / ZeRO-3 formula (also the bound for a TP x PP split of the same states); over nodes, a plan's
    TP splits each sequence's activations."""
    task = facts["task"]
    if task == "lora" and plan["precision"] == "int4":
        task = "qlora"  # the rules switched a LoRA job to QLoRA
    limit = params["training_fraction_max"] * gpu.memory_gb
    load = training_load_of(facts, model, gpu, knowledge, params, task=task)
    gpus = _count(plan, "nodes", 1) * int(plan["gpus_per_node"])
    sharding = plan.get("sharding") or pergpu.training_sharding(load, gpus, limit)
    # over nodes, TP inside each node splits a sequence's activations (as training_nodes counts them)
    return load.gpu_parts(gpus, sharding, _count(plan, "tp", 1) if _count(plan, "nodes", 1) > 1 else 1)


def _training_efficiency(plan, facts, knowledge) -> float | None:
    """Per-GPU efficiency of the plan: TP inside a node (one node), or its time against the same work spread
    perfectly over its nodes (a plan over nodes, from its time to result)."""
    one_node = facts.get("tp_efficiency_one_node")
    if one_node is None:
        return None
    nodes = _count(plan, "nodes", 1)
    days = time_figures({**facts, **{recommendation_key(k): v for k, v in plan.items() if v is not None}},
                        knowledge).get("time_to_result_days")
    if nodes <= 1 or days is None or not facts.get("days_on_one_node"):
        return one_node
    return facts["days_on_one_node"] * one_node / (days * nodes)


def _layout(plan, gpus: int) -> tuple[int, int, int]:
    """(tp, pp, units) of a serving plan: a plan over nodes that names no PP is TP x PP units of `unit_nodes`
    (the scale-out unit), or one unit; replicas of one node each otherwise."""
    nodes = _count(plan, "nodes", 1)
    # replicas without a PP are single-node replicas whatever the kind (frontier work quoting such a closest build)
    spans = plan.get("kind") in UNIT_KINDS and not plan.get("replicas")
    pp = _count(plan, "pp", min(nodes, _count(plan, "unit_nodes", nodes)) if spans else 1)
    units = _count(plan, "replicas", max(1, nodes // pp))
    return min(_count(plan, "tp", gpus), gpus), pp, units


def _serving_figures(plan, facts, model, gpu, knowledge, params) -> dict:
    """The busiest GPU of a replica (or TP x PP unit) at its share of the requests, and what the plan serves:
    each group of tp GPUs (or each unit) at its share of the requests in flight or of the request rate."""
    gpus = int(plan["gpus_per_node"])
    tp, pp, units = _layout(plan, gpus)
    precision = plan["precision"]
    load = serving_load(model, gpu, precision, facts["context_tokens"], knowledge, params,
                        facts.get("kv_cache_precision", "bf16"))
    groups = units * (gpus // tp if pp == 1 else 1)
    per_group = math.ceil(facts["concurrency"] / groups)
    if facts.get("task") == "batch-inference":  # throughput mode: every group keeps as many requests as it holds
        per_group = max(per_group, _group_cap(load, tp, pp, knowledge))
    parts = load.gpu_parts(tp, pp, per_group)
    out = {f"plan_gpu_{part}_gb": gb for part, gb in parts.items()}
    out["plan_gpu_memory_gb"] = sum(parts.values())
    if "latency" in facts:
        out.update(_speeds(plan, facts, model, gpu, knowledge, params, (tp, pp, groups), load, precision))
    return out


def _group_cap(load, tp: int, pp: int, knowledge) -> int:
    """Requests one group (or unit) holds at most: its KV room, and the engine's batch limit."""
    engine = serving_lane.engine_of(knowledge)
    return max(1, min(load.group_capacity(tp) if pp == 1 else pergpu.unit_capacity(load, tp, pp), engine.max_batch))


def _speeds(plan, facts, model, gpu, knowledge, params, layout, load, precision) -> dict:
    """Throughput, per-user speed, first token and requests in flight of the plan's groups at their share."""
    tp, pp, groups = layout
    demand = serving_lane.demand_of(facts, knowledge)
    engine = serving_lane.engine_of(knowledge)
    stage_link = knowledge.link(plan["interconnect"]) if pp > 1 and tp == int(plan["gpus_per_node"]) and \
        plan.get("interconnect") in knowledge.links else None
    unit = physics.make_unit(model, gpu, precision, demand.kv_precision, tp, pp, knowledge.sizing, engine,
                             knowledge.link(gpu.intra_node_link), stage_link)
    cap = _group_cap(load, tp, pp, knowledge)
    batch = cap if facts.get("task") == "batch-inference" else facts["concurrency"] / groups
    if demand.requests_per_s:
        at_rate = physics.open_loop(unit, demand.requests_per_s / groups, demand.prompt, demand.output, engine, cap)
        batch = max(batch, at_rate.batch if at_rate is not None else cap)  # the requests stated, and the rate's
    point = physics.steady_state(unit, max(1.0, min(batch, cap)), demand.prompt, demand.output, engine)
    out = {"per_user_tokens_per_s": point.per_user_tokens_per_s, "time_to_first_token_s": point.ttft_s,
           "output_tokens_per_s": groups * point.output_tokens_per_s, "concurrency_in_flight": groups * point.batch}
    if document_quote(params):  # the conservative quote: the nodes' aggregate by the document, shared by the users
        nodes = _count(plan, "nodes", 1)
        per_node = facts.get(f"node_tokens_per_s_{'fp8' if precision == 'fp8' else 'int4'}")
        if per_node:
            out["output_tokens_per_s"] = nodes * per_node
            out["per_user_tokens_per_s"] = min(nodes * per_node / facts["concurrency"],
                                               load.decode_ceiling_tokens_per_s(tp, pp, math.ceil(batch)))
    return out
