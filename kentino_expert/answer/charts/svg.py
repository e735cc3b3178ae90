"""A chart spec drawn as one inline SVG: horizontal bars on a linear axis, reference lines, a legend; no
script, no external asset, every text escaped. The root carries the plot's geometry (data-x0, data-plot-width,
data-axis-max) and each bar its row (data-y) so a reader (or a test) can turn a bar back into its value.

No text is cut and none overlaps another: each is measured (textfit.py) and a label, a value or a line's label
too long for its room wraps onto more lines, its row growing to hold them; the unit has a row of its own.
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
from .textfit import text_width, wrapped

SEGMENT_COLOURS = {WEIGHTS: "#3d7bd9", KV_CACHE: "#f2b632", ACTIVATIONS: "#8e5bd9", OPTIMIZER: "#d9608e",
                   OVERHEAD: "#7d8797", STATE: "#2f8f9d", OTHER: "#b8c0cc"}
# a colour per kind of purchase (Okabe-Ito, told apart in the common colour blindnesses); a build that does not
# work keeps its kind's colour and gets a dashed red outline
KIND_COLOURS = {"single-node": "#0072b2", "single-node-int4": "#56b4e9", "dp-replicas": "#009e73",
                "multi-node-ib": "#e69f00", "frontier": "#cc79a7"}
STATUS_COLOURS = {WORKS: "#2e9e5b", FAILS: "#c8473d", REFERENCE: "#9aa5b4", NEUTRAL: "#6a8ec4"}
LINE_STYLES = {CAPACITY: ("#16324f", ""), LIMIT: ("#c8473d", "6 4"), DEADLINE: ("#c8473d", "6 4"),
               FLOOR: ("#c8473d", "6 4")}
HIGHLIGHT = "#16324f"
FAILING_OUTLINE = ("#c8473d", "4 2")
# how far outside the bar an outline is drawn and how wide its stroke: the recommended plan's, a failing build's
HIGHLIGHT_AT, HIGHLIGHT_STROKE, FAILING_AT, FAILING_STROKE = 1.5, 2.0, 3.5, 1.5
LINE_STROKE, GAP = 2.0, 5  # a reference line's stroke; the room kept between a shape and the text beside it

X0, PLOT_WIDTH, TEXT_ROOM = 310, 340, 280  # label column, plot, room for the value text after a bar
WIDTH = X0 + PLOT_WIDTH + TEXT_ROOM  # fixed: the report's column holds it unscaled, and every plot starts at X0
TITLE_H, LINE_ROW, ROW_H, BAR_H, AXIS_H, UNIT_H, LEGEND_H = 26, 16, 30, 16, 22, 18, 22
TEXT_H, PAD = 14, 8  # one line of 12-pixel text; the margin kept from every edge


def _e(value) -> str:
    return escape(str(value), quote=True)


def fill_of(role: str, status: str) -> str:
    """The colour a segment is drawn in: its part's, else its kind's, else its bar's status'."""
    return SEGMENT_COLOURS.get(role) or KIND_COLOURS.get(role) or STATUS_COLOURS.get(status, STATUS_COLOURS[NEUTRAL])


def nice_step(axis_max: float) -> float:
    """A tick step of 1, 2 or 5 times a power of ten giving at most six ticks up to axis_max."""
    raw = axis_max / 6
    power = 10 ** math.floor(math.log10(raw))
    return next(power * k for k in (1, 2, 5, 10) if power * k >= raw)


def _x(value: float, chart: Chart) -> float:
    return X0 + PLOT_WIDTH * min(max(value, 0.0), chart.axis_max) / chart.axis_max


def _tspans(lines: list[str], x: float, first_y: float) -> str:
    return "".join(f'<tspan x="{x:.2f}" y="{first_y + TEXT_H * i:.2f}">{_e(line)}</tspan>'
                   for i, line in enumerate(lines))


def _outlined(bar) -> bool:
    """A build that does not work: drawn in its kind's colour inside a dashed red outline."""
    return bar.status == FAILS and any(segment.role in KIND_COLOURS for segment in bar.segments)


def _value_x(chart: Chart, bar) -> float:
    """Where a bar's value is written: GAP past the bar's outer edge (its outlines' strokes included) and past
    every reference line's stroke, so no line crosses it and no outline touches it."""
    reach = max([0.0] + [FAILING_AT + FAILING_STROKE / 2] * _outlined(bar)
                + [HIGHLIGHT_AT + HIGHLIGHT_STROKE / 2] * bar.highlighted)
    return max([_x(bar.total, chart) + reach]
               + [_x(line.value, chart) + LINE_STROKE / 2 for line in chart.lines]) + GAP


def _rows(chart: Chart) -> list[tuple[list[str], list[str], float]]:
    """Per bar: its label's lines, its value's lines (each within its room) and its row's height."""
    out = []
    for bar in chart.bars:
        label = wrapped(bar.label, X0 - 2 * PAD, bold=bar.highlighted)
        value = wrapped(bar.value_text, WIDTH - PAD - _value_x(chart, bar), bold=bar.highlighted)
        out.append((label, value, max(ROW_H, TEXT_H * max(len(label), len(value)) + PAD)))
    return out


def _line_labels(chart: Chart) -> list[tuple[list[str], str, float]]:
    """Per reference line: its label's lines, their anchor and x: beside the line, on the side with room, and
    short of the lines drawn before it (whose strokes run down through the rows of the labels after them)."""
    out, earlier = [], []
    for line in chart.lines:
        x = _x(line.value, chart)
        right_end = min([WIDTH - PAD] + [other - 4 for other in earlier if other > x + 4])
        left_end = max([PAD] + [other + 4 for other in earlier if other < x - 4])
        right, left = right_end - (x + 4), (x - 4) - left_end
        width = text_width(line.label)
        if width <= right or (width > left and right >= left):
            out.append((wrapped(line.label, right), "start", x + 4))
        else:
            out.append((wrapped(line.label, left), "end", x - 4))
        earlier.append(x)
    return out


def to_svg(chart: Chart) -> str:
    """The chart as an SVG element with role=img, a <title> and a <desc> (its text summary)."""
    labels = _line_labels(chart)
    top = TITLE_H + LINE_ROW * sum(len(lines) for lines, _, _ in labels) + 6
    rows = _rows(chart)
    plot_bottom = top + sum(height for _, _, height in rows)
    legend = _legend_rows(chart)
    height = plot_bottom + AXIS_H + UNIT_H + LEGEND_H * len(legend) + 4
    ident = f"chart-{_e(chart.key)}"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{ident}" role="img" '
           f'aria-labelledby="{ident}-title {ident}-desc" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
           f'height="{height}" data-x0="{X0}" data-plot-width="{PLOT_WIDTH}" data-axis-max="{chart.axis_max:.6g}" '
           'font-family="DejaVu Sans, Arial, sans-serif" font-size="12">',
           f'<title id="{ident}-title">{_e(chart.title)}</title><desc id="{ident}-desc">{_e(chart.summary)}</desc>',
           f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
           f'<text x="{PAD}" y="17" font-size="14" font-weight="bold" fill="#16324f">{_e(chart.title)}</text>']
    out += _axis(chart, top, plot_bottom)
    y = top
    for bar, row in zip(chart.bars, rows, strict=True):
        out += _bar(chart, bar, y, row)
        y += row[2]
    out += _lines(chart, labels, plot_bottom)
    out += _legend(legend, plot_bottom + AXIS_H + UNIT_H + 14)
    out.append("</svg>")
    return "".join(out)


def _axis(chart: Chart, top: float, bottom: float) -> list[str]:
    step, out = nice_step(chart.axis_max), []
    ticks, tick = [], 0.0
    while tick <= chart.axis_max * (1 + 1e-9):
        ticks.append(tick)
        tick = round(tick + step, 12)
    room = PLOT_WIDTH * step / chart.axis_max  # between two ticks: every other label when theirs would touch
    every = 2 if max(text_width(_tick(t)) for t in ticks) + 6 > room else 1
    for index, tick in enumerate(ticks):
        x = _x(tick, chart)
        out.append(f'<line x1="{x:.2f}" y1="{top}" x2="{x:.2f}" y2="{bottom}" stroke="#e6eaf0"/>')
        if index % every == 0:
            out.append(f'<text class="tick" x="{x:.2f}" y="{bottom + 15}" text-anchor="middle" fill="#5b6677">'
                       f'{_tick(tick)}</text>')
    out.append(f'<line x1="{X0}" y1="{bottom}" x2="{X0 + PLOT_WIDTH}" y2="{bottom}" stroke="#5b6677"/>'
               f'<text class="unit" x="{X0 + PLOT_WIDTH / 2:.2f}" y="{bottom + AXIS_H + 12}" text-anchor="middle" '
               f'fill="#5b6677">{_e(chart.unit)}</text>')
    return out


def _tick(value: float) -> str:
    """A tick's label as the bars' values write numbers: '20,000', '1,000,000', '0.2' ('1e+06' it was)."""
    return f"{value:,.0f}" if value == int(value) and abs(value) < 1e15 else f"{value:g}"


def _bar(chart: Chart, bar, y: float, row) -> list[str]:
    label, value, height = row
    mid = y + height / 2
    bar_y = mid - BAR_H / 2
    weight = ' font-weight="bold"' if bar.highlighted else ""
    out = [f'<g class="bar" data-label="{_e(bar.label)}" data-status="{_e(bar.status)}" '
           f'data-highlighted="{str(bar.highlighted).lower()}" data-y="{y:.2f}" data-height="{height:.2f}">',
           f'<text class="label" text-anchor="end" fill="#1d2433"{weight}>'
           f'{_tspans(label, X0 - PAD, mid + 4 - TEXT_H * (len(label) - 1) / 2)}</text>']
    start = 0.0
    for segment in bar.segments:
        x1, x2 = _x(start, chart), _x(start + segment.value, chart)
        out.append(f'<rect class="segment" data-role="{_e(segment.role)}" data-label="{_e(segment.label)}" '
                   f'x="{x1:.3f}" y="{bar_y}" width="{x2 - x1:.3f}" height="{BAR_H}" '
                   f'fill="{fill_of(segment.role, bar.status)}"><title>{_e(segment.label)}: {segment.value:,.4g}'
                   '</title></rect>')
        start += segment.value
    end = _x(bar.total, chart)
    if _outlined(bar):  # outside the bar: its colour stays whole
        out.append(f'<rect class="failing" x="{X0 - FAILING_AT}" y="{bar_y - FAILING_AT}" '
                   f'width="{end - X0 + 2 * FAILING_AT:.3f}" height="{BAR_H + 2 * FAILING_AT}" fill="none" '
                   f'stroke="{FAILING_OUTLINE[0]}" stroke-width="{FAILING_STROKE}" '
                   f'stroke-dasharray="{FAILING_OUTLINE[1]}"/>')
    if bar.highlighted:
        out.append(f'<rect class="highlight" x="{X0 - HIGHLIGHT_AT}" y="{bar_y - HIGHLIGHT_AT}" '
                   f'width="{end - X0 + 2 * HIGHLIGHT_AT:.3f}" height="{BAR_H + 2 * HIGHLIGHT_AT}" fill="none" '
                   f'stroke="{HIGHLIGHT}" stroke-width="{HIGHLIGHT_STROKE}"/>')
    text_x = _value_x(chart, bar)
    out.append(f'<text class="value" fill="#1d2433"{weight}>'
               f'{_tspans(value, text_x, mid + 4 - TEXT_H * (len(value) - 1) / 2)}</text></g>')
    return out


def _lines(chart: Chart, labels, bottom: float) -> list[str]:
    out, row = [], 0
    for line, (lines, anchor, text_x) in zip(chart.lines, labels, strict=True):
        x = _x(line.value, chart)
        colour, dash = LINE_STYLES.get(line.role, ("#16324f", ""))
        label_y = TITLE_H + LINE_ROW * row + 10
        row += len(lines)
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        spans = "".join(f'<tspan x="{text_x:.2f}" y="{label_y + LINE_ROW * i}">{_e(text)}</tspan>'
                        for i, text in enumerate(lines))
        out.append(f'<g class="reference" data-role="{_e(line.role)}" data-value="{line.value:.6g}">'
                   f'<line x1="{x:.3f}" y1="{label_y + LINE_ROW * (len(lines) - 1) + 3}" x2="{x:.3f}" y2="{bottom}" '
                   f'stroke="{colour}" stroke-width="{LINE_STROKE}"{dashes}/>'
                   f'<text text-anchor="{anchor}" fill="{colour}">'
                   f"{spans}</text></g>")
    return out


def _legend_rows(chart: Chart) -> list[list[tuple[str, str, float]]]:
    """The legend's items (label, role, x) in rows within the chart's width; a failing build's outline too."""
    items = list(chart.legend)
    if any(bar.status == FAILS for bar in chart.bars) and any(role in KIND_COLOURS for _, role in items):
        items.append((chart.fails_label, FAILS))
    rows: list[list] = []
    x = WIDTH  # a new row first
    for label, role in items:
        width = 14 + text_width(label)
        if x + width > WIDTH - PAD:
            rows.append([])
            x = PAD
        rows[-1].append((label, role, x))
        x += width + 16
    return rows


def _legend(rows, y: float) -> list[str]:
    out = []
    for index, row in enumerate(rows):
        row_y = y + LEGEND_H * index
        for label, role, x in row:
            swatch = (f'stroke="{FAILING_OUTLINE[0]}" stroke-width="2" stroke-dasharray="{FAILING_OUTLINE[1]}" '
                      'fill="none"' if role == FAILS else f'fill="{fill_of(role, NEUTRAL)}"')
            out.append(f'<rect class="swatch" x="{x + 1}" y="{row_y - 9}" width="9" height="9" {swatch}/>'
                       f'<text x="{x + 14}" y="{row_y}" fill="#1d2433">{_e(label)}</text>')
    return out
