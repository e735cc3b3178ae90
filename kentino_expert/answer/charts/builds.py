"""The builds weighed: the recommended plan (highlighted) beside the answer's `alternatives`, in GPUs, each in
its kind's colour and marked works or does not work by the selection policy (rules/selection.yaml), so a card
switch shows why."""
from __future__ import annotations

from collections.abc import Mapping

from .common import ChartContext, alternatives, axis_end, build_label, count, number, plan, unbuildable
from .spec import FAILS, NEUTRAL, WORKS, Bar, Chart, Segment, Table, kind_role


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
    others = alternatives(answer)
    if not others:
        return None
    rec = plan(answer)
    failing = unbuildable(answer, context)  # a frontier plan is recommended when no build works
    rows = [(rec, failing is None, True)] + [(item, bool(item.get("works")), False) for item in others]
    bars, table = [], []
    for item, works, recommended in rows:
        label = build_label(item.get("gpu"), item.get("gpus_per_node"), count(item.get("nodes")))
        gpus = _gpus(item.get("gpus_per_node"), item.get("nodes"))
        verdict = ("works" if works else "does not work") if not recommended else (
            "recommended" if works else "recommended, does not work")
        open_count = count(item.get("nodes")) is None and not recommended
        text = f"{'at least ' if open_count else ''}{gpus} GPUs, {item.get('kind')}: {verdict}"
        why = (failing[1] if failing else rec.get("summary", "")) if recommended else str(item.get("why") or "")
        kind = kind_role(item.get("kind"))
        bars.append(Bar(label, (Segment(kind if kind != NEUTRAL else "GPUs", gpus, kind),), text,
                        WORKS if works else FAILS, highlighted=recommended, note=why))
        deciding = (failing[0] if failing else "") if recommended else _deciding(item)
        table.append((label, str(item.get("kind")), str(item.get("precision")), str(gpus), verdict, deciding, why))
    failed = [bar.label for bar in bars[1:] if bar.status == FAILS]
    summary = (f"Builds weighed: {bars[0].label} is recommended ({bars[0].value_text.split(':')[0]}"
               + ("" if failing is None else f"; it does not work: {failing[1]}") + f"); "
               f"{len(bars) - 1} other builds sized"
               + (f", of which {', '.join(failed)} {'does' if len(failed) == 1 else 'do'} not work." if failed
                  else ", every one buildable."))
    return Chart("builds", "The builds weighed", "GPUs", tuple(bars), (), axis_end(*(b.total for b in bars)),
                 summary, Table(("build", "kind", "precision", "GPUs", "verdict", "deciding figure", "why"),
                                tuple(table)),
                 "From the answer's alternatives: the best plan of every other card the build search sized.")
