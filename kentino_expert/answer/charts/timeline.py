"""Time to result for training and batch corpora: the days of the recommended plan and of every build the
search weighed (each alternative's own `time_to_result_days`), against the deadline line where one was given."""
from __future__ import annotations

from collections.abc import Mapping

from .common import (
    BATCH_TASK,
    ChartContext,
    alternatives,
    axis_end,
    build_label,
    count,
    days,
    figure,
    is_training,
    number,
    plan,
    task_of,
    unbuildable,
)
from .spec import DEADLINE, FAILS, NEUTRAL, WORKS, Bar, Chart, Line, Segment, Table, kind_role

TIME_FIGURE = "time_to_result_days"  # the plan figure of a training or batch plan, and each alternative's


def alternative_days(item: Mapping) -> float | None:
    """An alternative's days: its own time_to_result_days, or (answers logged before alternatives carried
    them) its deciding figure when that is the time."""
    own = number(item.get(TIME_FIGURE))
    if own is not None:
        return own
    deciding = item.get("figure") if isinstance(item.get("figure"), Mapping) else {}
    return number(deciding.get("value")) if deciding.get("name") == TIME_FIGURE else None


def time_chart(answer: Mapping, context: ChartContext) -> Chart | None:
    """Days to result per build against the deadline line, for training and batch corpora."""
    if not (is_training(answer) or task_of(answer) == BATCH_TASK):
        return None
    own = figure(answer, TIME_FIGURE)
    rows = _rows(answer, context, own) if own is not None else _legacy_rows(answer)
    if not rows:
        return None
    deadline = number((answer.get("facts") or {}).get("deadline_days"))
    deadline = deadline if deadline is not None and deadline > 0 else None
    bars, table = [], []
    for label, value, recommended, not_built, kind in rows:
        missed = deadline is not None and value > deadline * (1 + 1e-9)
        verdict = ("misses the deadline" if missed else "meets the deadline") if deadline is not None else ""
        verdict = "; ".join(part for part in (verdict, "does not work" if not_built else "") if part)
        text = days(value) + (f", {verdict}" if verdict else "")
        role = kind_role(kind)
        bars.append(Bar(label, (Segment(role if role != NEUTRAL else "days", value, role),), text,
                        FAILS if missed or not_built else WORKS, highlighted=recommended, note=not_built or ""))
        table.append((label, days(value), verdict or "-", not_built or "", "yes" if recommended else ""))
    if not any(bar.highlighted for bar in bars):
        table.append(("the recommended plan", "no figure in this answer", "-", "", "yes"))
    lines = (Line(f"deadline {deadline:g} days", deadline, DEADLINE),) if deadline is not None else ()
    summary = ("Time to result" + (f" against the {deadline:g}-day deadline" if deadline is not None else "")
               + ": " + "; ".join(f"{bar.label}{' (recommended)' if bar.highlighted else ''} {bar.value_text}"
                                 for bar in bars) + ".")
    source = ("From time_to_result_days of the plan and of each alternative the build search sized."
              if own is not None else "From the answer's figures for one node and for the scale-out plan"
              + (" (the corpus split evenly over the plan's nodes)." if task_of(answer) == BATCH_TASK else "."))
    return Chart("time", "Time to result", "days", tuple(bars), lines,
                 axis_end(deadline, *(bar.total for bar in bars)), summary,
                 Table(("build", "time to result", "verdict", "why it is not built", "recommended"), tuple(table)),
                 source, fails_label="misses the deadline or does not work")


def _rows(answer: Mapping, context: ChartContext, own: float) -> list[tuple]:
    """(label, days, recommended, why it is not built or None, kind): the plan, then each alternative with days."""
    rec = plan(answer)
    failing = unbuildable(answer, context)  # a missed deadline is the line's to show, not a note's
    rows = [(build_label(rec.get("gpu"), rec.get("gpus_per_node"), count(rec.get("nodes"))), own, True,
             failing[1] if failing and failing[0] != TIME_FIGURE else None, rec.get("kind"))]
    for item in alternatives(answer):
        value = alternative_days(item)
        if value is not None:
            label = build_label(item.get("gpu"), item.get("gpus_per_node"), count(item.get("nodes")))
            deciding = item.get("figure") if isinstance(item.get("figure"), Mapping) else {}
            failing = None if item.get("works") else str(item.get("why") or "does not work")
            why = None if deciding.get("name") == TIME_FIGURE else failing
            rows.append((label, value, False, why, item.get("kind")))
    return rows


def _legacy_rows(answer: Mapping) -> list[tuple]:
    """Answers without time_to_result_days: the one-node and scale-out figures, the recommended one first."""
    rec = plan(answer)
    nodes = count(rec.get("nodes"))
    facts = answer.get("facts") or {}
    gpus_per_node, gpu = rec.get("gpus_per_node") or facts.get("gpus_per_node"), rec.get("gpu") or facts.get("gpu")
    rows = []
    batch = figure(answer, "batch_days_one_node")
    if task_of(answer) == BATCH_TASK and batch is not None:
        rows.append((build_label(gpu, gpus_per_node, 1), batch, nodes in (None, 1), None, None))
        if nodes is not None and nodes > 1:  # replicas split the corpus: no traffic between them
            rows.append((build_label(gpu, gpus_per_node, nodes), batch / nodes, True, None, rec.get("kind")))
    one, spread = figure(answer, "days_on_one_node"), figure(answer, "days_on_plan")
    out_nodes, state_nodes = count(figure(answer, "scale_out_nodes")), count(figure(answer, "training_nodes"))
    if one is not None:
        too_small = f"the state needs {state_nodes} nodes" if (state_nodes or 1) > 1 else None
        rows.append((build_label(gpu, gpus_per_node, 1), one, nodes in (None, 1), too_small,
                     rec.get("kind") if nodes in (None, 1) else None))
    if spread is not None and out_nodes is not None:
        rows.append((build_label(gpu, gpus_per_node, out_nodes), spread, nodes == out_nodes, None,
                     rec.get("kind") if nodes == out_nodes else None))
    return sorted(rows, key=lambda row: not row[2])
