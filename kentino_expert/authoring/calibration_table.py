"""The calibration table of the guides: every published measurement beside the serving model's prediction of it,
and the summary the calibration target reads (generated into docs/calibration.md)."""
from __future__ import annotations

from ..domain import calibration


def _cell(text) -> str:
    return str(text).replace("|", "/").replace("\n", " ")


def _value(metric: str, value: float) -> str:
    if metric in ("ttft_s", "tpot_s"):
        return f"{value:.3g} s"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _load(row) -> str:
    load = f"{row.concurrency} in flight" if row.concurrency is not None else "offline"
    return f"{load}, {row.prompt_tokens:,}/{row.output_tokens:,}"


def calibration_table(ruleset=None, knowledge=None) -> str:
    """One row per measurement, worst ratio first, and the summary line (excluded rows are shown, not counted)."""
    items = sorted(calibration.predictions(knowledge), key=lambda item: -abs(item.ratio - 1) if item.ratio >= 1
                   else -abs(1 / item.ratio - 1))
    rows = ["| row | card x GPUs (TP x PP) | model, weights / KV | load (prompt/output) | metric | measured | "
            "predicted | ratio | source |",
            "|---|---|---|---|---|---|---|---|---|"]
    for item in items:
        row = item.row
        mark = "excluded: " + row.excluded if row.excluded else ("" if item.within else "outside 1.5x")
        rows.append(
            f"| `{_cell(row.id)}` {_cell(mark)} | {row.gpu} x {row.gpus} ({row.tp} x {row.pp}) | {row.model}, "
            f"{row.weights} / {row.kv_cache} | {_load(row)} | {row.metric} | {_value(row.metric, row.value)} | "
            f"{_value(row.metric, item.predicted)} | {item.ratio:.2f} | [{_cell(row.engine)}, {row.published}]"
            f"({row.source}) |")
    summary = calibration.summary(calibration.predictions(knowledge))
    rows.append("")
    rows.append(f"{summary.within} of {summary.rows} rows used ({summary.share_within:.0%}) are within "
                f"{calibration.WITHIN:g}x; the median ratio (predicted / measured) is {summary.median_ratio:.2f}.")
    return "\n".join(rows)
