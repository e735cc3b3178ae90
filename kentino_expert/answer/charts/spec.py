"""What a chart shows, as frozen typed data: horizontal bars (stacked from segments), reference lines, and the
text equivalent (a one-sentence summary and a table) that screen readers and the Markdown answer use.

Renderers (svg.py, text.py) draw a spec; builders (build.py) make specs from an answer. Neither side knows
the other's internals: a spec is the whole interface.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...domain.vocabulary import KINDS

# What a bar is, for its colour (svg.py maps these to colours): a plan that works, one that does not, a
# reference point of the source document, or a plain measure.
WORKS, FAILS, REFERENCE, NEUTRAL = "works", "fails", "reference", "neutral"
# What a segment of a stacked bar is.
WEIGHTS, KV_CACHE, ACTIVATIONS, OPTIMIZER, OVERHEAD, STATE, OTHER = (
    "weights", "kv-cache", "activations", "optimizer", "overhead", "state", "other")
# A bar of a build (the builds and the time charts) is one segment whose role is the build's kind (KINDS): a
# colour per kind of purchase.
# What a reference line is: the card's capacity, the policy's limit, a deadline, a floor.
CAPACITY, LIMIT, DEADLINE, FLOOR = "capacity", "limit", "deadline", "floor"


def kind_role(kind) -> str:
    """A build's segment role: its kind of purchase (drawn in that kind's colour), or NEUTRAL for none known."""
    return kind if kind in KINDS else NEUTRAL


@dataclass(frozen=True)
class Segment:
    """One part of a bar: what it is (label, role) and how much."""

    label: str
    value: float
    role: str


@dataclass(frozen=True)
class Bar:
    """One row of a chart: a label, its segments (one for a plain bar), the text printed at its end, what it
    is (works, fails, reference, neutral), and whether it is the recommended plan (drawn highlighted)."""

    label: str
    segments: tuple[Segment, ...]
    value_text: str
    status: str
    highlighted: bool = False
    note: str = ""

    @property
    def total(self) -> float:
        return sum(segment.value for segment in self.segments)


@dataclass(frozen=True)
class Line:
    """A vertical reference line across the bars (the card's memory, the policy's limit, the deadline)."""

    label: str
    value: float
    role: str


@dataclass(frozen=True)
class Table:
    """The chart's numbers as a table: its text equivalent."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Chart:
    """One chart: horizontal bars on an axis from 0 to axis_max (in `unit`), with reference lines."""

    key: str  # memory, builds, time, efficiency: stable, for ids and tests
    title: str
    unit: str
    bars: tuple[Bar, ...]
    lines: tuple[Line, ...]
    axis_max: float
    summary: str  # the chart in one or two sentences (the SVG's aria description)
    table: Table
    caption: str = ""  # where the numbers come from
    fails_label: str = "does not work"  # what the outline of a failing build means, in the legend

    @property
    def legend(self) -> tuple[tuple[str, str], ...]:
        """(label, role) of each distinct segment kind of a stacked chart, or of each kind of purchase drawn, in
        order of first appearance."""
        seen: dict[str, str] = {}
        for bar in self.bars:
            for segment in bar.segments:
                seen.setdefault(segment.role, segment.label)
        shown = len(seen) > 1 or any(role in KINDS for role in seen)
        return tuple((label, role) for role, label in seen.items()) if shown else ()
