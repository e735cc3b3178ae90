"""Projected scaling efficiency of TP, PP and DP over a link, calibrated on the document's points."""
from __future__ import annotations

from dataclasses import dataclass

from .catalog import Knowledge, LinkSpec


def ring_factor(participants: int) -> float:
    """Bytes a ring all-reduce moves per byte of payload: 2(t-1)/t."""
    return 2.0 * (participants - 1) / participants if participants > 1 else 0.0


@dataclass(frozen=True)
class ScalingModel:
    """Efficiency = 1 / (1 + overhead); the two constants are solved from calibration points."""

    k_bandwidth: float
    k_latency: float
    dp_overhead_ratio: float
    pp_overhead_ratio: float
    pp_microbatches: int

    def tp_overhead(self, gpus: int, nodes: int, intra: LinkSpec, inter: LinkSpec | None) -> float:
        """Communication overhead of one TP group of `gpus` cards spread over `nodes` boxes."""
        if gpus <= 1:
            return 0.0
        crossings = nodes if nodes > 1 else 0
        share = crossings / gpus
        # A hop that leaves the box also crosses PCIe: its bandwidth is the slower of the two.
        crossing_bw = min(inter.bandwidth_gbs, intra.bandwidth_gbs) if inter and crossings else intra.bandwidth_gbs
        inverse_bw = (1 - share) / intra.bandwidth_gbs + share / crossing_bw
        latency = self.k_latency * (nodes - 1) * inter.latency_us if inter and nodes > 1 else 0.0
        return self.k_bandwidth * ring_factor(gpus) * inverse_bw + latency

    def tp_efficiency(self, gpus: int, nodes: int, intra: LinkSpec, inter: LinkSpec | None) -> float:
        return 1.0 / (1.0 + self.tp_overhead(gpus, nodes, intra, inter))

    def dp_efficiency(self, nodes: int, gpus_per_node: int, intra: LinkSpec, inter: LinkSpec) -> float:
        """DP replicas of one node each: one gradient all-reduce per step, a fraction of TP's traffic."""
        overhead = self.tp_overhead(nodes * gpus_per_node, nodes, intra, inter)
        return 1.0 / (1.0 + self.dp_overhead_ratio * overhead)

    def pp_efficiency(self, stages: int, gpus_per_node: int, intra: LinkSpec, inter: LinkSpec) -> float:
        """PP stages of one node each: the pipeline bubble plus point-to-point activation sends."""
        if stages <= 1:
            return 1.0
        bubble = (stages - 1) / self.pp_microbatches
        overhead = self.pp_overhead_ratio * self.tp_overhead(stages * gpus_per_node, stages, intra, inter)
        return 1.0 / (1.0 + bubble + overhead)

    def plan_efficiency(self, nodes: int, gpus_per_node: int, intra: LinkSpec, inter: LinkSpec) -> float:
        """The re-architected plan: TP inside each node, PP across the nodes."""
        inside = self.tp_efficiency(gpus_per_node, 1, intra, None)
        return inside * self.pp_efficiency(nodes, gpus_per_node, intra, inter)


def calibrated_model(knowledge: Knowledge) -> ScalingModel:
    """Solve k_bandwidth from the in-node point and k_latency from the across-nodes point."""
    scaling = knowledge.constant("scaling")
    inside, across = scaling["calibration"]["tp_in_node"], scaling["calibration"]["tp_across_nodes"]
    intra = knowledge.link(inside["link"])
    base = ScalingModel(1.0, 0.0, scaling["dp_overhead_ratio"], scaling["pp_overhead_ratio"],
                        int(scaling["pp_microbatches"]))
    k_bw = (1 / inside["efficiency"] - 1) / base.tp_overhead(inside["gpus"], inside["nodes"], intra, None)
    inter = knowledge.link(across["link"])
    with_bw = ScalingModel(k_bw, 0.0, base.dp_overhead_ratio, base.pp_overhead_ratio, base.pp_microbatches)
    remaining = (1 / across["efficiency"] - 1) - with_bw.tp_overhead(across["gpus"], across["nodes"], intra, inter)
    k_lat = max(0.0, remaining / ((across["nodes"] - 1) * inter.latency_us))
    return ScalingModel(k_bw, k_lat, base.dp_overhead_ratio, base.pp_overhead_ratio, base.pp_microbatches)
