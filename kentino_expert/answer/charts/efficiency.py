"""The scaling-efficiency chart, where the plan crosses nodes: the plan's projected per-GPU efficiency, the
naive TP across every node it replaced, TP inside one node of the card, the source document's measured
points, and the policy's floor (rules/parameters.yaml `efficiency_floor`)."""
from __future__ import annotations

from collections.abc import Mapping

from .common import UNIT_KINDS, ChartContext, axis_end, count, figure, plan
from .spec import FAILS, FLOOR, NEUTRAL, REFERENCE, WORKS, Bar, Chart, Line, Segment, Table

FLOOR_PARAMETER = "efficiency_floor"


def crosses_nodes(rec: Mapping) -> bool:
    """More than one node working on one job: a TP x PP unit, or nodes joined by an interconnect."""
    nodes = count(rec.get("nodes"))
    return nodes is not None and nodes > 1 and (rec.get("kind") in UNIT_KINDS or bool(rec.get("interconnect")))


def _ratio(value: float) -> str:
    return f"{value:.2f}x per GPU"


def efficiency_chart(answer: Mapping, context: ChartContext) -> Chart | None:
    """The chart, or None when the plan stays in one node or the answer has no efficiency figures."""
    rec = plan(answer)
    if not crosses_nodes(rec):
        return None
    nodes = count(figure(answer, "scale_out_nodes")) or count(rec.get("nodes"))
    pp = count((rec.get("parallelism") or {}).get("pp"))
    replicas_only = rec.get("kind") == "dp-replicas" and (pp or 1) == 1
    own_name = "dp_efficiency" if replicas_only else "plan_efficiency"
    own = figure(answer, own_name)
    if own is None:
        return None
    floor = context.parameter(FLOOR_PARAMETER)
    what = "DP replicas over" if replicas_only else "TP in node, PP across"
    planned = count(rec.get("nodes"))
    own_label = (f"this plan: {what} {nodes} nodes" if planned == nodes
                 else f"the plan's layout, {what} {nodes} nodes (the plan has {planned})")
    rows = [(own_label, own, WORKS if floor is None or own >= floor else FAILS, True)]
    for name, label in (("naive_tp_efficiency", f"TP across all {nodes} nodes (not the plan)"),
                        ("tp_efficiency_one_node", "TP inside one node of this card")):
        value = figure(answer, name)
        if value is not None and name != own_name:
            rows.append((label, value, NEUTRAL, False))
    rows += [(label, value, REFERENCE, False) for label, value in context.calibration]
    bars = tuple(Bar(label, (Segment("efficiency", value, "efficiency"),), _ratio(value), status, highlighted=own_row)
                 for label, value, status, own_row in rows)
    lines = (Line(f"floor {floor:.2f} ({FLOOR_PARAMETER})", floor, FLOOR),) if floor is not None else ()
    verdict = ("" if floor is None else
               f", {'at or above' if own >= floor else 'below'} the policy's floor of {floor:.2f}")
    points = "; ".join(f"{label} {value:.2f}" for label, value in context.calibration)
    summary = (f"Scaling efficiency: {own_label} projects {_ratio(own)}{verdict}"
               + (f"; {points}" if points else "") + ".")
    table = Table(("configuration", "per-GPU efficiency", "vs the floor"),
                  tuple((label, f"{value:.2f}", "" if floor is None else ("at or above" if value >= floor else "below"))
                        for label, value, _, _ in rows))
    return Chart("efficiency", "Scaling efficiency", "per GPU", bars, lines,
                 max(1.0, axis_end(*(value for _, value, _, _ in rows))), summary, table,
                 f"From the answer's efficiency figures at {nodes} nodes and the document's measured points "
                 "(knowledge/sizing.yaml).")
