"""The serving figures: KV cache, memory per GPU and in-node TP per precision, node capacity, throughput (decode and
prefill from the serving model, a batch corpus's blend), the latency class's per-user target as a demand, and
replicas. The `_int4` figures are the 4-bit lane: INT4 (AWQ, W4A16), or FP4 (NVFP4, or the model's own MXFP4) on a
card with FP4 tensor cores; `four_bit_precision` names which."""
from __future__ import annotations

import math

from . import pergpu, serving_lane, sizing
from . import serving_model as physics
from .catalog import GpuSpec, Knowledge, ModelSpec

SERVED = ("fp8", "int4")  # the lanes inference is sized in: FP8, and the 4-bit lane
SPEED_BASES = ("serving-model", "document")  # what sized the speeds (the policy's document_speed_quote)


def four_bit_precision(gpu: GpuSpec, facts: dict, model: ModelSpec | None = None) -> str:
    """The 4-bit lane's format on `gpu`: INT4 (AWQ, the document's), or FP4 on a card with FP4 tensor cores when the
    buyer asks for FP4 or the model ships its experts in MXFP4 (served as shipped)."""
    if gpu.fp4_dense_tflops is None or facts.get("precision") == "int4":
        return "int4"
    ships = model is not None and model.native_precision is not None and model.native_precision.format == "mxfp4"
    return "fp4" if facts.get("precision") == "fp4" or ships else "int4"


def lane_precision(lane: str, gpu: GpuSpec, facts: dict, model: ModelSpec | None = None) -> str:
    """The precision a lane computes at: the 4-bit lane's format on this card, else the lane's own."""
    return four_bit_precision(gpu, facts, model) if lane == "int4" else lane


def serving_load(model: ModelSpec, gpu: GpuSpec, precision: str, context_tokens: int, knowledge: Knowledge,
                 params: dict, kv_precision: str = "bf16") -> pergpu.ServingLoad:
    """One precision's serving problem on `gpu` with the headroom and workload limits of the rules."""
    constants = knowledge.sizing
    return pergpu.ServingLoad(
        model=model, weights_gb=sizing.weights_gb(model, precision, constants), context_tokens=context_tokens,
        kv_bytes=constants["precision_bytes"][kv_precision], card_gb=gpu.memory_gb,
        overhead_gb=knowledge.constant("serving", "runtime_overhead_fraction") * gpu.memory_gb,
        weights_max=params["weights_fraction_max"], workload_max=params["workload_fraction_max"],
        # the document's calibration (document_speed_quote) reads W4A16 like FP8
        decode_gb=sizing.decode_bytes_gb(model, "fp8" if precision in ("int4", "fp4") else precision, constants),
        bandwidth_gbs=gpu.memory_bandwidth_gbs)


def memory_figures(values: dict, facts: dict, model: ModelSpec, gpu: GpuSpec, gpus: int, knowledge: Knowledge,
                   loads: dict) -> None:
    """KV cache, the single-node workload per GPU, the TP x PP unit and the node's request capacity, from the
    serving loads by lane (serving_load at the facts' context)."""
    concurrency, context = facts["concurrency"], facts["context_tokens"]
    kv_bytes = knowledge.sizing["precision_bytes"][facts.get("kv_cache_precision", "bf16")]
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


def document_quote(params: dict) -> bool:
    """Whether the policy sizes speeds by the document's "500-2,000 tokens/s per node at 70B FP8" (a conservative
    quote) instead of the serving model."""
    return bool(params.get("document_speed_quote", 0))


def throughput_figures(values: dict, facts: dict, model: ModelSpec, gpu: GpuSpec, gpus: int, knowledge: Knowledge,
                       params: dict, loads: dict) -> None:
    """Tokens/s of one node by lane at the latency class, the demand (stated, from QPS, from a corpus and
    deadline, from the latency class's per-user target) and the single-node replicas that carry it."""
    target = knowledge.latency_target(facts["latency"])
    if target is not None:
        values["latency_target_tokens_per_s"] = target
        values["latency_demand_tokens_per_s"] = facts["concurrency"] * target
    demand = serving_lane.demand_of(facts, knowledge)
    if demand.ttft_target_s is not None:
        values["ttft_target_s"] = demand.ttft_target_s
    values["speed_basis"] = SPEED_BASES[1] if document_quote(params) else SPEED_BASES[0]
    tokens = _demand_tokens_per_s(facts, demand, values.get("latency_demand_tokens_per_s"))
    if tokens is not None:
        values["demand_tokens_per_s"] = tokens
    if demand.requests_per_s:
        values["demand_requests_per_s"] = demand.requests_per_s
        values["rate_demand_tokens_per_s"] = demand.requests_per_s * demand.output
    for precision in SERVED:
        if document_quote(params):
            _document_lane(values, facts, model, gpu, gpus, precision, knowledge)
        else:
            _physics_lane(values, facts, model, gpu, gpus, precision, knowledge, loads[precision], demand)
    if "corpus_tokens" in facts:
        values["batch_days_one_node"] = facts["corpus_tokens"] / values["node_tokens_per_s_fp8"] / 86400


def _demand_tokens_per_s(facts: dict, demand, latency_demand: float | None) -> float | None:
    """The largest generated-tokens demand the facts state or imply."""
    demands = [] if latency_demand is None else [latency_demand]
    if "tokens_per_s" in facts:
        demands.append(facts["tokens_per_s"])
    if demand.requests_per_s:
        demands.append(demand.requests_per_s * demand.output)
    if "corpus_tokens" in facts and "deadline_days" in facts:
        demands.append(facts["corpus_tokens"] / (facts["deadline_days"] * 86400))
    return max(demands) if demands else None


def _physics_lane(values, facts, model, gpu, gpus, precision, knowledge, load, demand) -> None:
    """A lane's figures from the serving model: its TP, the requests and tokens/s of one node within the latency
    class, prefill, the replicas the demand needs and each user's speed on them."""
    found = serving_lane.lane(model, gpu, gpus, lane_precision(precision, gpu, facts, model), load, demand, knowledge)
    engine = serving_lane.engine_of(knowledge)
    # prefill_work_seconds, as the unit's Load (memoized per unit and request shape) has it
    prefill = physics.load_of(found.unit, demand.prompt, demand.output, engine).work
    values[f"node_prefill_tokens_per_s_{precision}"] = found.groups * demand.prompt / prefill
    values[f"requests_in_target_per_node_{precision}"] = found.node_requests
    values[f"tp_{precision}"] = found.tp
    values[f"target_reachable_{precision}"] = found.reachable
    values[f"single_user_tokens_per_s_{precision}"] = found.single.per_user_tokens_per_s
    if facts.get("task") == "batch-inference" and facts.get("generated_share") is not None:
        decode = found.node_tokens_per_s
        values[f"node_tokens_per_s_{precision}"] = sizing.corpus_tokens_per_s(
            decode, values[f"node_prefill_tokens_per_s_{precision}"], facts["generated_share"])
    else:
        values[f"node_tokens_per_s_{precision}"] = found.node_tokens_per_s
    needed = max(serving_lane.replicas_needed(found, demand), _corpus_nodes(facts, values, precision))
    values[f"replicas_needed_{precision}"] = needed
    rate_only = demand.without_concurrency()
    values[f"throughput_nodes_{precision}"] = max(serving_lane.replicas_needed(found, rate_only),
                                                  _corpus_nodes(facts, values, precision))
    if "latency_demand_tokens_per_s" in values:
        values[f"latency_nodes_{precision}"] = max(1, math.ceil(facts["concurrency"] / found.node_requests))
    point = serving_lane.shared(found, needed, demand, knowledge)
    values[f"decode_ceiling_tokens_per_s_{precision}"] = point.per_user_tokens_per_s


def _corpus_nodes(facts: dict, values: dict, precision: str) -> int:
    """Nodes that finish a corpus by its deadline at the node's corpus rate (prompt tokens at prefill speed and
    generated ones at decode speed, when the share is given): 1 without a corpus."""
    if "corpus_tokens" not in facts or "deadline_days" not in facts:
        return 1
    rate = facts["corpus_tokens"] / (facts["deadline_days"] * 86400)
    return max(1, math.ceil(rate / values[f"node_tokens_per_s_{precision}"] - 1e-9))


def _document_lane(values, facts, model, gpu, gpus, precision, knowledge) -> None:
    """A lane's figures by the document's calibration (500-2,000 tokens/s per 8-GPU node at 70B FP8, scaled by the
    bytes a token reads and the node's bandwidth): the policy's conservative quote."""
    decode = sizing.serving_tokens_per_s(model, gpu, gpus, "fp8" if precision == "int4" else precision,
                                         facts["latency"], knowledge)
    prefill = sizing.prefill_tokens_per_s(model, gpu, gpus, precision, knowledge)
    values[f"node_prefill_tokens_per_s_{precision}"] = prefill
    batch = facts.get("task") == "batch-inference" and facts.get("generated_share") is not None
    per_node = sizing.corpus_tokens_per_s(decode, prefill, facts["generated_share"]) if batch else decode
    values[f"node_tokens_per_s_{precision}"] = per_node
    values[f"replicas_needed_{precision}"] = sizing.replicas_needed(values.get("demand_tokens_per_s"), per_node)
    values[f"throughput_nodes_{precision}"] = values[f"replicas_needed_{precision}"]
    if "latency_demand_tokens_per_s" in values:
        values[f"latency_nodes_{precision}"] = sizing.replicas_needed(values["latency_demand_tokens_per_s"], per_node)
        # the quote's users per node: its tokens/s at each user's target speed
        values[f"requests_in_target_per_node_{precision}"] = max(
            1, math.floor(per_node / values["latency_target_tokens_per_s"]))


def replica_figures(values: dict, facts: dict, loads: dict, gpu: GpuSpec, gpus: int) -> None:
    """Replicas that both hold the requests and sustain the demand, then each replica's in-node TP (the lane's,
    chosen for the latency class, at least what memory needs) and the memory of its GPUs at its share."""
    for precision, load in loads.items():
        requests = facts["concurrency"]
        if f"replicas_for_concurrency_{precision}" in values:
            replicas = max(values.get(f"replicas_needed_{precision}", 1),
                           values[f"replicas_for_concurrency_{precision}"])
            values[f"dp_replicas_{precision}"] = replicas
            requests = math.ceil(requests / replicas)
        tp = max(pergpu.in_node_tp(load, gpus, requests) or gpus, values.get(f"tp_{precision}", 1))
        per_group = pergpu.requests_per_group(requests, gpus, tp)
        memory = load.gpu_gb(tp, 1, per_group)
        values[f"tp_{precision}"] = tp
        if f"decode_ceiling_tokens_per_s_{precision}" not in values:  # the document's quote: the bandwidth bound
            values[f"decode_ceiling_tokens_per_s_{precision}"] = load.decode_ceiling_tokens_per_s(tp, 1, per_group)
        values[f"gpu_memory_gb_{precision}"] = memory
        values[f"gpu_memory_fraction_{precision}"] = memory / gpu.memory_gb


def demand_units(values: dict, facts: dict, params: dict, loads: dict, gpus: int, context=None) -> None:
    """Replicas of multi-node TP x PP units that hold the requests and carry the demand, one unit size for all,
    each unit holding its share of the requests (H-MS-HYPERSCALE: many replicas, not one huge TP cluster).
    Sizes run from the nodes that hold the weights and one request (at least min_multi_nodes) up to
    max_ib_cluster_nodes (only that smallest size when it is more); the size that needs the fewest nodes in
    all wins, the fewer units on a tie. More demand only raises each size's count and a longer context only
    removes sizes, so the count never drops as demand grows; a card with more memory has every size of a
    smaller card's range, each at no more units."""
    cluster = int(params["max_ib_cluster_nodes"])
    demand = None  # the serving demand, worked out on first use (the same for every size and lane)
    for precision in SERVED:
        if f"replicas_needed_{precision}" not in values or f"serving_nodes_{precision}" not in values:
            continue
        # serving_nodes exists only where the memory figures ran: the loads and the requests are known
        needed = values.get(f"throughput_nodes_{precision}", values[f"replicas_needed_{precision}"])
        load, requests = loads[precision], facts["concurrency"]
        smallest = max(int(params["min_multi_nodes"]), pergpu.smallest_unit(load, gpus))
        demand = demand or _serving_demand(facts, context)
        sizes = range(smallest, max(smallest, cluster) + 1)
        counts = {nodes: max(math.ceil(requests / _unit_holds(facts, precision, nodes, gpus, load, context, demand)),
                             math.ceil(needed / nodes)) for nodes in sizes}
        size = min(sizes, key=lambda nodes: (counts[nodes] * nodes, counts[nodes]))
        values[f"demand_unit_nodes_{precision}"] = size
        values[f"demand_units_{precision}"] = counts[size]


def _unit_holds(facts, lane, nodes, gpus, load, context, demand) -> int:
    """Requests one TP x PP unit of `nodes` nodes holds: within the latency class's targets by the serving model
    (`context`: model, gpu, link, knowledge, params; `demand`: the facts' serving demand), else (the document's
    quote, no latency class) its memory."""
    memory = pergpu.unit_capacity(load, gpus, nodes)
    if context is None or context[2] is None or document_quote(context[4]) or "latency" not in facts:
        return memory
    model, gpu, link, knowledge, _ = context
    return serving_lane.unit_requests(model, gpu, gpus, nodes, lane_precision(lane, gpu, facts, model), memory,
                                      demand, knowledge, link)


def unit_ceilings(values: dict, facts: dict, loads: dict, gpus: int, context=None) -> None:
    """Each user's decode speed on a TP x PP unit of `scale_out_nodes` nodes (TP over one node's GPUs, PP across the
    nodes over the fabric), at the requests each unit holds when the demand is spread over as many units as it needs
    (demand_units, as the rules size replicas of units); one unit holds every request. `context`: (model, gpu,
    link, knowledge, params) for the serving model; without it (the document's quote) the bandwidth bound."""
    unit_nodes = values.get("scale_out_nodes")
    if not unit_nodes or "concurrency" not in facts:
        return
    # the same for every lane; only a workload with serving loads has a serving demand (a context) at all
    demand = _serving_demand(facts, context) if loads else None
    for precision, load in loads.items():
        units = values.get(f"demand_units_{precision}") or max(
            1, math.ceil(values.get(f"replicas_needed_{precision}", 1) / unit_nodes))
        requests = math.ceil(facts["concurrency"] / units)
        if demand is None:
            speed = load.decode_ceiling_tokens_per_s(gpus, 1, requests)
        else:
            speed = _unit_speed(facts, precision, int(unit_nodes), gpus, requests, load, context, demand)
        values[f"unit_decode_ceiling_tokens_per_s_{precision}"] = speed


def _serving_demand(facts, context) -> serving_lane.Demand | None:
    """The facts' serving demand when the serving model sizes units (`context` given, not the document's quote, a
    latency class), else None (units are sized by memory and the bandwidth bound)."""
    if context is None or document_quote(context[4]) or "latency" not in facts:
        return None
    return serving_lane.demand_of(facts, context[3])


def _unit_speed(facts, lane, nodes, gpus, requests, load, context, demand) -> float:
    """One user's tokens/s on a TP = gpus x PP = nodes unit holding `requests` (the serving model)."""
    model, gpu, link, knowledge, _ = context
    engine = serving_lane.engine_of(knowledge)
    unit = physics.make_unit(model, gpu, lane_precision(lane, gpu, facts, model), demand.kv_precision, gpus, nodes,
                             knowledge.sizing, engine, knowledge.link(gpu.intra_node_link), link)
    cap = max(1, min(pergpu.unit_capacity(load, gpus, nodes), engine.max_batch))
    point = physics.steady_state(unit, max(1, min(requests, cap)), demand.prompt, demand.output, engine)
    return point.per_user_tokens_per_s
