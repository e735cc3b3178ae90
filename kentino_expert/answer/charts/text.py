"""A chart's text equivalent: its summary and table as Markdown, and the HTML figure (the SVG, its caption,
and the same table for screen readers and for print)."""
from __future__ import annotations

from html import escape

from .spec import Chart
from .svg import to_svg


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(chart: Chart) -> list[str]:
    """The chart as Markdown lines: a heading, its summary, its table and where its numbers come from."""
    out = [f"### {chart.title}", "", chart.summary, "",
           "| " + " | ".join(_cell(h) for h in chart.table.headers) + " |",
           "|" + "---|" * len(chart.table.headers)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in chart.table.rows]
    out.append("")
    if chart.caption:
        out += [f"*{chart.caption}*", ""]
    return out


def _e(value) -> str:
    return escape(str(value), quote=True)


def to_html(chart: Chart) -> str:
    """The chart as an HTML <figure>: the inline SVG, a caption, and its table (the text equivalent)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in chart.table.headers)
    rows = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in chart.table.rows)
    return (f'<figure class="chart" data-chart="{_e(chart.key)}">{to_svg(chart)}'
            f"<figcaption>{_e(chart.summary)} <span class=\"source\">{_e(chart.caption)}</span></figcaption>"
            f'<table class="chart-data" aria-label="{_e(chart.title)}: the numbers"><tr>{head}</tr>{rows}</table>'
            "</figure>")
