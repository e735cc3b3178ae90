"""The builds weighed (the answer's `alternatives` beside the recommended plan, in GPUs) and the time to
result of each (days against the deadline), for training and batch corpora."""
from __future__ import annotations

from collections.abc import Mapping

from .common import (
    BATCH_TASK,
    ChartContext,
    axis_end,
    build_label,
    count,
    days,
    figure,
    is_training,
    number,
    plan,
    task_of,
)
from .spec import DEADLINE, FAILS, NEUTRAL, WORKS, Bar, Chart, Line, Segment, Table

TIME_FIGURE = "time_to_result_days"  # the plan figure of a training or batch plan, and an alternative's figure


def _alternatives(answer: Mapping) -> list[Mapping]:
    return [item for item in (answer.get("alternatives") or []) if isinstance(item, Mapping)]


def _gpus(gpus_per_node, nodes) -> int:
    return (count(gpus_per_node) or 1) * (count(nodes) or 1)


def _deciding(item: Mapping) -> str:
    """'time_to_result_days = 41.2 days' for an alternative's deciding figure ('' when it has none)."""
    deciding = item.get("figure")
    if not isinstance(deciding, Mapping) or not deciding.get("name"):
        return ""
    value = deciding.get("value")
    shown = f"{value:,.3g}" if number(value) is not None else str(value)
    return f"{deciding['name']} = {shown} {deciding.get('unit') or ''}".strip()


def builds_chart(answer: Mapping, context: ChartContext) -> Chart | None:
    """GPUs per build: the recommended plan first (highlighted), then each alternative, works or not."""
    alternatives = _alternatives(answer)
    if not alternatives:
        return None
    rec = plan(answer)
    rows = [(rec, True, True)] + [(item, bool(item.get("works")), False) for item in alternatives]
    bars, table = [], []
    for item, works, recommended in rows:
        label = build_label(item.get("gpu"), item.get("gpus_per_node"), count(item.get("nodes")))
        gpus = _gpus(item.get("gpus_per_node"), item.get("nodes"))
        verdict = "recommended" if recommended else ("works" if works else "does not work")
        open_count = count(item.get("nodes")) is None and not recommended
        text = f"{'at least ' if open_count else ''}{gpus} GPUs, {item.get('kind')}: {verdict}"
        why = rec.get("summary", "") if recommended else str(item.get("why") or "")
        bars.append(Bar(label, (Segment("GPUs", gpus, NEUTRAL),), text, WORKS if works else FAILS,
                        highlighted=recommended, note=why))
        table.append((label, str(item.get("kind")), str(item.get("precision")), str(gpus), verdict,
                      "" if recommended else _deciding(item), why))
    failing = [bar.label for bar in bars if bar.status == FAILS]
    summary = (f"Builds weighed: {bars[0].label} is recommended ({bars[0].value_text.split(':')[0]}); "
               f"{len(bars) - 1} other builds sized"
               + (f", of which {', '.join(failing)} {'does' if len(failing) == 1 else 'do'} not work." if failing
                  else ", every one buildable."))
    return Chart("builds", "The builds weighed", "GPUs", tuple(bars), (), axis_end(*(b.total for b in bars)),
                 summary, Table(("build", "kind", "precision", "GPUs", "verdict", "deciding figure", "why"),
                                tuple(table)),
                 "From the answer's alternatives: the best plan of every other card the build search sized.")


def time_chart(answer: Mapping, context: ChartContext) -> Chart | None:
    """Days to result per build against the deadline line, for training and batch corpora."""
    if not (is_training(answer) or task_of(answer) == BATCH_TASK):
        return None
    rows = _time_rows(answer)
    if not rows:
        return None
    deadline = number((answer.get("facts") or {}).get("deadline_days"))
    deadline = deadline if deadline is not None and deadline > 0 else None
    bars, table = [], []
    for label, value, recommended, unbuildable in rows:
        missed = deadline is not None and value > deadline
        verdict = ("misses the deadline" if missed else "meets the deadline") if deadline is not None else ""
        verdict = f"{verdict}; {unbuildable}" if verdict and unbuildable else (verdict or unbuildable or "")
        missed = missed or unbuildable is not None
        text = days(value) + (f", {verdict}" if verdict else "") + (" (recommended)" if recommended else "")
        bars.append(Bar(label, (Segment("days", value, NEUTRAL),), text, FAILS if missed else WORKS,
                        highlighted=recommended))
        table.append((label, days(value), verdict or "-", "yes" if recommended else ""))
    if not any(bar.highlighted for bar in bars):
        table.append(("the recommended plan", "no figure in this answer", "-", "yes"))
    lines = (Line(f"deadline {deadline:g} days", deadline, DEADLINE),) if deadline is not None else ()
    summary = ("Time to result" + (f" against the {deadline:g}-day deadline" if deadline is not None else "")
               + ": " + "; ".join(f"{bar.label} {bar.value_text}" for bar in bars) + ".")
    return Chart("time", "Time to result", "days", tuple(bars), lines,
                 axis_end(deadline, *(bar.total for bar in bars)), summary,
                 Table(("build", "time to result", "verdict", "recommended"), tuple(table)),
                 "From time_to_result_days of the plan and of the alternatives decided by it."
                 if figure(answer, TIME_FIGURE) is not None else
                 "From the answer's figures for one node and for the scale-out plan"
                 + (" (the corpus split evenly over the plan's nodes)." if task_of(answer) == BATCH_TASK else "."))


def _time_rows(answer: Mapping) -> list[tuple[str, float, bool]]:
    """(label, days, recommended, why it cannot be built or None): the plan's time_to_result_days and each
    alternative's, or (answers without it) the one-node and scale-out figures, the recommended one first."""
    rec = plan(answer)
    nodes = count(rec.get("nodes"))
    own = figure(answer, TIME_FIGURE)
    if own is not None:
        rows = [(build_label(rec.get("gpu"), rec.get("gpus_per_node"), nodes), own, True, None)]
        for item in _alternatives(answer):
            deciding = item.get("figure") if isinstance(item.get("figure"), Mapping) else {}
            if deciding.get("name") == TIME_FIGURE and number(deciding.get("value")) is not None:
                label = build_label(item.get("gpu"), item.get("gpus_per_node"), count(item.get("nodes")))
                rows.append((label, float(deciding["value"]), False, None))
        return rows
    facts = answer.get("facts") or {}
    gpus_per_node, gpu = rec.get("gpus_per_node") or facts.get("gpus_per_node"), rec.get("gpu") or facts.get("gpu")
    rows = []
    batch = figure(answer, "batch_days_one_node")
    if task_of(answer) == BATCH_TASK and batch is not None:
        rows.append((build_label(gpu, gpus_per_node, 1), batch, nodes in (None, 1), None))
        if nodes is not None and nodes > 1:  # replicas split the corpus: no traffic between them
            rows.append((build_label(gpu, gpus_per_node, nodes), batch / nodes, True, None))
    one, spread = figure(answer, "days_on_one_node"), figure(answer, "days_on_plan")
    out_nodes, state_nodes = count(figure(answer, "scale_out_nodes")), count(figure(answer, "training_nodes"))
    if one is not None:
        too_small = f"the state needs {state_nodes} nodes" if (state_nodes or 1) > 1 else None
        rows.append((build_label(gpu, gpus_per_node, 1), one, nodes in (None, 1), too_small))
    if spread is not None and out_nodes is not None:
        rows.append((build_label(gpu, gpus_per_node, out_nodes), spread, nodes == out_nodes, None))
    return sorted(rows, key=lambda row: not row[2])
