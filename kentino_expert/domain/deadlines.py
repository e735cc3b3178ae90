"""Deadlines and time to result: the nodes a training deadline needs (DP across nodes over the fabric), and
the days a recommended plan takes (a plan figure, computed from the recommendation after the rules ran).

The unit of a training plan is the nodes that hold its state (`training_nodes`: TP inside each node, PP
across them); a deadline adds whole units that train data-parallel over the inter-node fabric. One unit
takes `days_on_one_node / (k x pp_efficiency(k))` days (the `days_on_plan` of figures.py); `u` units
speed that up by `u x dp(u k) / dp(k)`, so one unit is exactly its own time.
"""
from __future__ import annotations

import math

from ..lang.valuetypes import BOOL, NUMBER
from .catalog import Knowledge, LinkSpec
from .scaling import ScalingModel, calibrated_model

# name: (type, unit, description), as figures.FIGURE_SPECS: rules read these
DEADLINE_FIGURE_SPECS: dict[str, tuple[object, str, str]] = {
    "nodes_for_deadline": (NUMBER, "nodes", "nodes that meet deadline_days: whole units of training_nodes, "
                                            "DP across the units"),
    "deadline_dp_efficiency": (NUMBER, "per GPU", "DP efficiency across the nodes_for_deadline nodes"),
    "deadline_reachable": (BOOL, "", "some node count meets deadline_days at the projected DP efficiency "
                                     "(when not, nodes_for_deadline is the search's bound)"),
    "qlora_nodes_for_deadline": (NUMBER, "nodes", "nodes that meet deadline_days for a LoRA job run as QLoRA: "
                                                  "whole units of qlora_nodes, DP across the units"),
    "deadline_unit_nodes": (NUMBER, "nodes", "nodes of each TP x PP unit of the plan that meets deadline_days: of the "
                                             "unit sizes from training_nodes to max_ib_cluster_nodes, the one whose "
                                             "whole units need the fewest nodes (training_nodes without a deadline)"),
}
DEADLINE_AT_LEAST_ONE = frozenset({"nodes_for_deadline", "qlora_nodes_for_deadline", "deadline_unit_nodes"})

# computed after the rules, from the recommendation: in the answer's figures, not in the rules' namespace
TIME_FIGURE_SPECS: dict[str, tuple[object, str, str]] = {
    "time_to_result_days": (NUMBER, "days", "time to result on the recommended plan (training, or a batch "
                                            "corpus)"),
}

# the state names time_figures reads: two final states equal on these (and on the recommendation) have
# equal plan figures
TIME_FIGURE_INPUTS = frozenset({
    "task", "gpu", "gpus_per_node", "interconnect", "days_on_one_node", "training_nodes", "corpus_tokens",
    "node_tokens_per_s_fp8", "node_tokens_per_s_int4"})

# A bound of the search for a deadline's node count, not a policy number: far beyond any cluster, so a
# deadline no count below it meets is out of reach of DP over this fabric (and nodes_for_deadline is then
# this bound: the count only grows as the deadline shrinks).
SEARCH_LIMIT_NODES = 100_000


def dp_efficiency_at_scale(model: ScalingModel, nodes: int, gpus_per_node: int, intra: LinkSpec,
                           inter: LinkSpec) -> float:
    """DP across `nodes` boxes with a tree all-reduce between them: the ring's bandwidth term, with the
    inter-node latency growing as log2(nodes) instead of nodes - 1.

    NCCL switches to double binary trees between nodes at scale for this reason ("Massively Scale Your
    Deep Learning Training with NCCL 2.4", NVIDIA, 2019: logarithmic latency, full bandwidth). The two are
    equal at the two nodes the scaling model is calibrated on; the ring's linear term would cap DP's speed-up
    near 130x whatever the node count.
    """
    ring = model.tp_overhead(nodes * gpus_per_node, nodes, intra, inter)
    if nodes > 1:
        ring += model.k_latency * (math.log2(nodes) - (nodes - 1)) * inter.latency_us
    return 1.0 / (1.0 + model.dp_overhead_ratio * ring)


def unit_days(days_on_one_node: float, unit: int, gpus_per_node: int, model: ScalingModel, intra: LinkSpec,
              inter: LinkSpec) -> float:
    """Days one unit of `unit` nodes takes (TP inside each node, PP across them)."""
    if unit <= 1:
        return days_on_one_node
    return days_on_one_node / unit / model.pp_efficiency(unit, gpus_per_node, intra, inter)


def dp_speedup(units: int, unit: int, gpus_per_node: int, model: ScalingModel, intra: LinkSpec,
               inter: LinkSpec) -> float:
    """How much faster `units` DP copies of a unit are than one (1 for one unit)."""
    if units <= 1:
        return 1.0
    return units * (dp_efficiency_at_scale(model, units * unit, gpus_per_node, intra, inter)
                    / dp_efficiency_at_scale(model, unit, gpus_per_node, intra, inter))


def plan_days(days_on_one_node: float, nodes: int, unit: int, gpus_per_node: int, model: ScalingModel,
              intra: LinkSpec, inter: LinkSpec | None) -> float:
    """Days a training plan of `nodes` nodes in units of `unit` takes."""
    unit = max(1, min(unit, nodes))
    if inter is None or nodes <= 1:
        return days_on_one_node
    one = unit_days(days_on_one_node, unit, gpus_per_node, model, intra, inter)
    return one / dp_speedup(nodes // unit, unit, gpus_per_node, model, intra, inter)


def units_for_deadline(deadline_days: float, one_unit_days: float, unit: int, gpus_per_node: int,
                       model: ScalingModel, intra: LinkSpec, inter: LinkSpec) -> int | None:
    """The fewest DP units that finish within the deadline, or None when no count up to the search limit
    does (the speed-up grows with the count, so a bisection finds the first)."""
    def meets(units: int) -> bool:
        return one_unit_days / dp_speedup(units, unit, gpus_per_node, model, intra, inter) <= deadline_days

    low, high = 1, max(1, SEARCH_LIMIT_NODES // unit)
    if not meets(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if meets(middle):
            high = middle
        else:
            low = middle + 1
    return low


def deadline_figures(values: dict, facts: dict, gpu, gpus: int, link: LinkSpec | None, knowledge: Knowledge,
                     model=None, largest_unit: int = 1) -> None:
    """nodes_for_deadline, deadline_dp_efficiency, deadline_reachable and deadline_unit_nodes for a training task
    with training_tokens and deadline_days (added to `values`, figures.py's figures so far): of the unit sizes from
    the nodes the state needs up to `largest_unit` (max_ib_cluster_nodes), the one whose whole units need the fewest
    nodes (a bigger TP x PP unit may meet a deadline two smaller ones would need more nodes for); for a LoRA job
    also qlora_nodes_for_deadline, in units of the QLoRA state the rules may switch it to. `model` is the
    calibrated scaling model when the caller has it."""
    if "training_nodes" in values:
        values["deadline_unit_nodes"] = int(values["training_nodes"])
    if "days_on_one_node" not in values or "deadline_days" not in facts or link is None:
        return
    model = model or calibrated_model(knowledge)
    intra = knowledge.link(gpu.intra_node_link)

    def nodes_for(unit: int) -> int | None:
        one = unit_days(values["days_on_one_node"], unit, gpus, model, intra, link)
        units = units_for_deadline(facts["deadline_days"], one, unit, gpus, model, intra, link)
        return None if units is None else units * unit

    smallest = int(values.get("training_nodes", 1))
    found = [(nodes, unit) for unit in range(smallest, max(smallest, largest_unit) + 1)
             if (nodes := nodes_for(unit)) is not None] if smallest > 1 else [(nodes_for(1), 1)]
    found = [(nodes, unit) for nodes, unit in found if nodes is not None]
    nodes, unit = min(found) if found else (None, smallest)
    values["deadline_unit_nodes"] = unit
    values["deadline_reachable"] = nodes is not None
    # out of reach: the count is the search's bound itself, on every card and unit size, so neither a shorter
    # deadline nor a card with more memory (a smaller unit) ever names fewer nodes
    nodes = nodes if nodes is not None else SEARCH_LIMIT_NODES
    values["nodes_for_deadline"] = nodes
    values["deadline_dp_efficiency"] = dp_efficiency_at_scale(model, nodes, gpus, intra, link)
    if "qlora_nodes" in values:  # a LoRA job the rules may run as QLoRA: its units are the QLoRA state's nodes
        qlora = nodes_for(int(values["qlora_nodes"]))
        values["qlora_nodes_for_deadline"] = qlora if qlora is not None else SEARCH_LIMIT_NODES


def _whole(value) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 1 else None


def time_figures(state: dict, knowledge: Knowledge) -> dict:
    """The plan figures (TIME_FIGURE_SPECS) of a final state: name -> value (only those its facts allow)."""
    nodes = _whole(state.get("recommended_nodes"))
    if nodes is None:
        return {}
    if "days_on_one_node" in state and "gpu" in state and _whole(state.get("gpus_per_node")):
        return {"time_to_result_days": _rounded(_training_days(state, nodes, knowledge))}
    per_node = state.get(f"node_tokens_per_s_{state.get('recommended_precision')}")
    if state.get("task") == "batch-inference" and "corpus_tokens" in state and per_node:
        return {"time_to_result_days": _rounded(state["corpus_tokens"] / (nodes * per_node) / 86400)}
    return {}


def _rounded(value: float) -> float:
    return float(f"{value:.6g}")  # 6 significant digits, as every figure


def _training_days(state: dict, nodes: int, knowledge: Knowledge) -> float:
    """Days of a training plan: its unit is the PP span it recommends, else one node for a plan data-parallel
    across all its GPUs (TP 1), else the unit the deadline was sized in when the plan has the deadline's node
    count (whole units of deadline_unit_nodes), else the nodes its state needs."""
    gpus = int(state["gpus_per_node"])
    pure_dp = _whole(state.get("recommended_tp")) == 1
    state_nodes = min(nodes, _whole(state.get("training_nodes")) or 1)
    deadline_unit = _whole(state.get("deadline_unit_nodes"))
    if deadline_unit and nodes == _whole(state.get("nodes_for_deadline")) and nodes % deadline_unit == 0:
        # the deadline's count is whole units of this size (3 units of 3 nodes): timed as units of 2 nodes (4 units
        # and a node left over) the plan missed the deadline it was sized for
        state_nodes = deadline_unit
    unit = _whole(state.get("recommended_pp")) or (1 if pure_dp else state_nodes)
    link_id = state.get("recommended_interconnect")
    if link_id not in knowledge.links or knowledge.links[link_id].scope != "inter-node":
        link_id = state.get("interconnect")
    inter = knowledge.links.get(link_id) if link_id else None
    intra = knowledge.link(knowledge.gpu(state["gpu"]).intra_node_link)
    return plan_days(state["days_on_one_node"], nodes, unit, gpus, calibrated_model(knowledge), intra, inter)
