"""Every sizing figure the rules read: its type, unit and meaning, its declared range, and how it is computed."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import EngineError
from ..lang.valuetypes import BOOL, NUMBER, enum_of
from . import sizing
from .catalog import GpuSpec, Knowledge, LinkSpec, ModelSpec
from .scaling import calibrated_model
from .vocabulary import INFERENCE_TASKS, PRECISIONS, TRAINING_TASKS

# name: (type, unit, description)
# Parameters of rules/parameters.yaml the sizing itself reads (`rules check` requires them). The
# optional full_node_gpus only adds the full-node figures, so older rule sets still load for `rules diff`.
SIZING_PARAMETERS = ("workload_fraction_max", "training_fraction_max", "min_multi_nodes")

FIGURE_SPECS: dict[str, tuple[object, str, str]] = {
    "active_params_b": (NUMBER, "B params", "parameters used per token (all of them for a dense model)"),
    "model_max_context": (NUMBER, "tokens", "the longest context the model was trained for (max_position_embeddings)"),
    "model_estimated": (BOOL, "", "the architecture was estimated from params_b"),
    "gpu_memory_gb": (NUMBER, "GB", "memory of one card"),
    "gpu_nvlink": (BOOL, "", "the card has NVLink"),
    "gpu_form_factor": (enum_of(("pcie", "sxm")), "", "PCIe card or SXM module"),
    "gpu_kentino_ships": (BOOL, "", "Kentino builds nodes with this card"),
    "node_vram_gb": (NUMBER, "GB", "GPUs per node x card memory"),
    "weights_gb_bf16": (NUMBER, "GB", "weights at BF16"),
    "weights_gb_fp8": (NUMBER, "GB", "weights at FP8"),
    "weights_gb_int4": (NUMBER, "GB", "weights at INT4 (with scale overhead)"),
    "weights_fraction_bf16": (NUMBER, "of node VRAM", "BF16 weights / node VRAM"),
    "weights_fraction_fp8": (NUMBER, "of node VRAM", "FP8 weights / node VRAM"),
    "weights_fraction_int4": (NUMBER, "of node VRAM", "INT4 weights / node VRAM"),
    "kv_bytes_per_token": (NUMBER, "bytes", "KV cache per token"),
    "kv_cache_gb": (NUMBER, "GB", "KV cache at concurrency x context"),
    "workload_fraction_fp8": (NUMBER, "of node VRAM", "(FP8 weights + KV + runtime overhead) / node VRAM"),
    "workload_fraction_int4": (NUMBER, "of node VRAM", "(INT4 weights + KV + runtime overhead) / node VRAM"),
    "serving_nodes_fp8": (NUMBER, "nodes", "nodes that hold the FP8 serving workload"),
    "requests_per_node_fp8": (NUMBER, "requests", "concurrent requests whose KV cache fits one node beside the FP8 weights"),
    "requests_per_node_int4": (NUMBER, "requests", "concurrent requests whose KV cache fits one node beside the INT4 weights"),
    "replicas_for_concurrency_fp8": (NUMBER, "replicas", "single-node FP8 replicas that hold the concurrent requests' KV cache"),
    "replicas_for_concurrency_int4": (NUMBER, "replicas", "single-node INT4 replicas that hold the concurrent requests' KV cache"),
    "dp_replicas_fp8": (NUMBER, "replicas", "single-node FP8 replicas that hold the requests and sustain the demand"),
    "dp_replicas_int4": (NUMBER, "replicas", "single-node INT4 replicas that hold the requests and sustain the demand"),
    "serving_nodes_int4": (NUMBER, "nodes", "nodes that hold the INT4 serving workload"),
    "node_tokens_per_s_fp8": (NUMBER, "tokens/s", "aggregate decode throughput of one node at FP8"),
    "node_tokens_per_s_int4": (NUMBER, "tokens/s", "aggregate decode throughput of one node at INT4"),
    "demand_tokens_per_s": (NUMBER, "tokens/s", "throughput the workload asks for"),
    "replicas_needed_fp8": (NUMBER, "replicas", "single-node FP8 replicas that sustain the demand"),
    "replicas_needed_int4": (NUMBER, "replicas", "single-node INT4 replicas that sustain the demand"),
    "batch_days_one_node": (NUMBER, "days", "days one node needs for the corpus"),
    "training_state_gb": (NUMBER, "GB", "resident training state (weights, grads, optimizer, activations)"),
    "training_state_fraction": (NUMBER, "of node VRAM", "training state / node VRAM"),
    "training_nodes": (NUMBER, "nodes", "nodes that hold the training state"),
    "qlora_state_gb": (NUMBER, "GB", "the training state of the same LoRA job as QLoRA (4-bit frozen base)"),
    "qlora_state_fraction": (NUMBER, "of node VRAM", "QLoRA training state / node VRAM"),
    "qlora_nodes": (NUMBER, "nodes", "nodes that hold the same LoRA job's state as QLoRA"),
    "full_node_vram_gb": (NUMBER, "GB", "VRAM of one full node of this card (full_node_gpus cards)"),
    "full_node_workload_fraction_int4": (NUMBER, "of full-node VRAM", "(INT4 weights + KV + runtime overhead) / one full node's VRAM"),
    "full_node_training_fraction": (NUMBER, "of full-node VRAM", "training state / one full node's VRAM"),
    "training_compute_zflop": (NUMBER, "ZFLOP", "training compute, 6 x active params x tokens"),
    "training_gpu_months": (NUMBER, "GPU-months", "GPU-months on this card at the stated MFU"),
    "days_on_one_node": (NUMBER, "days", "time to result on one node"),
    "days_on_plan": (NUMBER, "days", "time to result on the scale-out plan"),
    "intra_node_bandwidth_gbs": (NUMBER, "GB/s", "GPU-to-GPU bandwidth inside the box"),
    "interconnect_bandwidth_gbs": (NUMBER, "GB/s", "GPU-to-GPU bandwidth between boxes"),
    "interconnect_latency_us": (NUMBER, "us", "one inter-node hop"),
    "bandwidth_cliff_ratio": (NUMBER, "x", "in-box bandwidth / inter-node bandwidth"),
    "tp_efficiency_one_node": (NUMBER, "per GPU", "TP across the GPUs of one node"),
    "scale_out_nodes": (NUMBER, "nodes", "nodes of a multi-node plan (at least two)"),
    "naive_tp_efficiency": (NUMBER, "per GPU", "TP across every GPU of the scale-out plan"),
    "plan_efficiency": (NUMBER, "per GPU", "TP inside each node x PP across the nodes"),
    "dp_efficiency": (NUMBER, "per GPU", "DP replicas across the scale-out nodes"),
    "proposed_total_gpus": (NUMBER, "GPUs", "GPUs in the proposed build"),
    "proposed_tp_efficiency": (NUMBER, "per GPU", "TP across the proposed build"),
    "proposed_one_node_efficiency": (NUMBER, "per GPU", "TP over the same GPUs in one node"),
}


FIGURE_MAX = 1e24  # every figure is a number in [0, 1e24]; at the facts' extremes the largest is ~1e17
# counts that the sizing makes at least 1 (nodes_for, replicas_needed and ceil of a positive count)
AT_LEAST_ONE = frozenset({
    "serving_nodes_fp8", "serving_nodes_int4", "replicas_for_concurrency_fp8", "replicas_for_concurrency_int4",
    "dp_replicas_fp8", "dp_replicas_int4", "replicas_needed_fp8", "replicas_needed_int4", "training_nodes",
    "qlora_nodes", "scale_out_nodes", "proposed_total_gpus"})


def figure_range(name: str) -> tuple[float, float]:
    """The declared range of a numeric figure (`compute_figures` refuses a figure outside it)."""
    return (1.0 if name in AT_LEAST_ONE else 0.0), FIGURE_MAX


@dataclass(frozen=True)
class Figure:
    """One sizing number as the answer reports it."""

    name: str
    value: float | int | bool | str
    unit: str
    description: str


def compute_figures(facts: dict, model: ModelSpec | None, gpu: GpuSpec | None, link: LinkSpec | None,
                    knowledge: Knowledge, params: dict) -> dict:
    """Every figure that the known facts allow; a figure whose inputs are unknown is absent."""
    return {name: Figure(name, value, FIGURE_SPECS[name][1], FIGURE_SPECS[name][2])
            for name, value in figure_values(facts, model, gpu, link, knowledge, params).items()}


def figure_values(facts: dict, model: ModelSpec | None, gpu: GpuSpec | None, link: LinkSpec | None,
                  knowledge: Knowledge, params: dict) -> dict:
    """name -> value of every figure the known facts allow (checked, as `compute_figures` has them): what
    the rules read, without the answer's units and descriptions (what-if probes need only the values)."""
    values: dict = {}
    for group in figure_groups(facts, model, gpu, link, knowledge, params):
        group(values, facts)
    return {name: _checked(name, value) for name, value in values.items()}


def figure_groups(facts: dict, model: ModelSpec | None, gpu: GpuSpec | None, link: LinkSpec | None,
                  knowledge: Knowledge, params: dict) -> list:
    """The figures' computation as steps `step(values, facts)` run in order, each adding figures to
    `values`: the card, model, memory, throughput, replica, training, full-node and scaling figures
    that the card, the node shape and the model allow (a what-if probe recomputes only the steps that
    read what it changed: domain/incremental.py)."""
    gpus = facts.get("gpus_per_node")
    card = gpu is not None and bool(gpus)
    steps = []
    if card:
        steps.append(lambda values, facts: _card_figures(values, gpu, gpus))
    if model is not None:
        steps.append(lambda values, facts: _model_figures(values, model))
        if card:  # the card figures give node_vram_gb, which the sizing divides by
            steps += [lambda values, facts: _memory_figures(values, facts, model, knowledge, params),
                      lambda values, facts: _throughput_figures(values, facts, model, gpu, gpus, knowledge),
                      lambda values, facts: _replica_figures(values),
                      lambda values, facts: _training_figures(values, facts, model, gpu, gpus, knowledge, params),
                      lambda values, facts: _full_node_figures(values, gpu, gpus, knowledge, params)]
    if card:
        steps.append(lambda values, facts: _scaling_figures(values, facts, gpu, gpus, link, knowledge, params))
    return steps


def _model_figures(values, model):
    values["active_params_b"] = model.active_b
    values["model_max_context"] = model.max_context
    values["model_estimated"] = model.estimated


def _checked(name: str, value):
    """The figure rounded to 6 digits, within its declared range (`figure_range`): `rules check` proves
    the rules' arithmetic finite over those ranges, so a figure outside one is refused here."""
    kind = type(value)
    if kind is bool or kind is str:
        return value
    if kind is int and (1 if name in AT_LEAST_ONE else 0) <= value <= FIGURE_MAX:  # the common case, fast
        return value
    if kind is float:
        rounded = _ROUNDED.get(value)
        if rounded is None:
            rounded = _rounded(value)
        value = rounded
    elif isinstance(value, float):
        if not math.isfinite(value):  # bounded facts never get here; a catalog or sizing error might
            raise EngineError(f"a figure came out non-finite ({value}): check knowledge/ and the facts")
        value = float(f"{value:.6g}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = figure_range(name)
        if not low <= value <= high:
            raise EngineError(f"figure {name} came out as {value:g}, outside its declared range {low:g}..{high:g} "
                              "(kentino_expert/domain/figures.py): check knowledge/ and the facts")
    return value


_ROUNDED: dict = {}  # float -> its 6-digit rounding: what-if probes size mostly the same numbers again


def _rounded(value: float) -> float:
    if not math.isfinite(value):  # bounded facts never get here; a catalog or sizing error might
        raise EngineError(f"a figure came out non-finite ({value}): check knowledge/ and the facts")
    rounded = float(f"{value:.6g}")
    if len(_ROUNDED) >= 65536:  # bounded: ~5 MB at most
        _ROUNDED.clear()
    if value:  # not 0.0: -0.0 finds 0.0's entry (equal keys), and the sign must stay
        _ROUNDED[value] = rounded
    return rounded


def _card_figures(values, gpu, gpus):
    values.update(gpu_memory_gb=gpu.memory_gb, gpu_nvlink=gpu.nvlink, gpu_form_factor=gpu.form_factor,
                  gpu_kentino_ships=gpu.kentino_ships, node_vram_gb=sizing.node_vram_gb(gpu, gpus))


def _memory_figures(values, facts, model, knowledge, params):
    constants, vram = knowledge.sizing, values["node_vram_gb"]
    for precision in PRECISIONS:
        weights = sizing.weights_gb(model.params_b, precision, constants)
        values[f"weights_gb_{precision}"] = weights
        values[f"weights_fraction_{precision}"] = weights / vram
    if facts.get("task") in INFERENCE_TASKS and "concurrency" in facts and "context_tokens" in facts:
        kv_bytes = constants["kv_cache_bytes"]
        kv = sizing.kv_cache_gb(model, facts["concurrency"], facts["context_tokens"], kv_bytes)
        values["kv_bytes_per_token"] = sizing.kv_cache_bytes_per_token(model, kv_bytes)
        values["kv_cache_gb"] = kv
        overhead = knowledge.constant("serving", "runtime_overhead_fraction") * vram
        per_request = sizing.kv_cache_gb(model, 1, facts["context_tokens"], kv_bytes)
        for precision in ("fp8", "int4"):
            demand = values[f"weights_gb_{precision}"] + kv + overhead
            values[f"workload_fraction_{precision}"] = demand / vram
            values[f"serving_nodes_{precision}"] = sizing.nodes_for(demand, vram, params["workload_fraction_max"])
            # DP replicas split the concurrent requests: each holds only its share of the KV cache
            per_node = sizing.requests_per_node(values[f"weights_gb_{precision}"], per_request,
                                                params["workload_fraction_max"] * vram - overhead)
            values[f"requests_per_node_{precision}"] = per_node
            if per_node >= 1:
                values[f"replicas_for_concurrency_{precision}"] = math.ceil(facts["concurrency"] / per_node)


def _demand_tokens_per_s(facts, knowledge, per_node_offline):
    demands = []
    if "tokens_per_s" in facts:
        demands.append(facts["tokens_per_s"])
    if "qps" in facts:
        demands.append(facts["qps"] * knowledge.constant("serving", "tokens_per_request"))
    if "corpus_tokens" in facts and "deadline_days" in facts:
        demands.append(facts["corpus_tokens"] / (facts["deadline_days"] * 86400))
    return max(demands) if demands else None


def _throughput_figures(values, facts, model, gpu, gpus, knowledge):
    if facts.get("task") not in INFERENCE_TASKS or "latency" not in facts:
        return
    for precision in ("fp8", "int4"):
        per_node = sizing.serving_tokens_per_s(model, gpu, gpus, precision, facts["latency"], knowledge)
        values[f"node_tokens_per_s_{precision}"] = per_node
    demand = _demand_tokens_per_s(facts, knowledge, values["node_tokens_per_s_fp8"])
    if demand is not None:
        values["demand_tokens_per_s"] = demand
    for precision in ("fp8", "int4"):
        values[f"replicas_needed_{precision}"] = sizing.replicas_needed(demand, values[f"node_tokens_per_s_{precision}"])
    if "corpus_tokens" in facts:
        values["batch_days_one_node"] = facts["corpus_tokens"] / values["node_tokens_per_s_fp8"] / 86400


def _replica_figures(values):
    """Replicas that both hold the concurrent requests and sustain the demanded throughput."""
    for precision in ("fp8", "int4"):
        if f"replicas_for_concurrency_{precision}" in values:
            values[f"dp_replicas_{precision}"] = max(values.get(f"replicas_needed_{precision}", 1),
                                                    values[f"replicas_for_concurrency_{precision}"])


def _full_node_figures(values, gpu, gpus, knowledge, params):
    """For a node with fewer GPUs than a full one: how much of one full node the job would take."""
    full_gpus = params.get("full_node_gpus")
    if full_gpus is None or gpus >= full_gpus:
        return
    full = gpu.memory_gb * full_gpus
    values["full_node_vram_gb"] = full
    if "kv_cache_gb" in values:
        overhead = knowledge.constant("serving", "runtime_overhead_fraction") * full
        values["full_node_workload_fraction_int4"] = (values["weights_gb_int4"] + values["kv_cache_gb"] + overhead) / full
    if "training_state_gb" in values:
        values["full_node_training_fraction"] = values["training_state_gb"] / full


def _training_figures(values, facts, model, gpu, gpus, knowledge, params):
    task = facts.get("task")
    if task not in TRAINING_TASKS:
        return
    state = sizing.training_state_gb(task, model, knowledge.sizing)
    values["training_state_gb"] = state
    values["training_state_fraction"] = state / values["node_vram_gb"]
    values["training_nodes"] = sizing.nodes_for(state, values["node_vram_gb"], params["training_fraction_max"])
    if task == "lora":  # what the same job needs as QLoRA: the rules may switch to it
        values["qlora_state_gb"] = sizing.training_state_gb("qlora", model, knowledge.sizing)
        values["qlora_state_fraction"] = values["qlora_state_gb"] / values["node_vram_gb"]
        values["qlora_nodes"] = sizing.nodes_for(values["qlora_state_gb"], values["node_vram_gb"],
                                                 params["training_fraction_max"])
    if "training_tokens" in facts:
        training = knowledge.constant("training")
        # a mixture-of-experts model computes with its active parameters only (6 N_active D)
        flops = sizing.training_compute_flops(model.active_b, facts["training_tokens"], training["flops_per_param_token"])
        months = sizing.gpu_months(flops, gpu, training["mfu"], training["seconds_per_month"])
        values["training_compute_zflop"] = flops / 1e21
        values["training_gpu_months"] = months
        values["days_on_one_node"] = months * 30 / gpus


def _scaling_figures(values, facts, gpu, gpus, link, knowledge, params):
    model = calibrated_model(knowledge)
    intra = knowledge.link(gpu.intra_node_link)
    values["intra_node_bandwidth_gbs"] = intra.bandwidth_gbs
    values["tp_efficiency_one_node"] = model.tp_efficiency(gpus, 1, intra, None)
    if link is None:
        return
    values.update(interconnect_bandwidth_gbs=link.bandwidth_gbs, interconnect_latency_us=link.latency_us,
                  bandwidth_cliff_ratio=intra.bandwidth_gbs / link.bandwidth_gbs)
    capacity = max(values.get("training_nodes", 1), values.get("serving_nodes_fp8", 1))
    nodes = max(params["min_multi_nodes"], capacity)  # a scale-out plan has at least two boxes by definition
    values["scale_out_nodes"] = nodes
    values["naive_tp_efficiency"] = model.tp_efficiency(nodes * gpus, nodes, intra, link)
    values["plan_efficiency"] = model.plan_efficiency(nodes, gpus, intra, link)
    values["dp_efficiency"] = model.dp_efficiency(nodes, gpus, intra, link)
    if "days_on_one_node" in values:
        values["days_on_plan"] = values["days_on_one_node"] / nodes / values["plan_efficiency"] * values["tp_efficiency_one_node"]
    if "proposed_nodes" in facts:
        # The proposed build's own card (when it names one) sets the in-box link of its figures.
        proposed_intra = intra
        if "proposed_gpu" in facts:
            proposed_intra = knowledge.link(knowledge.gpu(facts["proposed_gpu"]).intra_node_link)
        per_node = facts["proposed_gpus_per_node"]
        total = facts["proposed_nodes"] * per_node
        values["proposed_total_gpus"] = total
        values["proposed_tp_efficiency"] = model.tp_efficiency(total, facts["proposed_nodes"], proposed_intra, link)
        values["proposed_one_node_efficiency"] = model.tp_efficiency(total, 1, proposed_intra, None)
