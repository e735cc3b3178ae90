"""Memory per GPU: the in-node tensor parallelism of a serving replica, how many requests a node holds, how
many nodes a TP x PP serving unit needs, and a training job's state per GPU with or without FSDP sharding.

Serving (vLLM's layout): a replica of `tp` GPUs splits the weights `tp` ways; each rank keeps
max(1, kv_heads / tp) KV heads, so heads are replicated when TP exceeds them, and an MLA latent is kept whole
on every rank (vLLM `get_num_kv_heads`). The node's other GPUs are further replicas (DP) that share the
requests. Training (DeepSpeed's ZeRO-3 estimator): sharded states / GPUs + the largest module gathered whole +
each GPU's share of the activations and logits; unsharded (DDP) every GPU keeps all the states.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..errors import EngineError
from . import architecture, sizing
from .catalog import ModelSpec

SHARDED, REPLICATED = "fsdp", "none"  # the values of the training_sharding figures


def divisors(gpus: int) -> list[int]:
    """The tensor-parallel sizes one node allows: the divisors of its GPU count, smallest first."""
    return [size for size in range(1, gpus + 1) if gpus % size == 0]


def kv_rank_bytes_per_token(model: ModelSpec, kv_bytes: float, tp: int, pp: int = 1) -> float:
    """KV bytes one rank keeps per token: its layers (L / pp) x its KV heads (at least one, so replicated when
    tp exceeds them) x head_dim x 2 (K and V); with MLA the whole latent on every rank."""
    layers = model.layers / pp
    if model.mla is not None:
        return layers * (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * kv_bytes
    heads = max(1, math.ceil(model.kv_heads / tp))
    return 2 * layers * heads * model.head_dim * kv_bytes


@dataclass(frozen=True)
class ServingLoad:
    """One precision's serving problem on one card: the weights, a request's context, and the per-GPU budget."""

    model: ModelSpec
    weights_gb: float
    context_tokens: int
    kv_bytes: float
    card_gb: float
    overhead_gb: float  # runtime overhead of each GPU
    weights_max: float  # weights may take this share of a GPU (the headroom rule)
    workload_max: float  # weights + KV + overhead may take this share
    decode_gb: float = 0.0  # weights one decode step reads (sizing.decode_bytes_gb)
    bandwidth_gbs: float = 0.0  # the card's memory bandwidth
    # (tp, pp) -> rank_gb_per_request: the layouts are asked for again and again, and a load never changes
    _per_rank: dict = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)
    # (gpus, nodes) -> unit_capacity, tp -> group_capacity: every probe of a turn asks for them again
    _per_unit: dict = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)
    _per_group: dict = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)

    def rank_gb_per_request(self, tp: int, pp: int = 1) -> float:
        """KV GB one rank keeps for one request."""
        found = self._per_rank.get((tp, pp))
        if found is None:
            per_token = kv_rank_bytes_per_token(self.model, self.kv_bytes, tp, pp)
            found = self._per_rank[(tp, pp)] = per_token * sizing.held_tokens(self.model, self.context_tokens) / 1e9
        return found

    def gpu_parts(self, tp: int, pp: int, requests: float) -> dict:
        """gpu_gb's parts: {"weights", "kv_cache", "overhead"} in GB."""
        return {"weights": self.weights_gb / (tp * pp), "kv_cache": requests * self.rank_gb_per_request(tp, pp),
                "overhead": self.overhead_gb}

    def gpu_gb(self, tp: int, pp: int, requests: float) -> float:
        """Memory of each GPU of a TP x PP group holding `requests` requests."""
        return self.weights_gb / (tp * pp) + requests * self.rank_gb_per_request(tp, pp) + self.overhead_gb

    def decode_ceiling_tokens_per_s(self, tp: int, pp: int, requests: float) -> float:
        """One user's decode speed at most, on a TP x PP group holding `requests`: each step every rank reads its
        share of the active weights (decode_gb / tp) and its requests' KV cache at its card's bandwidth, and a
        token passes the pp stages one after another (the bandwidth bound of decode)."""
        step_s = (self.decode_gb / tp + requests * pp * self.rank_gb_per_request(tp, pp)) / self.bandwidth_gbs
        return 1 / step_s

    def weights_fit(self, tp: int) -> bool:
        return self.weights_gb / tp <= self.weights_max * self.card_gb

    def group_capacity(self, tp: int) -> int:
        """Requests a group of `tp` GPUs holds within the workload budget (0 when not even one)."""
        found = self._per_group.get(tp)
        if found is None:
            room = self.workload_max * self.card_gb - self.overhead_gb - self.weights_gb / tp
            found = self._per_group[tp] = max(0, math.floor(room / self.rank_gb_per_request(tp))) if room > 0 else 0
        return found


def _layouts(load: ServingLoad, gpus: int) -> list[int]:
    """TP sizes whose weights keep the headroom; the whole node when none does (the figures stay defined)."""
    fitting = [tp for tp in divisors(gpus) if load.weights_fit(tp)]
    return fitting or [gpus]


def requests_per_group(requests: float, gpus: int, tp: int) -> int:
    """Requests each of the node's gpus / tp replicas holds when they share `requests` evenly."""
    return math.ceil(requests / (gpus // tp))


def in_node_tp(load: ServingLoad, gpus: int, requests: float) -> int | None:
    """The smallest TP that holds the weights with headroom and its share of the node's requests (None: none)."""
    for tp in divisors(gpus):
        if load.weights_fit(tp) and requests_per_group(requests, gpus, tp) <= load.group_capacity(tp):
            return tp
    return None


def node_capacity(load: ServingLoad, gpus: int) -> int:
    """Concurrent requests one node holds at its best layout: replicas of `tp` GPUs, each holding its share."""
    return max((gpus // tp) * load.group_capacity(tp) for tp in _layouts(load, gpus))


def single_node_gpu_gb(load: ServingLoad, gpus: int, requests: float) -> float:
    """Memory of the busiest GPU when one node holds all `requests` at its least-loaded layout."""
    return min(load.gpu_gb(tp, 1, requests_per_group(requests, gpus, tp)) for tp in _layouts(load, gpus))


def unit_nodes(load: ServingLoad, gpus: int, requests: float) -> int:
    """Nodes of a TP = gpus x PP = nodes unit that holds all `requests` within the workload budget per GPU."""
    budget = load.workload_max * load.card_gb - load.overhead_gb
    if budget <= 0:
        raise EngineError("the runtime overhead takes the whole workload budget of a GPU: check "
                          "workload_fraction_max (rules/parameters.yaml) and runtime_overhead_fraction (knowledge/)")
    per_node = load.weights_gb / gpus + requests * load.rank_gb_per_request(gpus)
    return max(1, math.ceil(per_node / budget))


def unit_capacity(load: ServingLoad, gpus: int, nodes: int) -> int:
    """Requests a TP = gpus x PP = nodes unit holds within the workload budget per GPU (0 when not even one)."""
    found = load._per_unit.get((gpus, nodes))
    if found is None:
        room = load.workload_max * load.card_gb - load.overhead_gb - load.weights_gb / (gpus * nodes)
        found = max(0, math.floor(room / load.rank_gb_per_request(gpus, nodes))) if room > 0 else 0
        load._per_unit[(gpus, nodes)] = found
    return found


def smallest_unit(load: ServingLoad, gpus: int) -> int:
    """Nodes of the smallest TP x PP unit that holds the weights and one request."""
    nodes = unit_nodes(load, gpus, 1)
    while unit_capacity(load, gpus, nodes) < 1:  # unit_nodes is the bound; the exact count may be a node more
        nodes += 1
    return nodes


@dataclass(frozen=True)
class TrainingLoad:
    """A training job's memory: what sharding divides, what each GPU's own micro-batch holds, what ZeRO-3 gathers."""

    states_gb: float  # weights, gradients and optimizer states (PEFT: the frozen base and the adapters)
    tokens_gb: float  # activations (and PEFT logits) of one sequence: each data-parallel GPU holds its own
    gathered_gb: float  # the largest module, gathered whole on each GPU under FSDP / ZeRO-3
    checkpointing: bool = False  # activations recomputed in the backward pass (only the layers' inputs kept)
    checkpointed_gb: float | None = None  # tokens_gb with activation checkpointing (None: already, or no such)

    @property
    def total_gb(self) -> float:
        return self.states_gb + self.tokens_gb

    def gpu_parts(self, gpus_total: int, sharding: str, tp: int = 1) -> dict:
        """gpu_gb's parts: {"states", "gathered", "activations"} in GB (gathered: only when sharded); tensor
        parallelism splits each sequence's activations `tp` ways (sequence parallel)."""
        sharded = sharding == SHARDED
        return {"states": self.states_gb / gpus_total if sharded else self.states_gb,
                "gathered": self.gathered_gb if sharded else 0.0, "activations": self.tokens_gb / tp}

    def gpu_gb(self, gpus_total: int, sharding: str, tp: int = 1) -> float:
        """Memory of each GPU of a job over `gpus_total` GPUs, with the states sharded (fsdp) or not (none), each
        sequence's activations split `tp` ways."""
        return sum(self.gpu_parts(gpus_total, sharding, tp).values())


def training_load(task: str, model: ModelSpec, constants: dict, sequence_tokens: float) -> TrainingLoad:
    """The job's memory parts by task: full fine-tuning / pretraining, LoRA (BF16 base), QLoRA (NF4 base); each GPU
    holds the activations of its own micro-batch, one sequence of `sequence_tokens`."""
    training = constants["training"]
    largest = architecture.largest_module_params(model)
    if task in ("lora", "qlora"):
        qlora = task == "qlora"
        base = sizing.qlora_base_gb(model, constants) if qlora else sizing.weights_gb(model, "bf16", constants)
        acts = sizing.activations_gb(model, training["activation_bytes_per_hidden_peft"], sequence_tokens)
        return TrainingLoad(base + sizing.lora_adapter_gb(model, training),
                            acts + sizing.logits_gb(model, training, sequence_tokens),
                            largest * training["gathered_bytes_per_param_peft"] / 1e9, checkpointing=True)
    states = model.params_b * training["bytes_per_param_full"]
    full = training["activation_bytes_per_hidden_full"]
    acts = sizing.activations_gb(model, full, sequence_tokens)
    inputs = sizing.activations_gb(model, training["checkpointed_bytes_per_hidden"], sequence_tokens)
    kept = inputs + acts / model.layers  # each layer's input, and one layer recomputed at a time
    return TrainingLoad(states, acts, largest * training["gathered_bytes_per_param_full"] / 1e9, checkpointed_gb=kept)


def laid_out(load: TrainingLoad, limit_gb: float, training: dict) -> TrainingLoad:
    """The load as the plan lays it out: the largest module gathered whole on each GPU (DeepSpeed's estimator),
    unless it would take more than `gathered_share_max` of a GPU's limit (then TP splits it just enough: Megatron
    splits the embedding by vocabulary, so a bigger module never needs fewer GPUs); and activation checkpointing
    when one sequence's activations would take more than `checkpointing_above_share` of the limit (each layer's
    input is kept, one layer's activations recomputed at a time: Korthikanti et al. 2022)."""
    cap = training["gathered_share_max"] * limit_gb
    if load.gathered_gb > cap:
        load = replace(load, gathered_gb=cap)
    if load.checkpointed_gb is not None and load.tokens_gb > training["checkpointing_above_share"] * limit_gb:
        load = replace(load, tokens_gb=load.checkpointed_gb, checkpointing=True, checkpointed_gb=None)
    return load


def training_sharding(load: TrainingLoad, gpus: int, limit_gb: float) -> str:
    """Unsharded (every GPU keeps all the states, DDP) when that fits one node's GPUs, else FSDP / ZeRO-3."""
    return REPLICATED if load.gpu_gb(gpus, REPLICATED) <= limit_gb else SHARDED


def training_nodes(load: TrainingLoad, gpus_per_node: int, limit_gb: float) -> int | None:
    """Nodes whose GPUs hold the job within `limit_gb` each: one when it fits one node as it is (FSDP, each GPU
    its own sequence), else the fewest over all their GPUs as a multi-node plan lays it out: TP inside each node
    splits a sequence's activations over its GPUs (sequence parallel), the states sharded over every GPU, two nodes
    at least (None
    when the gathered module and that share of the activations alone exceed the limit: no count holds it)."""
    if load.gpu_gb(gpus_per_node, training_sharding(load, gpus_per_node, limit_gb)) <= limit_gb:
        return 1
    room = limit_gb - load.gathered_gb - load.tokens_gb / gpus_per_node
    if room <= 0:
        return None
    # two at least: one node is sized as it is above (each GPU its own sequence), and did not hold it
    return max(2, math.ceil(load.states_gb / (gpus_per_node * room)))
