"""The serving model, from physics: a decode step's time from the bytes it reads and the FLOPs it does, prefill's
FLOPs, tensor-parallel all-reduces over the node's link, pipeline stages, and continuous batching's steady state
(aggregate and per-user tokens/s, time to first token). Pure functions over the catalog's specs and the engine
constants of knowledge/sizing.yaml `serving_model` (calibrated against knowledge/measurements.yaml).

A unit is one replica: `tp` x `pp` GPUs of one card serving one copy of the model. Each decode round gives every
request in flight one token: every stage reads its share of the weights the round touches (all of a dense model;
for a mixture of experts the expected distinct experts of its micro-batch, E(1 - (1 - k/E)^b), plus everything
else) and the KV cache of its requests at their mean context, against its GPUs' bandwidth, or does the round's
matmuls against their compute, whichever takes longer, plus two all-reduces of the activations per layer over the
card's in-box link and a fixed step overhead. Pipeline stages work on micro-batches one after another: a token
still passes every stage, so PP adds memory, not speed for one user.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import architecture
from .catalog import GpuSpec, LinkSpec, ModelSpec

ACTIVATION_BYTES = 2.0  # activations travel in BF16 between ranks and stages (every engine's default)


@dataclass(frozen=True)
class EngineConstants:
    """How close a serving engine gets to the card (knowledge/sizing.yaml `serving_model`)."""

    bandwidth_efficiency: float  # of the card's memory bandwidth, reached by decode's reads
    decode_compute_efficiency: float  # of the dense tensor peak, reached by decode's matmuls
    prefill_efficiency: float  # of the dense tensor peak, reached by prefill (its MFU)
    step_overhead_s: float  # per decode step of a stage: scheduling, sampling, kernel launches
    collective_latency_factor: float  # an all-reduce hop's latency, in units of the link's latency
    max_batch: int  # requests one unit decodes together at most (an engine's max_num_seqs)
    int4_compute_factor: float  # W4A16 matmuls run at this share of the BF16 peak (de-quantisation)

    @classmethod
    def of(cls, table: dict) -> EngineConstants:
        return cls(**{name: table[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Unit:
    """One serving replica: `tp` x `pp` GPUs of `gpu` holding `model` with weights at `weights_bytes` per linear
    weight (routed experts at `expert_bytes`), computing at `compute_tflops` per GPU, its KV cache at `kv_bytes`."""

    model: ModelSpec
    gpu: GpuSpec
    tp: int
    pp: int
    weights_bytes: float  # per parameter of the linear layers outside the routed experts
    expert_bytes: float  # per parameter of the routed experts
    compute_tflops: float  # dense tensor peak of one GPU at the precision the matmuls run in
    kv_bytes: float
    link: LinkSpec  # the in-box link the TP all-reduces use
    stage_link: LinkSpec | None = None  # the link between pipeline stages when they are in different boxes

    @property
    def gpus(self) -> int:
        return self.tp * self.pp


def expected_experts(experts: int, per_token: int, batch: float) -> float:
    """Distinct experts a batch of `batch` tokens touches per MoE layer, routing uniformly: E(1 - (1 - k/E)^b)."""
    if batch <= 0:
        return 0.0
    return experts * (1.0 - (1.0 - per_token / experts) ** batch)


def _expert_params(model: ModelSpec) -> float:
    return 3.0 * model.hidden * model.moe.expert_intermediate_size if model.moe else 0.0


def weights_read_bytes(unit: Unit, micro_batch: float) -> float:
    """Bytes of weights one round reads over the whole unit: the linear layers outside the routed experts, the
    routed experts a micro-batch touches (per stage, so pp micro-batches each touch theirs), and the LM head in
    BF16; the input embedding is a row lookup."""
    model = unit.model
    head = architecture.embedding_params(model)
    routed = architecture.routed_expert_params(model)
    other = max(0.0, model.params_b * 1e9 - architecture.embedding_and_head_params(model) - routed)
    touched = 0.0
    if model.moe is not None and routed > 0:
        distinct = expected_experts(model.moe.experts, model.moe.experts_per_token, micro_batch)
        touched = min(routed, model.moe.moe_layers * distinct * _expert_params(model))
    return other * unit.weights_bytes + touched * unit.expert_bytes + head * 2.0


def active_flops_per_token(model: ModelSpec) -> float:
    """Matmul FLOPs of one token through the linear layers and the LM head: 2 x the active parameters (the input
    embedding is a lookup, no matmul)."""
    lookup = 0.0 if model.tie_word_embeddings else architecture.embedding_params(model)
    return 2.0 * max(model.active_b * 1e9 - lookup, 0.0)


def _attention_width(model: ModelSpec) -> float:
    """Query heads x head width: the per-token width of attention's score and value products."""
    if model.mla is not None:
        return model.attention_heads * (model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim)
    return model.attention_heads * model.head_dim


def attended_tokens(model: ModelSpec, context: float) -> float:
    """Tokens a query attends to per layer on average: local-attention layers see at most their window."""
    if model.local_attention is None:
        return context
    local = min(model.local_attention.layers, model.layers) / model.layers
    return context * (1 - local) + min(context, model.local_attention.window) * local


def kv_bytes_per_token(model: ModelSpec, kv_bytes: float) -> float:
    """KV cache bytes of one token over all layers (an MLA latent, or K and V of every KV head)."""
    if model.mla is not None:
        return model.layers * (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * kv_bytes
    return 2.0 * model.layers * model.kv_heads * model.head_dim * kv_bytes


def allreduce_seconds(link: LinkSpec, ranks: int, payload_bytes: float, constants: EngineConstants) -> float:
    """One ring all-reduce of `payload_bytes` over `ranks` GPUs: 2(t-1)/t of it over the link, 2(t-1) hops."""
    if ranks <= 1:
        return 0.0
    hops = 2.0 * (ranks - 1)
    transfer = hops / ranks * payload_bytes / (link.bandwidth_gbs * 1e9)
    return transfer + hops * link.latency_us * 1e-6 * constants.collective_latency_factor


def decode_round_seconds(unit: Unit, batch: float, context: float, constants: EngineConstants) -> float:
    """Seconds for every one of `batch` requests to get a token (mean context `context`): per stage the larger of
    its reads and its matmuls, plus its all-reduces and step overhead, for each of the pp micro-batches."""
    return DecodeRound(unit, context, constants).seconds(batch)


class DecodeRound:
    """A decode round's terms that do not depend on the batch, computed once per (unit, context): the bisections
    over the batch evaluate a round ~40 times. The arithmetic is the same expressions in the same order."""

    __slots__ = ("unit", "constants", "bandwidth", "kv_token", "attended", "token_flops", "peak", "talk_factor",
                 "dense_bytes", "routed", "expert_params")

    def __init__(self, unit: Unit, context: float, constants: EngineConstants):
        model = unit.model
        self.unit, self.constants = unit, constants
        self.bandwidth = unit.tp * unit.gpu.memory_bandwidth_gbs * 1e9 * constants.bandwidth_efficiency
        self.kv_token = kv_bytes_per_token(model, unit.kv_bytes)
        self.attended = attended_tokens(model, context)
        self.token_flops = active_flops_per_token(model) + 4.0 * model.layers * _attention_width(model) * self.attended
        self.peak = unit.tp * unit.compute_tflops * 1e12 * constants.decode_compute_efficiency
        self.talk_factor = 2 * model.layers / unit.pp
        self.routed = architecture.routed_expert_params(model)
        self.expert_params = _expert_params(model)
        head = architecture.embedding_params(model)
        other = max(0.0, model.params_b * 1e9 - architecture.embedding_and_head_params(model) - self.routed)
        self.dense_bytes = (other * unit.weights_bytes, head * 2.0)

    def weights_bytes(self, micro: float) -> float:
        """weights_read_bytes(unit, micro) from the kept terms."""
        model, touched = self.unit.model, 0.0
        if model.moe is not None and self.routed > 0:
            distinct = expected_experts(model.moe.experts, model.moe.experts_per_token, micro)
            touched = min(self.routed, model.moe.moe_layers * distinct * self.expert_params)
        return self.dense_bytes[0] + touched * self.unit.expert_bytes + self.dense_bytes[1]

    def seconds(self, batch: float) -> float:
        unit, constants = self.unit, self.constants
        stages = unit.pp
        micro = max(batch / stages, 1e-9)
        kv = micro * self.kv_token * self.attended
        read = (self.weights_bytes(micro) / stages + kv / stages) / self.bandwidth
        compute = micro * self.token_flops / stages / self.peak
        payload = micro * unit.model.hidden * ACTIVATION_BYTES
        talk = self.talk_factor * allreduce_seconds(unit.link, unit.tp, payload, constants)
        return stages * (max(read, compute) + talk + constants.step_overhead_s) + _stage_handoff_seconds(unit, payload)


def _stage_handoff_seconds(unit: Unit, payload_bytes: float) -> float:
    """A micro-batch's activations sent from each stage to the next (once per round through the pipeline)."""
    if unit.pp <= 1:
        return 0.0
    link = unit.stage_link or unit.link
    return (unit.pp - 1) * (payload_bytes / (link.bandwidth_gbs * 1e9) + link.latency_us * 1e-6)


def prefill_attention_flops(model: ModelSpec, prompt: float) -> float:
    """Causal attention's FLOPs over one prompt: 2 x layers x T x the tokens attended (half the T x T scores) x
    the attention width, for the score and the value products each."""
    return 2.0 * model.layers * prompt * attended_tokens(model, prompt) * _attention_width(model)


def prefill_flops(model: ModelSpec, prompt: float) -> float:
    """FLOPs of one prompt's prefill: 2 x active parameters per token plus causal attention."""
    return active_flops_per_token(model) * prompt + prefill_attention_flops(model, prompt)


def prefill_seconds(unit: Unit, prompt: float, constants: EngineConstants) -> float:
    """One prompt's prefill on the unit, alone: the linear layers' FLOPs at the precision's peak and attention's at
    the BF16 peak (attention kernels compute in BF16 whatever the weights), over the TP group (stages run one after
    another), plus two all-reduces of its activations per layer."""
    peak = unit.tp * 1e12 * constants.prefill_efficiency
    linear = active_flops_per_token(unit.model) * prompt / (unit.compute_tflops * peak)
    compute = linear + prefill_attention_flops(unit.model, prompt) / (unit.gpu.bf16_dense_tflops * peak)
    talk = 2 * unit.model.layers * allreduce_seconds(unit.link, unit.tp, prompt * unit.model.hidden * ACTIVATION_BYTES,
                                                     constants)
    return compute + talk + _stage_handoff_seconds(unit, prompt * unit.model.hidden * ACTIVATION_BYTES)


def prefill_work_seconds(unit: Unit, prompt: float, constants: EngineConstants) -> float:
    """The unit's time one prompt's prefill takes from its decoding: with pp stages working on different prompts
    at once, a pp-th of the prompt's own prefill time."""
    return prefill_seconds(unit, prompt, constants) / unit.pp


@dataclass(frozen=True)
class Operating:
    """A unit's steady state under continuous batching."""

    batch: float  # requests in flight
    tpot_s: float  # seconds between two tokens of one request (per-user speed = 1 / tpot_s)
    ttft_s: float  # seconds to the first token: the prompt's prefill, and the wait for it
    requests_per_s: float
    output_tokens_per_s: float
    prefill_share: float  # of the unit's time, spent on prefill

    @property
    def per_user_tokens_per_s(self) -> float:
        return 1.0 / self.tpot_s


def steady_state(unit: Unit, batch: float, prompt: float, output: float, constants: EngineConstants,
                 context: float | None = None) -> Operating:
    """The closed-loop steady state of `batch` requests in flight, each a prompt of `prompt` tokens and `output`
    generated ones: each decode round also makes room for the prefills of the requests that replace those
    finishing (batch / output per round), so TPOT = round + batch x prefill work / output; requests/s = batch /
    (TTFT + output x TPOT) (Little's law); TTFT waits behind the other prefills (an M/D/1 queue)."""
    return load_of(unit, prompt, output, constants, context).at(batch)


def _unit_key(unit: Unit) -> tuple:
    """A unit's identity for the memos: its catalog entries by identity (the catalog is immutable), its numbers."""
    return (id(unit.model), id(unit.gpu), id(unit.link), id(unit.stage_link), unit.tp, unit.pp, unit.weights_bytes,
            unit.expert_bytes, unit.compute_tflops, unit.kv_bytes)


def load_of(unit: Unit, prompt: float, output: float, constants: EngineConstants,
            context: float | None = None) -> Load:
    """The Load of a unit under one request shape, memoized: a turn's probes ask the same unit and shape again at
    other batches (its lanes, its plan's operating point, its units' speeds), and the Load is most of the cost."""
    return kept(_LOADS, (_unit_key(unit), prompt, output, constants, context), unit,
                lambda: Load(unit, prompt, output, constants, context))


def kept(table: dict, key: tuple, keep, make):
    """table[key], made by `make()` on first use (the table cleared when full): the memos keyed by the identity of
    immutable catalog entries. The entry holds `keep` (the objects whose ids make the key), so they live as long
    as it does and no id is reused while it stands."""
    found = table.get(key)
    if found is None:
        if len(table) >= _KEPT_MAX:
            table.clear()
        found = table[key] = (keep, make())
    return found[1]


_LOADS: dict = {}
_KEPT_MAX = 4096  # entries of each memo of this module


class Load:
    """A unit under one request shape (prompt, output, mean context): what its steady states share, so that a
    search over the batch computes the prefill and the round's fixed terms once."""

    __slots__ = ("round", "output", "alone", "work")

    def __init__(self, unit: Unit, prompt: float, output: float, constants: EngineConstants,
                 context: float | None = None):
        mean_context = context if context is not None else prompt + output / 2.0
        self.round = DecodeRound(unit, mean_context, constants)
        self.output = output
        self.alone = prefill_seconds(unit, prompt, constants)
        self.work = self.alone / unit.pp  # prefill_work_seconds

    def at(self, batch: float) -> Operating:
        """The steady state with `batch` requests in flight (see steady_state)."""
        round_s, tpot, ttft, rate = self._solve(batch)
        return Operating(batch, tpot, ttft, rate, rate * self.output, min(rate * self.work, 1.0))

    def _solve(self, batch: float) -> tuple[float, float, float, float]:
        """(round, TPOT, TTFT, requests/s) with `batch` in flight; the bisections read only the rate."""
        round_s, work, alone, output = self.round.seconds(batch), self.work, self.alone, self.output
        tpot = round_s + batch * work / output
        ttft = alone + round_s
        for _ in range(4):  # the prefill share depends on the rate, which depends on TTFT: a few passes converge
            rate = batch / (ttft + output * tpot)
            share = min(rate * work, 0.95)
            ttft = alone * (1.0 + share / (2.0 * (1.0 - share))) + round_s
        return round_s, tpot, ttft, batch / (ttft + output * tpot)

    def open_loop(self, requests_per_s: float, max_batch: float) -> Operating | None:
        """See open_loop."""
        if self._solve(max_batch)[3] < requests_per_s:
            return None
        low, high = 0.0, max_batch
        for _ in range(40):
            middle = (low + high) / 2
            if self._solve(max(middle, 1e-6))[3] < requests_per_s:
                low = middle
            else:
                high = middle
        return self.at(max(high, 1e-6))


def open_loop(unit: Unit, requests_per_s: float, prompt: float, output: float, constants: EngineConstants,
              max_batch: float) -> Operating | None:
    """The steady state at an arrival rate (None: the unit cannot keep up even at `max_batch` in flight): the
    batch that Little's law gives, found by bisection (more in flight, more throughput). Memoized: a turn asks
    the same rate of the same unit for its search, its plan and its alternatives, and a chat asks it again."""
    return kept(_OPEN_LOOPS, (_unit_key(unit), requests_per_s, prompt, output, constants, max_batch), unit,
                lambda: load_of(unit, prompt, output, constants).open_loop(requests_per_s, max_batch))


_OPEN_LOOPS: dict = {}


def kv_capacity(unit: Unit, budget_gb: float, weights_gb: float, context: float) -> int:
    """Requests of `context` tokens whose KV cache a unit keeps within `budget_gb` per GPU beside its share of the
    `weights_gb` (KV heads replicated when TP exceeds them; an MLA latent whole on every rank)."""
    model = unit.model
    layers = model.layers / unit.pp
    if model.mla is not None:
        per_token = layers * (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * unit.kv_bytes
    else:
        per_token = 2.0 * layers * max(1, math.ceil(model.kv_heads / unit.tp)) * model.head_dim * unit.kv_bytes
    room = budget_gb - weights_gb / unit.gpus
    per_request = per_token * attended_tokens(model, context) / 1e9
    return max(0, math.floor(room / per_request)) if room > 0 else 0


FOUR_BIT = ("int4", "fp4")


def linear_bytes(model: ModelSpec, precision: str, constants: dict) -> tuple[float, float]:
    """(bytes per linear weight outside the routed experts, bytes per routed-expert weight) at `precision`: the
    checkpoint's own format where the model ships 4-bit experts (MXFP4) and a 4-bit precision is asked."""
    native = model.native_precision
    if precision in FOUR_BIT and native is not None and native.format == "mxfp4" and native.scope == "routed-experts":
        return constants["unquantised_bytes"], constants["native_format_bytes"]["mxfp4"]
    size = constants["precision_bytes"][precision]
    return size, size


def compute_tflops(gpu: GpuSpec, precision: str, engine: EngineConstants) -> float:
    """Dense tensor peak one GPU computes `precision`'s matmuls at: FP8 and FP4 natively (FP4 only on cards with
    FP4 tensor cores), BF16 at BF16, INT4 (W4A16) at BF16 less its de-quantisation."""
    if precision == "fp8":
        return gpu.fp8_dense_tflops
    if precision == "fp4":
        if gpu.fp4_dense_tflops is None:
            raise ValueError(f"{gpu.id} has no FP4 tensor cores")
        return gpu.fp4_dense_tflops
    if precision == "int4":
        return gpu.bf16_dense_tflops * engine.int4_compute_factor
    return gpu.bf16_dense_tflops


def make_unit(model: ModelSpec, gpu: GpuSpec, precision: str, kv_precision: str, tp: int, pp: int,
              constants: dict, engine: EngineConstants, link: LinkSpec, stage_link: LinkSpec | None = None) -> Unit:
    """The unit of `tp` x `pp` GPUs of `gpu` serving `model` at `precision` with its KV cache at `kv_precision`
    (memoized: a probe asks its plan's units again; the catalog's entries are immutable, kept by the memo)."""
    key = (id(model), id(gpu), precision, kv_precision, tp, pp, id(constants), engine, id(link), id(stage_link))
    return kept(_UNITS, key, (model, gpu, constants, link, stage_link),
                lambda: _new_unit(model, gpu, precision, kv_precision, tp, pp, constants, engine, link, stage_link))


_UNITS: dict = {}  # make_unit's memo


def _new_unit(model, gpu, precision, kv_precision, tp, pp, constants, engine, link, stage_link) -> Unit:
    weights, experts = linear_bytes(model, precision, constants)
    return Unit(model=model, gpu=gpu, tp=tp, pp=pp, weights_bytes=weights, expert_bytes=experts,
                compute_tflops=compute_tflops(gpu, precision, engine),
                kv_bytes=constants["precision_bytes"][kv_precision],
                link=link, stage_link=stage_link)
