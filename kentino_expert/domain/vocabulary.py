"""The words every layer shares, each written once: tasks, precisions, latencies, tenancies, kinds, statuses."""
from __future__ import annotations

from typing import Literal

from ..errors import InputError

Task = Literal["inference", "batch-inference", "lora", "qlora", "full-finetune", "pretraining"]
Precision = Literal["bf16", "fp8", "int4", "fp4"]
Latency = Literal["interactive", "production", "offline"]
Tenancy = Literal["single", "multi"]
# what an answer recommends, in the order answers and why-not list them
Kind = Literal["single-node", "single-node-int4", "dp-replicas", "multi-node-ib", "frontier"]
Status = Literal["final", "provisional"]  # provisional while a fact worth asking for is unknown

TASKS: tuple[str, ...] = Task.__args__
PRECISIONS: tuple[str, ...] = Precision.__args__  # the one list of weight precisions (fp4: Blackwell cards only)
LATENCIES: tuple[str, ...] = Latency.__args__
TENANCIES: tuple[str, ...] = Tenancy.__args__
KINDS: tuple[str, ...] = Kind.__args__
STATUSES: tuple[str, ...] = Status.__args__
INFERENCE_TASKS = ("inference", "batch-inference")
TRAINING_TASKS = tuple(task for task in TASKS if task not in INFERENCE_TASKS)


def check_kind(value) -> str | None:
    """A kind a caller filters decisions by, or None: a misspelt one is refused, not read as "no decisions"."""
    if value is None or value == "":
        return None
    if value not in KINDS:
        raise InputError(f"must be one of {', '.join(KINDS)}", field="kind")
    return value
