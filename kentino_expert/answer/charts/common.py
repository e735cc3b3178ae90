"""What every chart builder reads from an answer (a JSON-shaped dict) and from the rules and knowledge that
answered it: figures by name, the plan, the policy's parameters, the document's measured points."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ...domain.state import recommendation_key
from ...domain.vocabulary import TRAINING_TASKS
from ...lang.semantics import truth_of
from ...lang.templates import render_layers

UNIT_KINDS = ("multi-node-ib", "frontier")  # kinds whose nodes form one TP x PP unit
BATCH_TASK = "batch-inference"


@dataclass(frozen=True)
class ChartContext:
    """What a chart needs besides the answer: the loaded rule set's parameter values (the policy's lines) and
    the source document's measured efficiency points (label, value) from knowledge/."""

    parameters: Mapping[str, object] = field(default_factory=dict)
    calibration: tuple[tuple[str, float], ...] = ()
    works: tuple = ()  # the selection policy's `works` conditions (rules/selection.yaml): is a plan buildable

    def parameter(self, name: str) -> float | None:
        return number(self.parameters.get(name))


def context_of(expert) -> ChartContext:
    """The chart context of an Expert: its rule set's parameters and knowledge/sizing.yaml's calibration."""
    scaling = (expert.knowledge.sizing or {}).get("scaling") or {}
    points = []
    for point in ((scaling.get("calibration") or {}).values()):
        if isinstance(point, dict) and number(point.get("efficiency")) is not None:
            nodes = point.get("nodes")
            where = "1 node" if nodes == 1 else f"{nodes} nodes"
            points.append((f"document: TP, {point.get('gpus')} GPUs, {where}, {point.get('link')}",
                           float(point["efficiency"])))
    selection = expert.ruleset.selection
    return ChartContext(dict(expert.ruleset.parameter_values), tuple(points),
                        tuple(selection.works) if selection is not None else ())


def unbuildable(answer: Mapping, context: ChartContext) -> tuple[str, str] | None:
    """Why the recommended plan is not one Kentino builds: (figure, sentence) of the first of the policy's
    `works` conditions that fails on the answer's facts, figures and recommendation (None: it is buildable, or
    no policy was loaded), as the build search judges an alternative."""
    env = {**context.parameters, **(answer.get("facts") or {})}
    env.update({name: item.get("value") for name, item in (answer.get("figures") or {}).items()
                if isinstance(item, Mapping)})
    env.update({recommendation_key(name): value for name, value in plan(answer).items() if value is not None})
    for condition in context.works:
        if not truth_of(condition.node, env):
            return condition.figure, render_layers(condition.says, (env,))
    return None


def alternatives(answer: Mapping) -> list[Mapping]:
    """The answer's alternatives (none in answers logged before the build search)."""
    return [item for item in (answer.get("alternatives") or []) if isinstance(item, Mapping)]


def number(value) -> float | None:
    """A finite number, or None (bools, strings and missing values are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def figure(answer: Mapping, name: str) -> float | None:
    """The numeric value of a figure of the answer, or None when it has none."""
    item = (answer.get("figures") or {}).get(name)
    return number(item.get("value")) if isinstance(item, Mapping) else None


def plan(answer: Mapping) -> Mapping:
    return answer.get("recommendation") or {}


def count(value) -> int | None:
    """A positive whole count, or None."""
    value = number(value)
    return int(value) if value is not None and value >= 1 else None


def task_of(answer: Mapping) -> str | None:
    return (answer.get("facts") or {}).get("task")


def is_training(answer: Mapping) -> bool:
    return task_of(answer) in TRAINING_TASKS


def build_label(gpu, gpus_per_node, nodes) -> str:
    """'2 nodes x 8 x rtx-pro-6000' (one node: '8 x rtx-pro-6000'; nodes left open: '8 x gpu per node')."""
    card = f"{gpus_per_node or '?'} x {gpu or '?'}"
    if nodes is None:
        return f"{card} per node"
    return card if nodes == 1 else f"{nodes} nodes x {card}"


def gb(value: float) -> str:
    return f"{value:,.1f} GB"


def days(value: float) -> str:
    return f"{value:,.1f} days"


def share(value: float) -> str:
    return f"{value:.0%}"


def axis_end(*values: float) -> float:
    """The axis end: 5% beyond the largest value (1 when there is nothing to show)."""
    top = max([v for v in values if v is not None] or [0.0])
    return top * 1.05 if top > 0 else 1.0
