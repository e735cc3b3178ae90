"""A build's serving lanes: for one precision on one node shape, the in-node TP of a replica, the requests one replica
holds within the latency class, the node's throughput there, and the single-node replicas a demand needs; and the
operating point of a plan's replicas at their share of the demand (serving_model.py is the physics underneath).

A lane does not depend on how much is asked (the concurrency, the request rate): it is worked out once per model,
card, shape, precision, request lengths and latency class, and kept (a turn's what-if probes change the demand).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import pergpu
from . import serving_model as physics
from .catalog import GpuSpec, Knowledge, ModelSpec

_KEPT: dict = {}  # lane key -> Lane (bounded): the demand-free part of a build's serving figures
_KEPT_MAX = 4096


@dataclass(frozen=True)
class Demand:
    """What a serving workload asks of a build: request lengths, the latency class's targets, and the load."""

    prompt: float  # prompt tokens each request's prefill computes
    output: float  # tokens each request generates
    context: float  # tokens each request holds in the KV cache at most (what memory is sized for)
    tpot_target_s: float | None  # seconds between a user's tokens at most (None: no per-user target)
    ttft_target_s: float | None  # seconds to the first token at most (None: no bound)
    concurrency: float | None = None  # requests in flight, when stated
    requests_per_s: float | None = None  # requests per second, when a rate is stated
    kv_precision: str = "bf16"

    def without_concurrency(self) -> Demand:
        """The same demand with no stated concurrency (what the request rate alone asks)."""
        return Demand(self.prompt, self.output, self.context, self.tpot_target_s, self.ttft_target_s, None,
                      self.requests_per_s, self.kv_precision)

    def meets(self, point: physics.Operating) -> bool:
        """Whether an operating point keeps the latency class's targets."""
        return ((self.tpot_target_s is None or point.tpot_s <= self.tpot_target_s * (1 + 1e-9))
                and (self.ttft_target_s is None or point.ttft_s <= self.ttft_target_s * (1 + 1e-9)))


def demand_of(facts: dict, knowledge: Knowledge) -> Demand:
    """The serving demand of facts that give a context (and the defaults of rules/facts.yaml applied): the output
    at most the context less one token, the prompt at most the context less the output."""
    context = float(facts["context_tokens"])
    output = float(min(facts.get("output_tokens", 1), max(1.0, context - 1)))
    prompt = float(max(1.0, min(facts.get("prompt_tokens", context - output), context - output)))
    latency = facts.get("latency")
    target = knowledge.latency_target(latency) if latency else None
    rate = facts.get("qps")
    if rate is None and facts.get("tokens_per_s"):
        rate = facts["tokens_per_s"] / output
    return Demand(prompt, output, context, 1.0 / target if target else None,
                  knowledge.ttft_target_s(latency, prompt) if latency else None,
                  facts.get("concurrency"), rate, facts.get("kv_cache_precision", "bf16"))


@dataclass(frozen=True)
class Lane:
    """One precision of one node shape: `groups` replicas of `tp` GPUs each in the node, each holding `batch`
    requests within the latency class (at most `batch_cap`, what memory and the engine allow)."""

    precision: str
    tp: int
    groups: int
    unit: physics.Unit
    batch_cap: int
    batch: int
    reachable: bool  # one request alone meets the targets on this TP (else no count of replicas does)
    point: physics.Operating  # one group holding `batch` requests
    single: physics.Operating  # one group holding one request: the fastest a user is served

    @property
    def node_requests_per_s(self) -> float:
        return self.groups * self.point.requests_per_s

    @property
    def node_tokens_per_s(self) -> float:
        return self.groups * self.point.output_tokens_per_s

    @property
    def node_requests(self) -> int:
        """Requests one node holds within the latency class."""
        return self.groups * self.batch


def lane(model: ModelSpec, gpu: GpuSpec, gpus: int, precision: str, load: pergpu.ServingLoad, demand: Demand,
         knowledge: Knowledge) -> Lane:
    """The lane that needs the fewest single-node replicas for `demand` (the smaller TP on a tie, with less
    traffic); its TP options are worked out once per (model, card, shape, precision, lengths, targets, limits)."""
    key = (model.id, model.params_b, gpu.id, gpus, precision, load.weights_gb, load.workload_max, load.weights_max,
           demand.prompt, demand.output, demand.context, demand.tpot_target_s, demand.ttft_target_s,
           demand.kv_precision, tuple(knowledge.files.values()))
    options = _KEPT.get(key)
    if options is None:
        if len(_KEPT) >= _KEPT_MAX:
            _KEPT.clear()
        options = _KEPT[key] = _options(model, gpu, gpus, precision, load, demand, knowledge)
    return min(options, key=lambda option: (replicas_needed(option, demand), -option.node_tokens_per_s, option.tp))


def engine_of(knowledge: Knowledge) -> physics.EngineConstants:
    """The serving engine's constants of a catalog (knowledge/sizing.yaml `serving_model`), read once per catalog:
    a probe asks for them a dozen times."""
    return physics.kept(_ENGINES, (id(knowledge),), knowledge,
                        lambda: physics.EngineConstants.of(knowledge.constant("serving_model")))


_ENGINES: dict = {}  # engine_of's memo


def _options(model, gpu, gpus, precision, load, demand, knowledge) -> tuple[Lane, ...]:
    """A lane per TP that holds the weights and a request and meets the targets for one user, each replica holding
    the most requests that keep them; when no TP serves even one user within the targets, the TP that serves a
    user fastest, as full as memory allows (no count of replicas does better)."""
    engine = engine_of(knowledge)
    link = knowledge.link(gpu.intra_node_link)
    sizes = [tp for tp in pergpu.divisors(gpus) if load.weights_fit(tp) and load.group_capacity(tp) >= 1] or [gpus]
    options, fastest = [], None
    for tp in sizes:
        unit = physics.make_unit(model, gpu, precision, demand.kv_precision, tp, 1, knowledge.sizing, engine, link)
        single = physics.steady_state(unit, 1, demand.prompt, demand.output, engine)
        cap = max(1, min(load.group_capacity(tp), engine.max_batch))
        if fastest is None or single.tpot_s < fastest[2].tpot_s:
            fastest = (tp, unit, single, cap)
        if demand.meets(single):
            batch = _largest_batch(unit, cap, demand, engine)
            point = physics.steady_state(unit, batch, demand.prompt, demand.output, engine)
            options.append(Lane(precision, tp, gpus // tp, unit, cap, batch, True, point, single))
    if not options:
        tp, unit, single, cap = fastest
        point = physics.steady_state(unit, cap, demand.prompt, demand.output, engine)
        options.append(Lane(precision, tp, gpus // tp, unit, cap, cap, False, point, single))
    return tuple(options)


def unit_requests(model: ModelSpec, gpu: GpuSpec, gpus: int, nodes: int, precision: str, memory_cap: int,
                  demand: Demand, knowledge: Knowledge, stage_link) -> int:
    """Requests a TP = gpus x PP = nodes unit (its stages over the plan's fabric) holds while each meets the latency
    class's targets, at most `memory_cap` (its KV room) and the engine's batch limit; when not even one request
    meets them, the memory's count (more units would not make a user faster)."""
    key = ("unit", model.id, model.params_b, gpu.id, gpus, nodes, precision, memory_cap, demand.prompt, demand.output,
           demand.tpot_target_s, demand.ttft_target_s, demand.kv_precision, stage_link.id,
           tuple(knowledge.files.values()))
    found = _KEPT.get(key)
    if found is None:
        engine = engine_of(knowledge)
        cap = max(1, min(memory_cap, engine.max_batch))
        unit = physics.make_unit(model, gpu, precision, demand.kv_precision, gpus, nodes, knowledge.sizing, engine,
                                 knowledge.link(gpu.intra_node_link), stage_link)
        alone = physics.steady_state(unit, 1, demand.prompt, demand.output, engine)
        found = _largest_batch(unit, cap, demand, engine) if demand.meets(alone) else memory_cap
        if len(_KEPT) >= _KEPT_MAX:
            _KEPT.clear()
        _KEPT[key] = found
    return found


def _largest_batch(unit: physics.Unit, cap: int, demand: Demand, engine: physics.EngineConstants) -> int:
    """The most requests (1 to `cap`) one group holds while every one meets the targets (more in flight, slower
    each: a bisection)."""
    load = physics.load_of(unit, demand.prompt, demand.output, engine)
    if demand.meets(load.at(cap)):
        return cap
    low, high = 1, cap  # meets at low, not at high
    while high - low > 1:
        middle = (low + high) // 2
        if demand.meets(load.at(middle)):
            low = middle
        else:
            high = middle
    return low


def replicas_needed(lane_: Lane, demand: Demand, tokens_per_s: float | None = None) -> int:
    """Single-node replicas that hold the requests in flight within the latency class and carry the request rate
    and any other token demand (a corpus over a deadline): whole nodes, at least one."""
    counts = [1.0]
    if demand.concurrency:
        counts.append(demand.concurrency / lane_.node_requests)
    if demand.requests_per_s:
        counts.append(demand.requests_per_s / lane_.node_requests_per_s)
    if tokens_per_s:
        counts.append(tokens_per_s / lane_.node_tokens_per_s)
    needed = max(counts)
    return max(1, math.ceil(needed - 1e-9)) if math.isfinite(needed) else 1


def shared(lane_: Lane, units: int, demand: Demand, knowledge: Knowledge) -> physics.Operating:
    """One group's operating point when `units` x lane.groups groups share the demand: the requests in flight
    split evenly (closed loop), or the request rate (the batch Little's law gives), whichever loads it more."""
    engine = engine_of(knowledge)
    groups = units * lane_.groups
    batch = (demand.concurrency or 0) / groups
    if demand.requests_per_s:
        at_rate = physics.open_loop(lane_.unit, demand.requests_per_s / groups, demand.prompt, demand.output, engine,
                                    lane_.batch_cap)
        batch = max(batch, at_rate.batch if at_rate is not None else lane_.batch_cap)
    return physics.steady_state(lane_.unit, max(1.0, min(batch, lane_.batch_cap)), demand.prompt, demand.output,
                                engine)
