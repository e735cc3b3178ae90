"""The memory-per-GPU chart: one stacked bar of the recommended plan's busiest GPU (weights, KV cache,
activations or optimizer state, runtime overhead) against the card's memory and the policy's limit.

It reads the plan's own per-GPU figures when the answer carries them (plan_gpu_memory_gb and its parts);
an answer without them gets the node figures split evenly over the plan's GPUs, and says so in its caption.
"""
from __future__ import annotations

from collections.abc import Mapping

from .common import UNIT_KINDS, ChartContext, count, figure, gb, is_training, plan, share, task_of
from .spec import (
    CAPACITY,
    FAILS,
    KV_CACHE,
    LIMIT,
    OTHER,
    OVERHEAD,
    STATE,
    WEIGHTS,
    WORKS,
    Bar,
    Chart,
    Line,
    Segment,
    Table,
)

# The per-GPU parts of the recommended plan, as the answer's figures name them: (figure, label, role).
PLAN_PARTS = (
    ("plan_gpu_weights_gb", "weights", WEIGHTS),
    ("plan_gpu_kv_cache_gb", "KV cache", KV_CACHE),
    ("plan_gpu_states_gb", "weights, gradients and optimizer state", "optimizer"),
    ("plan_gpu_gathered_gb", "largest module gathered (FSDP)", "state"),
    ("plan_gpu_activations_gb", "activations", "activations"),
    ("plan_gpu_overhead_gb", "runtime overhead", OVERHEAD),
)
PLAN_TOTAL = "plan_gpu_memory_gb"
# The rule parameter (rules/parameters.yaml) that caps a GPU's memory: by inference or training.
LIMIT_SERVING, LIMIT_TRAINING = "workload_fraction_max", "training_fraction_max"
PLAN_SOURCE = "the recommended plan's per-GPU figures (plan_gpu_memory_gb and its parts)"
SPLIT_SOURCE = ("the answer's node figures split evenly over the plan's GPUs (this answer carries no "
                "per-GPU figures of its plan)")


def memory_chart(answer: Mapping, context: ChartContext) -> Chart | None:
    """The chart, or None when the answer has no card memory or no memory figures for its plan."""
    card = figure(answer, "gpu_memory_gb")
    found = _plan_parts(answer, card) or _even_split(answer)
    if not card or found is None:
        return None
    segments, source = found
    total = sum(segment.value for segment in segments)
    limit_name = LIMIT_TRAINING if is_training(answer) else LIMIT_SERVING
    fraction = context.parameter(limit_name)
    lines = [Line(f"card memory {card:g} GB", card, CAPACITY)]
    if fraction is not None:
        lines.append(Line(f"policy limit {share(fraction)} ({limit_name}) = {gb(fraction * card)}",
                          fraction * card, LIMIT))
    within = fraction is None or total <= fraction * card * (1 + 1e-9)
    gpu = plan(answer).get("gpu") or (answer.get("facts") or {}).get("gpu") or "GPU"
    bar = Bar(f"one {gpu}", tuple(segments), f"{gb(total)} ({share(total / card)} of the card)",
              WORKS if within else FAILS, highlighted=True)
    parts = ", ".join(f"{segment.label} {gb(segment.value)}" for segment in segments)
    limit_words = (f"; the policy's limit ({limit_name}) is {gb(fraction * card)}, {share(fraction)} of the card"
                   if fraction is not None else "")
    summary = (f"Memory per GPU under the recommended plan: {gb(total)} of the card's {card:g} GB "
               f"({share(total / card)}): {parts}{limit_words}.")
    return Chart("memory", "Memory per GPU", "GB", (bar,), tuple(lines), max(card, total) * 1.08, summary,
                 _table(segments, total, card, fraction, limit_name), f"From {source}.")


def _table(segments, total: float, card: float, fraction: float | None, limit_name: str) -> Table:
    rows = [(segment.label, gb(segment.value), share(segment.value / card)) for segment in segments]
    rows.append(("total per GPU", gb(total), share(total / card)))
    rows.append(("card memory", gb(card), share(1.0)))
    if fraction is not None:
        rows.append((f"policy limit ({limit_name})", gb(fraction * card), share(fraction)))
    return Table(("part", "GB per GPU", "of the card"), tuple(rows))


def _plan_parts(answer: Mapping, card: float | None) -> tuple[list[Segment], str] | None:
    """The plan's own per-GPU parts (a rest segment when they fall short of its total), or its total alone."""
    segments = [Segment(label, value, role) for name, label, role in PLAN_PARTS
                if (value := figure(answer, name)) is not None and value > 0]
    total = figure(answer, PLAN_TOTAL)
    if total is not None:
        rest = total - sum(segment.value for segment in segments)
        if not segments:
            segments = [Segment("memory of the busiest GPU", total, STATE)]
        elif rest > 0.005 * (card or total):
            segments.append(Segment("other", rest, OTHER))
    return (segments, PLAN_SOURCE) if segments else None


def _even_split(answer: Mapping) -> tuple[list[Segment], str] | None:
    """The node figures over the plan's GPUs: weights over the GPUs of one model copy, KV cache over every
    GPU holding requests, the runtime overhead per GPU; a training state sharded over all of the plan's GPUs."""
    rec = plan(answer)
    gpus = count(rec.get("gpus_per_node")) or count((answer.get("facts") or {}).get("gpus_per_node"))
    nodes = count(rec.get("nodes"))
    if gpus is None or (nodes is None and rec.get("kind") in UNIT_KINDS):
        return None
    if is_training(answer):
        state = _training_state(answer, rec)
        if state is None:
            return None
        label = "training state (weights, gradients, optimizer, activations)"
        return [Segment(label, state / (gpus * (nodes or 1)), STATE)], SPLIT_SOURCE
    return _serving_split(answer, rec, gpus, nodes)


def _training_state(answer: Mapping, rec: Mapping) -> float | None:
    """The state of the job the plan trains: the QLoRA state where the rules moved a LoRA job to INT4."""
    if task_of(answer) == "lora" and rec.get("precision") == "int4" and figure(answer, "qlora_state_gb"):
        return figure(answer, "qlora_state_gb")
    return figure(answer, "training_state_gb")


def _serving_split(answer: Mapping, rec: Mapping, gpus: int, nodes: int | None):
    precision = rec.get("precision")
    weights = figure(answer, f"weights_gb_{precision}")
    kv = figure(answer, "kv_cache_gb")
    fraction, vram = figure(answer, f"workload_fraction_{precision}"), figure(answer, "node_vram_gb")
    if None in (weights, kv, fraction, vram):
        return None
    unit = count((rec.get("parallelism") or {}).get("pp")) or (nodes if rec.get("kind") in UNIT_KINDS else 1)
    copies = count(rec.get("replicas")) or 1
    overhead = max(0.0, fraction * vram - weights - kv) / gpus
    segments = [Segment("weights", weights / (gpus * unit), WEIGHTS),
                Segment("KV cache", kv / (gpus * unit * copies), KV_CACHE),
                Segment("runtime overhead", overhead, OVERHEAD)]
    return [segment for segment in segments if segment.value > 0], SPLIT_SOURCE
