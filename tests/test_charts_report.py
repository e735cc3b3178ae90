"""The charts in the explain report: inline in the HTML (one self-contained page, each chart with its text
equivalent), as tables in the Markdown, as SVG files from `explain --charts`, seen in headless Chromium at
the places their bars are drawn, and the pictures of the auditor guide up to date."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from charts_support import (
    BATCH,
    FRONTIER,
    IB_CLUSTER,
    INT4,
    MISSED,
    REPLICAS,
    ROOT,
    SINGLE,
    SVG,
    SWITCH,
    label_of,
    parameter,
)
from headless import CHROMIUM, SKIP_REASON, chromium, png_rows
from kentino_expert.answer.charts import charts_of, context_of
from kentino_expert.answer.charts.svg import fill_of
from kentino_expert.answer.explain import chart_files, explain_html, explain_markdown
from kentino_expert.decisions.connect import open_log

# the examples whose charts docs/auditors.md shows: an IB cluster, a card switch, a deadline
DOC_EXAMPLES = ("70b-full-finetune", "70b-full-finetune-on-5090", "8b-pretraining-in-30-days")
DOC_CHARTS = ROOT / "docs" / "charts"
REGENERATE = ("kentino-expert recommend examples/{0}.yaml --format json > /tmp/{0}.json && "
              "kentino-expert explain /tmp/{0}.json --charts docs/charts/{0}")


@pytest.fixture(scope="module")
def ib(expert):
    return expert.recommend(IB_CLUSTER).model_dump(mode="json")


def test_html_has_each_chart_inline_with_its_text_equivalent(expert, ib):
    """Each chart is an inline <svg role=img> titled and described, followed by its table; the page keeps no
    script and no external resource."""
    page = explain_html(expert, expert.recommend(SWITCH).model_dump(mode="json"))
    figures = re.findall(r'<figure class="chart" data-chart="(\w+)">(.*?)</figure>', page, re.S)
    assert [key for key, _ in figures] == ["memory", "builds", "prices", "time", "efficiency"]
    for key, body in figures:
        svg = body[body.index("<svg"):body.index("</svg>") + 6]
        root = ET.fromstring(svg)
        assert root.get("role") == "img" and root.get("aria-labelledby") == f"chart-{key}-title chart-{key}-desc"
        assert root.find(f"{SVG}desc").text.strip(), "the description is the chart's summary"
        assert '<table class="chart-data"' in body
    assert "<script" not in page.lower() and not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)


def test_markdown_has_the_tables(expert):
    """The Markdown report carries each chart as its summary and table, before the trace: the one-node plan of
    a deadline job with its days, past the deadline."""
    answer = expert.recommend(MISSED).model_dump(mode="json")
    text = explain_markdown(expert, answer)
    assert text.index("## Charts") < text.index("## Why: the rules that fired")
    one = next(item for item in answer["alternatives"] if item["nodes"] == 1)
    assert one["time_to_result_days"] > MISSED["deadline_days"]
    row = f"| {label_of(one)} | {one['time_to_result_days']:,.1f} days | misses the deadline |"
    assert "### Time to result" in text and row in text


def test_recommend_markdown_has_the_chart_tables(expert):
    """`recommend --format markdown` carries each chart's table, the policy's limit among its rows."""
    from kentino_expert.cli.main import main
    example = ROOT / "examples" / "70b-chat.yaml"
    done = CliRunner().invoke(main, ["recommend", str(example), "--format", "markdown"])
    assert done.exit_code == 0, done.output
    text = done.output
    assert text.index("## Charts") < text.index("## Trace") and "### Memory per GPU" in text
    card = expert.recommend(yaml.safe_load(example.read_text())).figures["gpu_memory_gb"].value
    limit = parameter("workload_fraction_max") * card
    assert f"| policy limit (workload_fraction_max) | {limit:,.1f} GB |" in text


def test_other_rules_draw_no_policy_line(expert, tmp_path):
    """Explained under another rule set, a decision's charts leave out the policy's lines (they were not the
    deciding rules'), and keep the bars."""
    import shutil

    from kentino_expert.expert import Expert
    from kentino_expert.paths import bundled
    rules = tmp_path / "rules"
    shutil.copytree(bundled("rules"), rules)
    params = rules / "parameters.yaml"
    params.write_text(params.read_text().replace("efficiency_floor:\n    value: 0.60",
                                                 "efficiency_floor:\n    value: 0.55"))
    other = Expert(rules)
    try:
        with open_log(tmp_path / "x.db") as log:
            decision_id = log.record(IB_CLUSTER, expert.recommend(IB_CLUSTER), "cli")
            page = explain_html(other, log.get(decision_id))
    finally:
        other.close()
    assert 'data-chart="memory"' in page and 'data-chart="efficiency"' in page
    assert 'data-role="limit"' not in page and 'data-role="floor"' not in page


def test_cli_writes_the_charts_as_files(expert, ib, tmp_path):
    """`explain --charts DIR` writes one standalone SVG per chart; a directory it cannot make exits 2 with one
    line."""
    from kentino_expert.cli.main import main
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(ib))
    runner = CliRunner()
    done = runner.invoke(main, ["explain", str(answer), "--charts", str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    expected = sorted(f"{chart.key}.svg" for chart in charts_of(ib, context_of(expert)))
    assert expected == ["builds.svg", "efficiency.svg", "memory.svg", "prices.svg", "time.svg"], \
        "an IB training plan has all five"
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == expected
    ET.parse(tmp_path / "out" / "memory.svg")
    blocker = tmp_path / "file"
    blocker.write_text("")
    failed = runner.invoke(main, ["explain", str(answer), "--charts", str(blocker / "x")])
    assert failed.exit_code == 2 and "cannot write the charts" in failed.output
    assert "Traceback" not in failed.output and len(failed.output.strip().splitlines()) == 1


@pytest.mark.parametrize("example", DOC_EXAMPLES)
def test_the_guide_pictures_are_up_to_date(expert, example):
    """docs/charts/EXAMPLE/ is what `explain --charts` draws today for the bundled example, and the auditor
    guide shows the pictures."""
    facts = yaml.safe_load((ROOT / "examples" / f"{example}.yaml").read_text())
    expected = chart_files(expert, expert.recommend(facts))
    found = {path.name: path.read_text(encoding="utf-8") for path in (DOC_CHARTS / example).glob("*.svg")}
    assert found == expected, f"docs/charts/{example} is stale: run `{REGENERATE.format(example)}`"
    guide = (ROOT / "docs" / "auditors.md").read_text()
    shown = [name for name in expected if f"](charts/{example}/{name})" in guide]
    assert shown, f"docs/auditors.md shows no picture of {example}"


REPRESENTATIVE = {"single": SINGLE, "int4": INT4, "replicas": REPLICAS, "ib": IB_CLUSTER, "frontier": FRONTIER,
                  "switch": SWITCH, "missed": MISSED, "batch": BATCH}
NARROWEST = 4  # pixels: a thinner segment is all anti-aliased edge, not found by its colour


def _pattern(colour: str, channels: int) -> re.Pattern:
    """A run of pixels of the colour (each channel within 3 of it) in a row's bytes."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    pixel = b"".join(b"[" + re.escape(bytes([max(0, c - 3)])) + b"-" + re.escape(bytes([min(255, c + 3)])) + b"]"
                     for c in rgb) + (b"." if channels == 4 else b"")
    return re.compile(b"(?:" + pixel + b")+", re.S)


class Screen:
    """The screenshot's rows, and the runs of a colour in a row, found on demand (once)."""

    def __init__(self, rows, channels: int):
        self.rows, self.channels, self._patterns, self._runs = rows, channels, {}, {}

    def runs(self, colour: str, y: int) -> list[tuple[int, int]]:
        """(x, length) of every horizontal run of the colour in row y."""
        key = (colour, y)
        if key not in self._runs:
            pattern = self._patterns.setdefault(colour, _pattern(colour, self.channels))
            line = self.rows[y] if 0 <= y < len(self.rows) else b""
            self._runs[key] = [(m.start() // self.channels, (m.end() - m.start()) // self.channels)
                               for m in pattern.finditer(line) if m.start() % self.channels == 0]
        return self._runs[key]


def _segments(page: str, key: str) -> list[tuple[float, list[tuple[str, float, float]]]]:
    """Per bar of the chart `key`: its row's middle from the first's, and (colour, left edge from the plot's start,
    width) of each segment, in pixels."""
    body = page[page.index(f'data-chart="{key}"'):]
    root = ET.fromstring(body[body.index("<svg"):body.index("</svg>") + 6])
    x0 = float(root.get("data-x0"))
    groups = [group for group in root.iter(f"{SVG}g") if group.get("class") == "bar"]
    middles = [float(group.get("data-y")) + float(group.get("data-height")) / 2 for group in groups]
    return [(middle - middles[0],
             [(fill_of(rect.get("data-role"), group.get("data-status")), float(rect.get("x")) - x0,
               float(rect.get("width"))) for rect in group.iter(f"{SVG}rect") if rect.get("class") == "segment"])
            for group, middle in zip(groups, middles, strict=True)]


def _found(screen: Screen, colour: str, y: int, x: float, width: float) -> bool:
    """A run at row y (or one beside it) starting at x and as wide as width (anti-aliased edges aside)."""
    return any(abs(start - x) <= 2 and abs(length - width) <= 3
               for row in (y - 1, y, y + 1) for start, length in screen.runs(colour, row))


def _chart_on_screen(screen: Screen, bars) -> tuple[int, int]:
    """(y, x) of the chart's plot in the screenshot: where every bar's every segment (wide enough to see) is
    drawn in its colour at its offset and width, each bar in its row (rows grow to hold a wrapped label)."""
    visible = [(round(dy), segment) for dy, bar in bars for segment in bar if segment[2] >= NARROWEST]
    assert visible, "nothing wide enough to see"
    (first_dy, (colour, offset, width)), rest = visible[0], visible[1:]
    for y in range(len(screen.rows)):
        for start, length in screen.runs(colour, y):
            if abs(length - width) > 3:
                continue
            top, x0 = y - first_dy, start - offset
            if all(_found(screen, c, top + dy, x0 + o, w) for dy, (c, o, w) in rest):
                return top, x0
    raise AssertionError(f"the bars {[[(c, round(w)) for c, _, w in bar] for _, bar in bars]} are not on screen")


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
@pytest.mark.parametrize("name", list(REPRESENTATIVE))
def test_chromium_draws_the_bars_where_the_svg_puts_them(expert, name, tmp_path):
    """In a screenshot of the report, every chart of the representative answer is there: each bar's segments
    in their colours at their widths and offsets (the memory parts end to end), one bar under the other, and
    every chart's bars starting at the same x, the plot's left edge."""
    answer = expert.recommend(REPRESENTATIVE[name]).model_dump(mode="json")
    page = explain_html(expert, answer)
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    shot = tmp_path / "report.png"
    chromium([f"--screenshot={shot}", "--window-size=1280,4200", "--force-device-scale-factor=1",
              "--hide-scrollbars", path.as_uri()], tmp_path)
    assert shot.exists(), "no screenshot"
    _, _, channels, rows = png_rows(shot)
    screen = Screen(rows, channels)
    keys = re.findall(r'<figure class="chart" data-chart="(\w+)">', page)
    assert "memory" in keys and "builds" in keys, "every representative answer has its memory and its builds"
    placed = [_chart_on_screen(screen, _segments(page, key)) for key in keys]
    assert [y for y, _ in placed] == sorted(y for y, _ in placed), "the charts are drawn in their order"
    starts = [x for _, x in placed]
    assert max(starts) - min(starts) <= 2, f"charts start at different x: {starts}"


def test_guide_pictures_are_valid_svg():
    """Each picture of the guide parses as SVG, has a title and a description, and no script."""
    for path in Path(DOC_CHARTS).glob("*.svg"):
        root = ET.parse(path).getroot()
        assert root.tag == f"{SVG}svg" and root.find(f"{SVG}title") is not None
        assert not any(element.tag.endswith("script") for element in root.iter())
