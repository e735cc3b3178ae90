"""How every sizing figure the rules read is computed (their declarations are in figure_specs.py)."""
from __future__ import annotations

import math

from ..errors import EngineError
from . import figures_serving, pergpu, sizing
from .catalog import GpuSpec, Knowledge, LinkSpec, ModelSpec
from .deadlines import deadline_figures
from .figure_specs import (
    AT_LEAST_ONE,
    FIGURE_MAX,
    FIGURE_SPECS,
    PLAN_FIGURE_SPECS,
    SIZING_PARAMETER_RANGES,
    SIZING_PARAMETERS,
    Figure,
    figure_range,
)
from .figures_training import training_figures, training_load_of
from .scaling import calibrated_model
from .vocabulary import INFERENCE_TASKS, PRECISIONS

__all__ = ["AT_LEAST_ONE", "FIGURE_MAX", "FIGURE_SPECS", "PLAN_FIGURE_SPECS", "SIZING_PARAMETERS",
           "SIZING_PARAMETER_RANGES", "Figure", "compute_figures", "figure_groups", "figure_range", "figure_values", "checked_figure",
           "plan_figures_checked"]

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
    """The figures' computation as steps `step(values, facts)` run in order, each adding figures to `values`
    and reading only `values` and `facts` (a what-if probe recomputes only the steps that read what it
    changed: domain/incremental.py): the card, the model, the node's memory, serving and training figures,
    the scaling, the deadline and the decode bound of a multi-node unit."""
    gpus = facts.get("gpus_per_node")
    card = gpu is not None and bool(gpus)
    # one keeper of the serving loads for every step of this derivation (and of the probes run from it)
    loads = _loads_of(model, gpu, knowledge, params) if model is not None and card else (lambda facts: {})
    steps = []
    if card:
        steps.append(lambda values, facts: _card_figures(values, facts, gpu, gpus))
    if model is not None:
        steps.append(lambda values, facts: _model_figures(values, model))
        if card:
            steps.append(lambda values, facts: values.update(
                four_bit_precision=figures_serving.four_bit_precision(gpu, facts, model)))
        if card:  # the card figures give node_vram_gb, which the sizing divides by
            steps += _node_steps(model, gpu, gpus, knowledge, params, loads)
    if card:
        # solved once per derivation, not by each step that projects efficiencies (nor again by its probes)
        scaling = calibrated_model(knowledge)
        steps.append(lambda values, facts: _scaling_figures(values, facts, gpu, gpus, link, knowledge, params,
                                                            scaling))
        steps.append(lambda values, facts: deadline_figures(values, facts, gpu, gpus, link, knowledge, scaling,
                                                            int(params["max_ib_cluster_nodes"])))
        steps.append(lambda values, facts: figures_serving.demand_units(
            values, facts, params, loads(facts), gpus, (model, gpu, link, knowledge, params) if model else None))
        steps.append(lambda values, facts: _int4_unit_scaling(values, gpu, gpus, link, knowledge, params, scaling))
        if model is not None:
            steps.append(lambda values, facts: figures_serving.unit_ceilings(
                values, facts, loads(facts), gpus, (model, gpu, link, knowledge, params) if link else None))
    return steps


def _int4_unit_scaling(values, gpu, gpus, link, knowledge, params, scaling):
    """The scale-out figures of a plan at INT4, whose unit is the INT4 state's (the QLoRA state of a LoRA job, the
    INT4 serving units), not the BF16 or FP8 state's that scale_out_nodes counts: a warning on the efficiency of
    an INT4 plan reads these, so it speaks of the nodes the plan has."""
    unit = values.get("demand_unit_nodes_int4", values.get("qlora_nodes"))
    if link is None or unit is None:
        return
    _scale_out(values, "_int4", max(params["min_multi_nodes"], unit), gpus, scaling,
               knowledge.link(gpu.intra_node_link), link)


def _scale_out(values, suffix: str, nodes: int, gpus: int, scaling, intra, link) -> None:
    """scale_out_nodes, naive_tp_efficiency and plan_efficiency (each name with `suffix`) of a unit of `nodes`."""
    values["scale_out_nodes" + suffix] = nodes
    values["naive_tp_efficiency" + suffix] = scaling.tp_efficiency(nodes * gpus, nodes, intra, link)
    values["plan_efficiency" + suffix] = scaling.plan_efficiency(nodes, gpus, intra, link)


def _model_figures(values, model):
    values["active_params_b"] = model.active_b
    values["model_ships_4bit"] = model.native_precision is not None and model.native_precision.format == "mxfp4"
    values["model_max_context"] = model.max_context
    values["model_estimated"] = model.estimated


def _node_steps(model, gpu, gpus, knowledge, params, loads) -> list:
    """Weights, serving (memory, throughput, replicas), training and full-node figures, each its own step so
    that a probe of the latency or the demand does not size the memory again (the loads are rebuilt where a
    step needs them, from `loads`: cheaper than a step that reads every fact)."""
    def memory(values, facts):
        if _serves(facts):
            figures_serving.memory_figures(values, facts, model, gpu, gpus, knowledge, loads(facts))

    def throughput(values, facts):
        if _serves(facts) and "latency" in facts:
            figures_serving.throughput_figures(values, facts, model, gpu, gpus, knowledge, params, loads(facts))

    def replicas(values, facts):
        if _serves(facts):
            figures_serving.replica_figures(values, facts, loads(facts), gpu, gpus)

    def full_node(values, facts):
        training = training_load_of(facts, model, gpu, knowledge, params)
        _full_node_figures(values, facts, gpu, gpus, loads(facts), training, params)

    return [lambda values, facts: _weights_figures(values, model, knowledge), memory, throughput, replicas,
            lambda values, facts: training_figures(values, facts, model, gpu, gpus, knowledge, params), full_node]


def _serves(facts) -> bool:
    return facts.get("task") in INFERENCE_TASKS and "concurrency" in facts and "context_tokens" in facts


def _loads_of(model, gpu, knowledge, params):
    """`loads(facts)`: the serving loads by precision, kept for the context sizes seen (a derivation and the
    probes that start from it ask for the same few); it reads the facts _serving_loads reads."""
    kept: dict = {}

    def loads(facts) -> dict:
        key = (facts.get("task"), "concurrency" in facts, facts.get("context_tokens"), facts.get("precision"),
               facts.get("kv_cache_precision"))
        found = kept.get(key)
        if found is None:
            if len(kept) >= 64:
                kept.clear()
            found = kept[key] = _serving_loads(facts, model, gpu, knowledge, params)
        return found
    return loads


def _serving_loads(facts, model, gpu, knowledge, params) -> dict:
    """The serving loads by precision of an inference workload ({} otherwise)."""
    if not _serves(facts):
        return {}
    kv = facts.get("kv_cache_precision", "bf16")
    return {lane: figures_serving.serving_load(model, gpu, figures_serving.lane_precision(lane, gpu, facts, model),
                                               facts["context_tokens"], knowledge, params, kv)
            for lane in figures_serving.SERVED}


def checked_figure(name: str, value, specs: dict = FIGURE_SPECS) -> Figure:
    """A checked figure (`_checked`) with its unit and description from `specs`."""
    return Figure(name, _checked(name, value), specs[name][1], specs[name][2])


def plan_figures_checked(values: dict, specs: dict) -> dict:
    """{name: Figure} of a recommended plan's figures, rounded as every figure but not held to a range: they
    scale with the counts a rule chose (nodes, replicas), which `rules check` proves only finite. A figure the
    counts make overflow is left out (the plan has no such figure, as a plan of an unknown model has none)."""
    out = {}
    for name, value in values.items():
        if type(value) is float:
            if not math.isfinite(value):
                continue
            value = _rounded(value)
        out[name] = Figure(name, value, specs[name][1], specs[name][2])
    return out


def _checked(name: str, value):
    """The figure rounded to 6 digits, within its declared range (`figure_range`): `rules check` proves
    the rules' arithmetic finite over those ranges, so a figure outside one is refused here."""
    kind = type(value)
    if kind is float:
        rounded = _ROUNDED.get(value)
        value = _rounded(value) if rounded is None else rounded
    elif kind is not int and (kind is bool or not isinstance(value, (int, float))):
        return value  # a flag or a name
    bounds = _BOUNDS.get(name)
    if bounds is None:  # one entry per figure name: a bounded table
        bounds = _BOUNDS[name] = figure_range(name)
    if not bounds[0] <= value <= bounds[1]:
        raise EngineError(f"figure {name} came out as {value:g}, outside its declared range "
                          f"{bounds[0]:g}..{bounds[1]:g} (kentino_expert/domain/figure_specs.py): check knowledge/ "
                          "and the facts")
    return value


_BOUNDS: dict = {}  # figure name -> figure_range(name): checked ~60 times per derivation
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


def _card_figures(values, facts, gpu, gpus):
    values.update(gpu_memory_gb=gpu.memory_gb, gpu_nvlink=gpu.nvlink, gpu_form_factor=gpu.form_factor,
                  gpu_kentino_ships=gpu.kentino_ships, node_vram_gb=sizing.node_vram_gb(gpu, gpus))


def _weights_figures(values, model, knowledge):
    vram = values["node_vram_gb"]
    for precision in PRECISIONS:
        weights = sizing.weights_gb(model, precision, knowledge.sizing)
        values[f"weights_gb_{precision}"] = weights
        values[f"weights_fraction_{precision}"] = weights / vram


def _full_node_figures(values, facts, gpu, gpus, loads, training, params):
    """For a node with fewer GPUs than a full one: how much of one full node's GPUs the job would take."""
    full_gpus = params.get("full_node_gpus")
    if full_gpus is None or gpus >= full_gpus:
        return
    full = int(full_gpus)
    values["full_node_vram_gb"] = gpu.memory_gb * full
    if "int4" in loads:
        busiest = pergpu.single_node_gpu_gb(loads["int4"], full, facts["concurrency"])
        values["full_node_workload_fraction_int4"] = busiest / gpu.memory_gb
    if training is not None:
        limit = params["training_fraction_max"] * gpu.memory_gb
        per_gpu = training.gpu_gb(full, pergpu.training_sharding(training, full, limit))
        values["full_node_training_fraction"] = per_gpu / gpu.memory_gb


def _scaling_figures(values, facts, gpu, gpus, link, knowledge, params, model):
    intra = knowledge.link(gpu.intra_node_link)
    values["intra_node_bandwidth_gbs"] = intra.bandwidth_gbs
    values["tp_efficiency_one_node"] = model.tp_efficiency(gpus, 1, intra, None)
    if link is None:
        return
    values.update(interconnect_bandwidth_gbs=link.bandwidth_gbs, interconnect_latency_us=link.latency_us,
                  bandwidth_cliff_ratio=intra.bandwidth_gbs / link.bandwidth_gbs)
    capacity = max(values.get("training_nodes", 1), values.get("serving_nodes_fp8", 1))
    nodes = max(params["min_multi_nodes"], capacity)  # a scale-out plan has at least two boxes by definition
    _scale_out(values, "", nodes, gpus, model, intra, link)
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
