"""What each build weighed costs: the purchase price of the recommended plan (highlighted) and of every
alternative the price list could quote, with its power at load and rack units beside it (rules/prices.yaml)."""
from __future__ import annotations

from collections.abc import Mapping

from .common import alternatives, axis_end, build_label, count, figure, number, plan
from .spec import FAILS, WORKS, Bar, Chart, Segment, Table, kind_role


def _figures(item: Mapping) -> Mapping:
    return item.get("figures") if isinstance(item.get("figures"), Mapping) else {}


def prices_chart(answer: Mapping, context) -> Chart | None:
    """Purchase price per build, when the answer carries a quote (a price list priced the recommended plan)."""
    price = figure(answer, "price_total")
    if price is None:
        return None
    currency = str((answer.get("price_list") or {}).get("currency") or "")
    rec = plan(answer)
    own = {name: figure(answer, name) for name in ("price_total", "power_kw", "rack_units")}
    rows = [(rec, own, True, True)]
    for item in alternatives(answer):
        values = {name: number(_figures(item).get(name)) for name in own}
        if values["price_total"] is not None:
            rows.append((item, values, bool(item.get("works")), False))
    bars, table = [], []
    for item, values, works, recommended in rows:
        label = build_label(item.get("gpu"), item.get("gpus_per_node"), count(item.get("nodes")))
        power = values.get("power_kw") or 0.0
        text = f"{currency} {values['price_total']:,.0f}, {power:,.1f} kW"
        kind = kind_role(item.get("kind"))
        bars.append(Bar(label, (Segment(str(item.get("kind")), values["price_total"], kind),), text,
                        WORKS if works else FAILS, highlighted=recommended))
        verdict = "recommended" if recommended else ("works" if works else "does not work")
        table.append((label, str(item.get("kind")), f"{values['price_total']:,.0f}", f"{power:,.1f}",
                      f"{values.get('rack_units') or 0:,.0f}", verdict))
    cheaper = [bar.label for bar, row in zip(bars[1:], rows[1:], strict=True)
               if row[2] and row[1]["price_total"] < price]
    summary = (f"The recommended build, {bars[0].label}, costs {bars[0].value_text}; "
               + (f"{', '.join(cheaper)} would cost less and also work{'s' if len(cheaper) == 1 else ''}."
                  if cheaper else f"no other build that works costs less ({len(bars) - 1} others quoted)."))
    return Chart("prices", "What each build costs", currency, tuple(bars), (), axis_end(*(b.total for b in bars)),
                 summary, Table(("build", "kind", f"price ({currency})", "power (kW)", "rack units", "verdict"),
                                tuple(table)),
                 "From the answer's quotes: the bill of materials of each build at the price list's prices "
                 "(rules/prices.yaml); power at load is every card at its board power plus the chassis and fabric.")
