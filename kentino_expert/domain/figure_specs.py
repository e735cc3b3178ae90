"""The figures' declarations: each one's type, unit and meaning, and its declared range (`rules check` proves the
rules' arithmetic finite over these ranges; `figures.compute_figures` refuses a value outside them)."""
from __future__ import annotations

from dataclasses import dataclass

from ..lang.valuetypes import BOOL, NUMBER, enum_of
from .deadlines import DEADLINE_AT_LEAST_ONE, DEADLINE_FIGURE_SPECS
from .workload import MAX_GPUS_PER_NODE, MAX_NODES


@dataclass(frozen=True)
class ParameterRange:
    """What a parameter the sizing reads may be: a number from `low` to `high` (above `low` when `above_low`),
    a whole one when `whole`. These are the mechanism's bounds, not policy: the sizing builds a unit for every
    node count up to max_ib_cluster_nodes, and a fraction of memory beyond (0, 1] means nothing."""

    low: float
    high: float
    whole: bool = False
    above_low: bool = False
    what: str = "a number"

    def holds(self, value: float) -> bool:
        """Whether a finite number is in the range."""
        if self.whole and value != int(value):
            return False
        return (value > self.low if self.above_low else value >= self.low) and value <= self.high

    def __str__(self) -> str:
        low, high = (f"{bound:g}".replace("e+", "e") for bound in (self.low, self.high))
        if self.above_low:
            return f"{self.what} above {low} and at most {high}"
        return f"{self.what} from {low} to {high}"


NODE_COUNT = ParameterRange(1, MAX_NODES, whole=True, what="a whole number")
GPU_COUNT = ParameterRange(1, MAX_GPUS_PER_NODE, whole=True, what="a whole number")
MEMORY_FRACTION = ParameterRange(0, 1, above_low=True, what="a fraction")

# Parameters of rules/parameters.yaml the sizing itself reads, and the values each may take (the rule set
# is refused at load, E036, when one is outside it). All but full_node_gpus are required (E032); the
# optional full_node_gpus only adds the full-node figures, so older rule sets still load for `rules diff`.
SIZING_PARAMETER_RANGES = {
    "weights_fraction_max": MEMORY_FRACTION, "workload_fraction_max": MEMORY_FRACTION,
    "training_fraction_max": MEMORY_FRACTION, "min_multi_nodes": NODE_COUNT, "max_ib_cluster_nodes": NODE_COUNT,
    "full_node_gpus": GPU_COUNT, "document_speed_quote": ParameterRange(0, 1, whole=True, what="0 or 1")}
OPTIONAL_SIZING_PARAMETERS = ("full_node_gpus", "document_speed_quote")
SIZING_PARAMETERS = tuple(name for name in SIZING_PARAMETER_RANGES if name not in OPTIONAL_SIZING_PARAMETERS)

SHARDINGS = ("none", "fsdp")  # training state kept whole on every GPU (DDP), or sharded (FSDP / ZeRO-3)

# name: (type, unit, description); the rules read these (computed before they run)
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
    "weights_gb_fp8": (NUMBER, "GB", "weights at FP8 (embedding and LM head in BF16)"),
    "weights_gb_int4": (NUMBER, "GB", "weights at INT4: AWQ group-128 with scales and zeros, embedding and LM head "
                                      "in BF16 (a native MXFP4 checkpoint as it ships)"),
    "weights_gb_fp4": (NUMBER, "GB", "weights at FP4: NVFP4 (4-bit values, an FP8 scale per 16), embedding and LM "
                                     "head in BF16 (a native MXFP4 checkpoint as it ships); served on cards with FP4 "
                                     "tensor cores only"),
    "weights_fraction_bf16": (NUMBER, "of node VRAM", "BF16 weights / node VRAM"),
    "weights_fraction_fp4": (NUMBER, "of node VRAM", "FP4 weights / node VRAM"),
    "four_bit_precision": (enum_of(("int4", "fp4")), "", "the 4-bit lane's format on this card (the `_int4` serving "
                           "figures): int4 (AWQ W4A16, the document's), or fp4 on a card with FP4 tensor cores when "
                           "fp4 is asked for or the model ships its experts in MXFP4 (served as shipped)"),
    "model_ships_4bit": (BOOL, "", "the model's released checkpoint stores its experts in MXFP4 (gpt-oss): served as "
                         "shipped, in the 4-bit lane"),
    "weights_fraction_fp8": (NUMBER, "of node VRAM", "FP8 weights / node VRAM"),
    "weights_fraction_int4": (NUMBER, "of node VRAM", "INT4 weights / node VRAM"),
    "kv_bytes_per_token": (NUMBER, "bytes", "KV cache per token (all layers, no TP replication)"),
    "kv_cache_gb": (NUMBER, "GB", "KV cache at concurrency x context (no TP replication)"),
    "workload_fraction_fp8": (NUMBER, "of card memory", "FP8 weights + KV + runtime overhead of the busiest GPU when "
                              "one node holds every request at its least-loaded in-node TP (KV heads replicated "
                              "when TP exceeds them, an MLA latent on every rank) / card memory"),
    "workload_fraction_int4": (NUMBER, "of card memory", "the same at INT4"),
    "serving_nodes_fp8": (NUMBER, "nodes", "nodes of a TP x PP unit that holds the FP8 serving workload within the "
                          "workload limit of each GPU"),
    "requests_per_node_fp8": (NUMBER, "requests", "concurrent requests one node holds beside the FP8 weights, at its "
                              "best in-node TP"),
    "requests_per_node_int4": (NUMBER, "requests", "concurrent requests one node holds beside the INT4 weights, at "
                               "its best in-node TP"),
    "replicas_for_concurrency_fp8": (NUMBER, "replicas", "single-node FP8 replicas that hold the concurrent "
                                     "requests' KV cache"),
    "replicas_for_concurrency_int4": (NUMBER, "replicas", "single-node INT4 replicas that hold the concurrent "
                                      "requests' KV cache"),
    "dp_replicas_fp8": (NUMBER, "replicas", "single-node FP8 replicas that hold the requests and sustain the demand"),
    "dp_replicas_int4": (NUMBER, "replicas", "single-node INT4 replicas that hold the requests and sustain the demand"),
    "serving_nodes_int4": (NUMBER, "nodes", "nodes of a TP x PP unit that holds the INT4 serving workload"),
    "tp_fp8": (NUMBER, "GPUs", "TP of one FP8 replica inside a node: the smallest divisor of gpus_per_node that "
               "holds the weights with headroom and its share of the node's requests (the node's other GPUs are "
               "further replicas); gpus_per_node when none does"),
    "tp_int4": (NUMBER, "GPUs", "the same at INT4"),
    "gpu_memory_gb_fp8": (NUMBER, "GB", "memory of each GPU of a single-node FP8 replica at tp_fp8 holding its share "
                          "of the requests: weights / TP + KV + runtime overhead"),
    "gpu_memory_gb_int4": (NUMBER, "GB", "the same at INT4 and tp_int4"),
    "gpu_memory_fraction_fp8": (NUMBER, "of card memory", "gpu_memory_gb_fp8 / card memory"),
    "gpu_memory_fraction_int4": (NUMBER, "of card memory", "gpu_memory_gb_int4 / card memory"),
    "decode_ceiling_tokens_per_s_fp8": (NUMBER, "tokens/s per user", "tokens/s each user sees on the single-node "
        "FP8 replicas that carry the demand (replicas_needed_fp8 nodes of tp_fp8 replicas, each at its share of the "
        "requests or the request rate): 1 / the time per output token of the serving model (docs/answers.md); by "
        "the document's quote, the bandwidth bound of a replica at its batch"),
    "decode_ceiling_tokens_per_s_int4": (NUMBER, "tokens/s per user", "the same in the 4-bit lane at tp_int4"),
    "unit_decode_ceiling_tokens_per_s_fp8": (NUMBER, "tokens/s per user", "the same bound on a TP x PP unit over "
                                             "nodes (TP = gpus_per_node) holding every request"),
    "unit_decode_ceiling_tokens_per_s_int4": (NUMBER, "tokens/s per user", "the same at INT4"),
    "demand_unit_nodes_fp8": (NUMBER, "nodes", "nodes of each TP x PP unit when replicas of units hold the "
                              "requests and carry the FP8 demand: the size from the nodes that hold the weights "
                              "and one request (at least min_multi_nodes) up to max_ib_cluster_nodes that needs "
                              "the fewest nodes in all"),
    "demand_unit_nodes_int4": (NUMBER, "nodes", "the same at INT4"),
    "demand_units_fp8": (NUMBER, "units", "units of demand_unit_nodes_fp8 nodes, each holding its share of the "
                         "concurrent requests, that carry replicas_needed_fp8"),
    "demand_units_int4": (NUMBER, "units", "the same at INT4"),
    "node_tokens_per_s_fp8": (NUMBER, "tokens/s", "generated tokens/s one node gives at FP8 while each of its "
        "requests keeps the latency class's per-user speed and first-token time (the serving model: its replicas of "
        "tp_fp8 GPUs each holding requests_in_target_per_node_fp8 / replicas, prefills included); for "
        "batch-inference, corpus tokens with generated_share at that speed and the rest at prefill speed"),
    "node_tokens_per_s_int4": (NUMBER, "tokens/s", "the same in the 4-bit lane"),
    "node_prefill_tokens_per_s_fp8": (NUMBER, "tokens/s", "prompt tokens/s one node computes at FP8 when it does "
        "nothing else: its replicas' linear layers at the FP8 peak and attention at the BF16 peak, x the prefill "
        "efficiency, with the TP all-reduces"),
    "node_prefill_tokens_per_s_int4": (NUMBER, "tokens/s", "the same in the 4-bit lane (INT4 W4A16 at the BF16 "
        "peak, FP4 at the FP4 peak)"),
    "ttft_target_s": (NUMBER, "s", "time to the first token the latency class allows a prompt of prompt_tokens "
                      "(MLPerf's limit for its prompts of up to 1,024 tokens, in proportion beyond: "
                      "knowledge/latency.yaml)"),
    "speed_basis": (enum_of(("serving-model", "document")), "", "what sized the speeds: the serving model calibrated "
                    "on published measurements, or the document's 500-2,000 tokens/s per node (the policy's "
                    "document_speed_quote)"),
    "demand_requests_per_s": (NUMBER, "requests/s", "the request rate asked: qps, or tokens_per_s / output_tokens"),
    "rate_demand_tokens_per_s": (NUMBER, "tokens/s", "generated tokens/s the request rate asks for: "
                                 "demand_requests_per_s x output_tokens (what a plan must generate)"),
    "requests_in_target_per_node_fp8": (NUMBER, "requests", "requests one node holds at FP8 while each keeps the "
                                        "latency class's per-user speed and first-token time (memory allowing)"),
    "requests_in_target_per_node_int4": (NUMBER, "requests", "the same in the 4-bit lane"),
    "target_reachable_fp8": (BOOL, "", "one request alone decodes at the latency class's targets on this card at FP8 "
                             "(else no count of replicas gives a user that speed)"),
    "target_reachable_int4": (BOOL, "", "the same in the 4-bit lane"),
    "single_user_tokens_per_s_fp8": (NUMBER, "tokens/s per user", "the fastest one user is served at FP8: one request "
                                     "alone on a replica of tp_fp8 GPUs"),
    "single_user_tokens_per_s_int4": (NUMBER, "tokens/s per user", "the same in the 4-bit lane"),
    "latency_target_tokens_per_s": (NUMBER, "tokens/s per user", "decode speed each user must see in the latency "
                                    "class (knowledge/latency.yaml, from MLPerf's time-per-output-token limits)"),
    "latency_demand_tokens_per_s": (NUMBER, "tokens/s", "concurrency x latency_target_tokens_per_s: the decode "
                                    "every user at the latency target needs"),
    "latency_nodes_fp8": (NUMBER, "nodes", "nodes that hold every concurrent request at FP8 within the latency "
        "class: concurrency / requests_in_target_per_node_fp8, rounded up"),
    "latency_nodes_int4": (NUMBER, "nodes", "the same in the 4-bit lane"),
    "demand_tokens_per_s": (NUMBER, "tokens/s", "generated tokens/s the workload asks for: the largest of the "
        "stated tokens/s, the request rate x output_tokens, the corpus over the deadline and the latency demand"),
    "replicas_needed_fp8": (NUMBER, "replicas", "single-node FP8 replicas that hold the requests in flight within "
        "the latency class and carry the request rate and any other token demand (a corpus over a deadline)"),
    "throughput_nodes_fp8": (NUMBER, "nodes", "nodes whose FP8 throughput carries the request rate and any other "
                             "token demand, the requests in flight aside (what units of several nodes are sized on)"),
    "throughput_nodes_int4": (NUMBER, "nodes", "the same in the 4-bit lane"),
    "replicas_needed_int4": (NUMBER, "replicas", "the same in the 4-bit lane"),
    "batch_days_one_node": (NUMBER, "days", "days one node needs for the corpus"),
    "activation_checkpointing": (BOOL, "", "activations are recomputed in the backward pass (each layer's input kept): "
                                 "on when one sequence's full activations would take over half a GPU's training "
                                 "limit; PEFT recipes always checkpoint"),
    "training_mfu": (NUMBER, "of peak", "model FLOPs utilisation the time to result assumes on this card: the "
                     "tuned-SXM MFU, divided on a PCIe card by the document's SXM penalty (H-SXM-PENALTY)"),
    "training_precision": (enum_of(("bf16", "fp8")), "", "the precision training computes in: fp8 when asked for "
                           "(every card of the catalog has FP8 tensor cores), else bf16"),
    "training_state_gb": (NUMBER, "GB", "resident training state of the whole job (weights, grads, optimizer, "
                          "activations; PEFT: frozen base, adapters, activations, logits)"),
    "training_state_fraction": (NUMBER, "of node VRAM", "training state / node VRAM"),
    "training_sharding": (enum_of(SHARDINGS), "", "how one node's GPUs hold the training state: none (every GPU "
                          "keeps it all, DDP) when that fits, else fsdp (FSDP / ZeRO-3 sharding)"),
    "training_gpu_state_gb": (NUMBER, "GB", "training state of each GPU on one node: states (sharded under fsdp) + "
                              "the largest module gathered (fsdp) + the GPU's share of the activations"),
    "training_gpu_fraction": (NUMBER, "of card memory", "training_gpu_state_gb / card memory"),
    "training_nodes": (NUMBER, "nodes", "nodes whose GPUs hold the training state within the training limit each "
                       "(FSDP over all their GPUs beyond one node)"),
    "training_sharding_at_nodes": (enum_of(SHARDINGS), "", "how the GPUs of training_nodes nodes hold the state: "
                                   "training_sharding on one node, fsdp (FSDP / ZeRO-3) over more"),
    "training_gpu_state_gb_at_nodes": (NUMBER, "GB", "training state of each GPU on training_nodes nodes (FSDP / "
                                       "ZeRO-3 over all their GPUs beyond one node, TP inside each node "
                                       "splitting a sequence's activations)"),
    "qlora_state_gb": (NUMBER, "GB", "the training state of the same LoRA job as QLoRA (4-bit frozen base)"),
    "qlora_state_fraction": (NUMBER, "of node VRAM", "QLoRA training state / node VRAM"),
    "qlora_sharding": (enum_of(SHARDINGS), "", "how one node's GPUs hold the same job's state as QLoRA"),
    "qlora_nodes": (NUMBER, "nodes", "nodes that hold the same LoRA job's state as QLoRA"),
    "full_node_vram_gb": (NUMBER, "GB", "VRAM of one full node of this card (full_node_gpus cards)"),
    "full_node_workload_fraction_int4": (NUMBER, "of card memory", "INT4 weights + KV + runtime overhead of the "
                                         "busiest GPU of one full node holding every request / card memory"),
    "full_node_training_fraction": (NUMBER, "of card memory", "training state of each GPU of one full node / card "
                                    "memory"),
    "training_compute_zflop": (NUMBER, "ZFLOP", "training compute, 6 x active params x tokens (model FLOPs)"),
    "training_gpu_months": (NUMBER, "GPU-months", "GPU-months on this card at training_mfu"),
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
    "scale_out_nodes_int4": (NUMBER, "nodes", "nodes of a multi-node plan's unit at INT4 (at least two): the QLoRA "
                             "state's nodes for LoRA run as QLoRA, demand_unit_nodes_int4 for serving"),
    "naive_tp_efficiency_int4": (NUMBER, "per GPU", "TP across every GPU of scale_out_nodes_int4 nodes"),
    "plan_efficiency_int4": (NUMBER, "per GPU", "TP inside each node x PP across scale_out_nodes_int4 nodes"),
    "proposed_total_gpus": (NUMBER, "GPUs", "GPUs in the proposed build"),
    "proposed_tp_efficiency": (NUMBER, "per GPU", "TP across the proposed build"),
    "proposed_one_node_efficiency": (NUMBER, "per GPU", "TP over the same GPUs in one node"),
    **DEADLINE_FIGURE_SPECS,
}

# name: (type, unit, description); figures of the recommended plan, computed after the rules decide it
# (domain/plan.py), so in the answer but not visible to the rules
PLAN_FIGURE_SPECS: dict[str, tuple[object, str, str]] = {
    "plan_gpu_memory_gb": (NUMBER, "GB", "memory of the plan's busiest GPU: inference, weights / (TP x PP) + its "
                           "requests' KV + runtime overhead; training, the per-GPU state at the plan's nodes (FSDP / "
                           "ZeRO-3 formula) or the whole state per GPU when unsharded"),
    "plan_gpu_memory_fraction": (NUMBER, "of card memory", "plan_gpu_memory_gb / the plan card's memory"),
    "plan_gpu_weights_gb": (NUMBER, "GB", "inference: the weights on the busiest GPU, weights / (TP x PP)"),
    "plan_gpu_kv_cache_gb": (NUMBER, "GB", "inference: the KV cache of the busiest GPU's requests (per rank, "
                             "replicated heads and an MLA latent included)"),
    "plan_gpu_overhead_gb": (NUMBER, "GB", "inference: the runtime overhead of each GPU"),
    "plan_gpu_states_gb": (NUMBER, "GB", "training: weights, gradients and optimizer states on each GPU "
                           "(sharded over all the plan's GPUs under FSDP / ZeRO-3, else whole)"),
    "plan_gpu_gathered_gb": (NUMBER, "GB", "training under FSDP / ZeRO-3: the largest module gathered whole"),
    "plan_gpu_activations_gb": (NUMBER, "GB", "training: each GPU's share of the activations of the tokens in "
                                "flight"),
    "plan_gpu_memory_limit": (NUMBER, "of card memory", "the share of each card the policy allows the plan: "
                              "workload_fraction_max for serving, training_fraction_max for training"),
    "per_user_tokens_per_s": (NUMBER, "tokens/s per user", "decode speed each request sees on the plan: 1 / the time "
                              "per output token of the serving model for each replica (or TP x PP unit) at its share "
                              "of the requests in flight or of the request rate, prefills included (serving plans)"),
    "output_tokens_per_s": (NUMBER, "tokens/s", "generated tokens/s the plan gives at that load: all its replicas "
                            "(serving plans)"),
    "time_to_first_token_s": (NUMBER, "s", "seconds from a request to its first token on the plan: its prompt's "
                              "prefill and the wait behind the others' (serving plans)"),
    "concurrency_in_flight": (NUMBER, "requests", "requests in flight on the plan: the stated concurrency, or the "
                              "request rate x the time each is in flight (Little's law, serving plans)"),
    "plan_efficiency": (NUMBER, "per GPU", "training: the plan's per-GPU efficiency, TP inside one node, or over nodes "
                        "its time against the same work spread perfectly over them (before the rules decide, the "
                        "projection of the scale-out unit goes by this name)"),
}

FIGURE_MAX = 1e24  # every figure is a number in [0, 1e24]; at the facts' extremes the largest is ~1e17
# counts that the sizing makes at least 1 (nodes_for, replicas_needed and ceil of a positive count)
AT_LEAST_ONE = frozenset({
    "serving_nodes_fp8", "serving_nodes_int4", "replicas_for_concurrency_fp8", "replicas_for_concurrency_int4",
    "dp_replicas_fp8", "dp_replicas_int4", "replicas_needed_fp8", "replicas_needed_int4", "latency_nodes_fp8",
    "throughput_nodes_fp8", "throughput_nodes_int4",
    "latency_nodes_int4", "training_nodes",
    "qlora_nodes", "scale_out_nodes", "scale_out_nodes_int4", "proposed_total_gpus", "demand_unit_nodes_fp8",
    "demand_unit_nodes_int4",
    "demand_units_fp8", "demand_units_int4"}) | DEADLINE_AT_LEAST_ONE
# What a recommend field that is a count may be when a rule gives it as a constant (rules check, E027):
# a whole number of at least 1 within the figures' range; a node's GPUs within the input contract's.
RECOMMENDED_COUNTS = {field: ParameterRange(1, FIGURE_MAX, whole=True, what="a whole number")
                      for field in ("nodes", "replicas", "tp", "pp", "dp")} | {"gpus_per_node": GPU_COUNT}
TP_MAX = MAX_GPUS_PER_NODE  # an in-node TP divides gpus_per_node (domain/workload.py)
RANGES = {"tp_fp8": (1.0, TP_MAX), "tp_int4": (1.0, TP_MAX)}


def figure_range(name: str) -> tuple[float, float]:
    """The declared range of a numeric figure (`compute_figures` refuses a figure outside it)."""
    if name in RANGES:
        return RANGES[name]
    return (1.0 if name in AT_LEAST_ONE else 0.0), FIGURE_MAX


@dataclass(frozen=True)
class Figure:
    """One sizing number as the answer reports it."""

    name: str
    value: float | int | bool | str
    unit: str
    description: str
