"""Pictures of an answer, drawn on the server: chart specs built from the answer (pure functions), rendered as
inline SVG and as text (tables) for screen readers and the Markdown answer."""
from __future__ import annotations

from collections.abc import Mapping

from .builds import builds_chart
from .common import ChartContext, context_of
from .efficiency import efficiency_chart
from .memory import memory_chart
from .prices import prices_chart
from .spec import Chart
from .timeline import time_chart

BUILDERS = (memory_chart, builds_chart, prices_chart, time_chart, efficiency_chart)

__all__ = ["BUILDERS", "Chart", "ChartContext", "charts_of", "context_of"]


def charts_of(answer: Mapping, context: ChartContext | None = None) -> tuple[Chart, ...]:
    """Every chart the answer (a JSON-shaped dict) carries the data for, in a fixed order."""
    context = context or ChartContext()
    return tuple(chart for build in BUILDERS if (chart := build(answer, context)) is not None)
