"""The serving figures: KV cache, memory per GPU and in-node TP per precision, node capacity, throughput
(decode, prefill, a batch corpus's blend), the latency class's per-user target as a demand, and replicas."""
from __future__ import annotations

import math

from . import pergpu, sizing
from .catalog import GpuSpec, Knowledge, ModelSpec

SERVED = ("fp8", "int4")  # the precisions inference is sized at


def serving_load(model: ModelSpec, gpu: GpuSpec, precision: str, context_tokens: int, knowledge: Knowledge,
                 params: dict) -> pergpu.ServingLoad:
    """One precision's serving problem on `gpu` with the headroom and workload limits of the rules."""
    constants = knowledge.sizing
    return pergpu.ServingLoad(
        model=model, weights_gb=sizing.weights_gb(model, precision, constants), context_tokens=context_tokens,
        kv_bytes=constants["kv_cache_bytes"], card_gb=gpu.memory_gb,
        overhead_gb=knowledge.constant("serving", "runtime_overhead_fraction") * gpu.memory_gb,
        weights_max=params["weights_fraction_max"], workload_max=params["workload_fraction_max"],
        # W4A16 decodes no faster than FP8 (int4_speedup_vs_fp8 in knowledge/sizing.yaml): it reads like FP8
        decode_gb=sizing.decode_bytes_gb(model, "fp8" if precision == "int4" else precision, constants),
        bandwidth_gbs=gpu.memory_bandwidth_gbs)


def memory_figures(values: dict, facts: dict, model: ModelSpec, gpu: GpuSpec, gpus: int, knowledge: Knowledge,
                   loads: dict) -> None:
    """KV cache, the single-node workload per GPU, the TP x PP unit and the node's request capacity, from the
    serving loads by precision (serving_load at the facts' context)."""
    concurrency, context = facts["concurrency"], facts["context_tokens"]
    kv_bytes = knowledge.sizing["kv_cache_bytes"]
    values["kv_bytes_per_token"] = sizing.kv_cache_bytes_per_token(model, kv_bytes)
    values["kv_cache_gb"] = sizing.kv_cache_gb(model, concurrency, context, kv_bytes)
    for precision in SERVED:
        load = loads[precision]
        values[f"workload_fraction_{precision}"] = pergpu.single_node_gpu_gb(load, gpus, concurrency) / gpu.memory_gb
        values[f"serving_nodes_{precision}"] = pergpu.unit_nodes(load, gpus, concurrency)
        capacity = pergpu.node_capacity(load, gpus)
        values[f"requests_per_node_{precision}"] = capacity
        if capacity >= 1:  # DP replicas split the requests: each holds only its share of the KV cache
            values[f"replicas_for_concurrency_{precision}"] = math.ceil(concurrency / capacity)


def node_rates(model: ModelSpec, gpu: GpuSpec, gpus: int, knowledge: Knowledge):
    """`rates(precision, latency)`: one node's (decode, prefill) tokens/s, kept once worked out (they read
    neither the requests nor the demand, which the what-if probes of a turn change)."""
    kept: dict = {}

    def rates(precision: str, latency: str) -> tuple[float, float]:
        found = kept.get((precision, latency))
        if found is None:
            found = kept[(precision, latency)] = (
                sizing.serving_tokens_per_s(model, gpu, gpus, precision, latency, knowledge),
                sizing.prefill_tokens_per_s(model, gpu, gpus, precision, knowledge))
        return found
    return rates


def throughput_figures(values: dict, facts: dict, knowledge: Knowledge, rates) -> None:
    """Tokens/s of one node (`rates`: node_rates), the demand (stated, from QPS, from a corpus and deadline,
    from the latency class's per-user target) and the single-node replicas that sustain it."""
    batch = facts.get("task") == "batch-inference"
    for precision in SERVED:
        decode, prefill = rates(precision, facts["latency"])
        values[f"node_prefill_tokens_per_s_{precision}"] = prefill
        share = facts.get("generated_share")
        values[f"node_tokens_per_s_{precision}"] = (
            sizing.corpus_tokens_per_s(decode, prefill, share) if batch and share is not None else decode)
    target = knowledge.latency_target(facts["latency"])
    if target is not None and "concurrency" in facts:
        values["latency_target_tokens_per_s"] = target
        values["latency_demand_tokens_per_s"] = facts["concurrency"] * target
    demand = _demand_tokens_per_s(facts, knowledge, values.get("latency_demand_tokens_per_s"))
    if demand is not None:
        values["demand_tokens_per_s"] = demand
    for precision in SERVED:
        per_node = values[f"node_tokens_per_s_{precision}"]
        values[f"replicas_needed_{precision}"] = sizing.replicas_needed(demand, per_node)
        if "latency_demand_tokens_per_s" in values:
            values[f"latency_nodes_{precision}"] = sizing.replicas_needed(values["latency_demand_tokens_per_s"],
                                                                          per_node)
    if "corpus_tokens" in facts:
        values["batch_days_one_node"] = facts["corpus_tokens"] / values["node_tokens_per_s_fp8"] / 86400


def _demand_tokens_per_s(facts: dict, knowledge: Knowledge, latency_demand: float | None) -> float | None:
    demands = [] if latency_demand is None else [latency_demand]
    if "tokens_per_s" in facts:
        demands.append(facts["tokens_per_s"])
    if "qps" in facts:
        demands.append(facts["qps"] * knowledge.constant("serving", "tokens_per_request"))
    if "corpus_tokens" in facts and "deadline_days" in facts:
        demands.append(facts["corpus_tokens"] / (facts["deadline_days"] * 86400))
    return max(demands) if demands else None


def replica_figures(values: dict, facts: dict, loads: dict, gpu: GpuSpec, gpus: int) -> None:
    """Replicas that both hold the requests and sustain the demand, then each replica's in-node TP and the
    memory of its GPUs at its share of the requests."""
    for precision, load in loads.items():
        requests = facts["concurrency"]
        if f"replicas_for_concurrency_{precision}" in values:
            replicas = max(values.get(f"replicas_needed_{precision}", 1),
                           values[f"replicas_for_concurrency_{precision}"])
            values[f"dp_replicas_{precision}"] = replicas
            requests = math.ceil(requests / replicas)
        tp = pergpu.in_node_tp(load, gpus, requests) or gpus
        per_group = pergpu.requests_per_group(requests, gpus, tp)
        memory = load.gpu_gb(tp, 1, per_group)
        values[f"tp_{precision}"] = tp
        values[f"decode_ceiling_tokens_per_s_{precision}"] = load.decode_ceiling_tokens_per_s(tp, 1, per_group)
        values[f"gpu_memory_gb_{precision}"] = memory
        values[f"gpu_memory_fraction_{precision}"] = memory / gpu.memory_gb


def demand_units(values: dict, facts: dict, params: dict, loads: dict, gpus: int) -> None:
    """Replicas of multi-node TP x PP units that hold the requests and carry the demand, one unit size for all,
    each unit holding its share of the requests (H-MS-HYPERSCALE: many replicas, not one huge TP cluster).
    Sizes run from the nodes that hold the weights and one request (at least min_multi_nodes) up to
    max_ib_cluster_nodes (only that smallest size when it is more); the size that needs the fewest nodes in
    all wins, the fewer units on a tie. More demand only raises each size's count and a longer context only
    removes sizes, so the count never drops as demand grows; a card with more memory has every size of a
    smaller card's range, each at no more units."""
    cluster = int(params["max_ib_cluster_nodes"])
    for precision in SERVED:
        if f"replicas_needed_{precision}" not in values or f"serving_nodes_{precision}" not in values:
            continue
        # serving_nodes exists only where the memory figures ran: the loads and the requests are known
        needed, load, requests = values[f"replicas_needed_{precision}"], loads[precision], facts["concurrency"]
        smallest = max(int(params["min_multi_nodes"]), pergpu.smallest_unit(load, gpus))
        sizes = range(smallest, max(smallest, cluster) + 1)
        counts = {nodes: max(math.ceil(requests / pergpu.unit_capacity(load, gpus, nodes)), math.ceil(needed / nodes))
                  for nodes in sizes}
        size = min(sizes, key=lambda nodes: (counts[nodes] * nodes, counts[nodes]))
        values[f"demand_unit_nodes_{precision}"] = size
        values[f"demand_units_{precision}"] = counts[size]


def unit_ceilings(values: dict, facts: dict, loads: dict, gpus: int) -> None:
    """The decode bound per user on a TP x PP unit of `scale_out_nodes` nodes, at the requests each unit holds
    when the demand is spread over as many units as it needs (demand_units, as the rules size replicas of
    units); one unit holds every request. The bound does not depend on PP (the stages' KV adds up), so it is
    read with TP over one node's GPUs."""
    unit_nodes = values.get("scale_out_nodes")
    if not unit_nodes or "concurrency" not in facts:
        return
    for precision, load in loads.items():
        units = values.get(f"demand_units_{precision}") or max(
            1, math.ceil(values.get(f"replicas_needed_{precision}", 1) / unit_nodes))
        values[f"unit_decode_ceiling_tokens_per_s_{precision}"] = load.decode_ceiling_tokens_per_s(
            gpus, 1, math.ceil(facts["concurrency"] / units))
