"""A chart spec drawn as one inline SVG: horizontal bars on a linear axis, reference lines, a legend; no
script, no external asset, every text escaped. The root carries the plot's geometry (data-x0, data-plot-width,
data-axis-max) so a reader (or a test) can turn a bar's width back into its value.
"""
from __future__ import annotations

import math
from html import escape

from .spec import (
    ACTIVATIONS,
    CAPACITY,
    DEADLINE,
    FAILS,
    FLOOR,
    KV_CACHE,
    LIMIT,
    NEUTRAL,
    OPTIMIZER,
    OTHER,
    OVERHEAD,
    REFERENCE,
    STATE,
    WEIGHTS,
    WORKS,
    Chart,
)

SEGMENT_COLOURS = {WEIGHTS: "#3d7bd9", KV_CACHE: "#f2b632", ACTIVATIONS: "#8e5bd9", OPTIMIZER: "#d9608e",
                   OVERHEAD: "#7d8797", STATE: "#2f8f9d", OTHER: "#b8c0cc"}
STATUS_COLOURS = {WORKS: "#2e9e5b", FAILS: "#c8473d", REFERENCE: "#9aa5b4", NEUTRAL: "#6a8ec4"}
LINE_STYLES = {CAPACITY: ("#16324f", ""), LIMIT: ("#c8473d", "6 4"), DEADLINE: ("#c8473d", "6 4"),
               FLOOR: ("#c8473d", "6 4")}
HIGHLIGHT = "#16324f"

X0, PLOT_WIDTH, TEXT_ROOM = 310, 340, 280  # label column, plot, room for the value text after a bar
TITLE_H, LINE_ROW, ROW_H, BAR_H, AXIS_H, LEGEND_H = 26, 16, 30, 16, 26, 22
WIDTH = X0 + PLOT_WIDTH + TEXT_ROOM


def _e(value) -> str:
    return escape(str(value), quote=True)


def nice_step(axis_max: float) -> float:
    """A tick step of 1, 2 or 5 times a power of ten giving at most six ticks up to axis_max."""
    raw = axis_max / 6
    power = 10 ** math.floor(math.log10(raw))
    return next(power * k for k in (1, 2, 5, 10) if power * k >= raw)


def _x(value: float, chart: Chart) -> float:
    return X0 + PLOT_WIDTH * min(max(value, 0.0), chart.axis_max) / chart.axis_max


def to_svg(chart: Chart) -> str:
    """The chart as an SVG element with role=img, a <title> and a <desc> (its text summary)."""
    top = TITLE_H + LINE_ROW * len(chart.lines) + 6
    plot_bottom = top + ROW_H * len(chart.bars)
    height = plot_bottom + AXIS_H + (LEGEND_H if chart.legend else 0) + 4
    ident = f"chart-{_e(chart.key)}"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{ident}" role="img" '
           f'aria-labelledby="{ident}-title {ident}-desc" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
           f'height="{height}" data-x0="{X0}" data-plot-width="{PLOT_WIDTH}" data-axis-max="{chart.axis_max:.6g}" '
           'font-family="DejaVu Sans, Arial, sans-serif" font-size="12">',
           f'<title id="{ident}-title">{_e(chart.title)}</title><desc id="{ident}-desc">{_e(chart.summary)}</desc>',
           f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
           f'<text x="8" y="17" font-size="14" font-weight="bold" fill="#16324f">{_e(chart.title)}</text>']
    out += _axis(chart, top, plot_bottom)
    for index, bar in enumerate(chart.bars):
        out += _bar(chart, bar, top + ROW_H * index)
    out += _lines(chart, top, plot_bottom)
    out += _legend(chart, plot_bottom + AXIS_H + 14)
    out.append("</svg>")
    return "".join(out)


def _axis(chart: Chart, top: float, bottom: float) -> list[str]:
    step, out = nice_step(chart.axis_max), []
    tick = 0.0
    while tick <= chart.axis_max * (1 + 1e-9):
        x = _x(tick, chart)
        out.append(f'<line x1="{x:.2f}" y1="{top}" x2="{x:.2f}" y2="{bottom}" stroke="#e6eaf0"/>'
                   f'<text x="{x:.2f}" y="{bottom + 15}" text-anchor="middle" fill="#5b6677">{tick:g}</text>')
        tick = round(tick + step, 12)
    out.append(f'<line x1="{X0}" y1="{bottom}" x2="{X0 + PLOT_WIDTH}" y2="{bottom}" stroke="#5b6677"/>'
               f'<text x="{X0 + PLOT_WIDTH + 8}" y="{bottom + 15}" fill="#5b6677">{_e(chart.unit)}</text>')
    return out


def _bar(chart: Chart, bar, y: float) -> list[str]:
    mid = y + ROW_H / 2
    weight = ' font-weight="bold"' if bar.highlighted else ""
    out = [f'<g class="bar" data-label="{_e(bar.label)}" data-status="{_e(bar.status)}" '
           f'data-highlighted="{str(bar.highlighted).lower()}">',
           f'<text x="{X0 - 8}" y="{mid + 4}" text-anchor="end" fill="#1d2433"{weight}>'
           f'{_e(_clip(bar.label, 41 if bar.highlighted else 44))}</text>']
    start = 0.0
    for segment in bar.segments:
        x1, x2 = _x(start, chart), _x(start + segment.value, chart)
        colour = SEGMENT_COLOURS.get(segment.role) or STATUS_COLOURS.get(bar.status, STATUS_COLOURS[NEUTRAL])
        out.append(f'<rect class="segment" data-role="{_e(segment.role)}" data-label="{_e(segment.label)}" '
                   f'x="{x1:.3f}" y="{y + (ROW_H - BAR_H) / 2}" width="{x2 - x1:.3f}" height="{BAR_H}" '
                   f'fill="{colour}"><title>{_e(segment.label)}: {segment.value:,.4g}</title></rect>')
        start += segment.value
    end = _x(bar.total, chart)
    # the value is written past the bar and past every reference line, so no line crosses it
    text_x = max([end] + [_x(line.value, chart) for line in chart.lines]) + 6
    if bar.highlighted:
        out.append(f'<rect class="highlight" x="{X0 - 1.5}" y="{y + (ROW_H - BAR_H) / 2 - 1.5}" '
                   f'width="{end - X0 + 3:.3f}" height="{BAR_H + 3}" fill="none" stroke="{HIGHLIGHT}" '
                   'stroke-width="2"/>')
    out.append(f'<text class="value" x="{text_x:.2f}" y="{mid + 4}" fill="#1d2433"{weight}>'
               f'{_e(_clip(bar.value_text, 44))}</text></g>')
    return out


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _lines(chart: Chart, top: float, bottom: float) -> list[str]:
    out = []
    for index, line in enumerate(chart.lines):
        x = _x(line.value, chart)
        colour, dash = LINE_STYLES.get(line.role, ("#16324f", ""))
        label_y = TITLE_H + LINE_ROW * index + 10
        anchor = "end" if x > X0 + PLOT_WIDTH / 2 else "start"
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<g class="reference" data-role="{_e(line.role)}" data-value="{line.value:.6g}">'
                   f'<line x1="{x:.3f}" y1="{label_y + 3}" x2="{x:.3f}" y2="{bottom}" stroke="{colour}" '
                   f'stroke-width="2"{dashes}/><text x="{x + (-4 if anchor == "end" else 4):.2f}" y="{label_y}" '
                   f'text-anchor="{anchor}" fill="{colour}">{_e(line.label)}</text></g>')
    return out


def _legend(chart: Chart, y: float) -> list[str]:
    out, x = [], 8
    for label, role in chart.legend:
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{SEGMENT_COLOURS.get(role, "#9aa5b4")}"/>'
                   f'<text x="{x + 14}" y="{y}" fill="#1d2433">{_e(label)}</text>')
        x += 24 + 7 * len(label)
    return out
