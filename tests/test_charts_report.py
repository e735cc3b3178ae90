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

from charts_support import IB_CLUSTER, ROOT, SVG, card_switch, missed_deadline, parameter
from headless import CHROMIUM, SKIP_REASON, chromium, png_rows
from kentino_expert.answer.charts.svg import FAILS, REFERENCE, SEGMENT_COLOURS, STATUS_COLOURS, WORKS
from kentino_expert.answer.explain import chart_files, explain_html, explain_markdown
from kentino_expert.decisions.connect import open_log

DOC_EXAMPLE = ROOT / "examples" / "70b-full-finetune.yaml"
DOC_CHARTS = ROOT / "docs" / "charts" / "70b-full-finetune"
REGENERATE = ("kentino-expert recommend examples/70b-full-finetune.yaml --format json > /tmp/ft.json && "
              "kentino-expert explain /tmp/ft.json --charts docs/charts/70b-full-finetune")


@pytest.fixture(scope="module")
def ib(expert):
    return expert.recommend(IB_CLUSTER).model_dump(mode="json")


def test_html_has_each_chart_inline_with_its_text_equivalent(expert, ib):
    """Each chart is an inline <svg role=img> titled and described, followed by its table; the page keeps no
    script and no external resource."""
    page = explain_html(expert, card_switch(ib))
    figures = re.findall(r'<figure class="chart" data-chart="(\w+)">(.*?)</figure>', page, re.S)
    assert [key for key, _ in figures] == ["memory", "builds", "time", "efficiency"]
    for key, body in figures:
        svg = body[body.index("<svg"):body.index("</svg>") + 6]
        root = ET.fromstring(svg)
        assert root.get("role") == "img" and root.get("aria-labelledby") == f"chart-{key}-title chart-{key}-desc"
        assert root.find(f"{SVG}desc").text.strip(), "the description is the chart's summary"
        assert '<table class="chart-data"' in body
    assert "<script" not in page.lower() and not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)


def test_markdown_has_the_tables(expert, ib):
    """The Markdown report carries each chart as its summary and table, before the trace."""
    text = explain_markdown(expert, missed_deadline(ib))
    assert text.index("## Charts") < text.index("## Why: the rules that fired")
    assert "### Time to result" in text and "| 2 nodes x 8 x rtx-pro-6000 | 41.2 days | misses the deadline" in text


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
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["efficiency.svg", "memory.svg", "time.svg"]
    ET.parse(tmp_path / "out" / "memory.svg")
    blocker = tmp_path / "file"
    blocker.write_text("")
    failed = runner.invoke(main, ["explain", str(answer), "--charts", str(blocker / "x")])
    assert failed.exit_code == 2 and "cannot write the charts" in failed.output
    assert "Traceback" not in failed.output and len(failed.output.strip().splitlines()) == 1


def test_the_guide_pictures_are_up_to_date(expert):
    """docs/charts/ is what `explain --charts` draws today for the bundled full fine-tuning example."""
    facts = yaml.safe_load(DOC_EXAMPLE.read_text())
    expected = chart_files(expert, expert.recommend(facts))
    found = {path.name: path.read_text(encoding="utf-8") for path in DOC_CHARTS.glob("*.svg")}
    assert found == expected, f"docs/charts is stale: run `{REGENERATE}`"
    guide = (ROOT / "docs" / "auditors.md").read_text()
    for name in expected:
        assert f"](charts/70b-full-finetune/{name})" in guide, f"docs/auditors.md does not show {name}"


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def _runs(rows, channels: int, colour: str, least: int = 3) -> list[tuple[int, int, int]]:
    """(y, x, length) of every horizontal run of at least `least` pixels of the colour (within 10 per channel)."""
    red, green, blue = _rgb(colour)
    found = []
    for y, line in enumerate(rows):
        start = None
        for x in range(len(line) // channels + 1):
            i = x * channels
            inside = i < len(line) and abs(line[i] - red) <= 10 and abs(line[i + 1] - green) <= 10 \
                and abs(line[i + 2] - blue) <= 10
            if inside and start is None:
                start = x
            elif not inside and start is not None:
                if x - start >= least:
                    found.append((y, start, x - start))
                start = None
    return found


def _widths(page: str, key: str) -> list[tuple[str, str, float]]:
    """(role, status, width in pixels) of each segment the chart `key` draws, from its SVG."""
    body = page[page.index(f'data-chart="{key}"'):]
    root = ET.fromstring(body[body.index("<svg"):body.index("</svg>") + 6])
    return [(rect.get("data-role"), group.get("data-status"), float(rect.get("width")))
            for group in root.iter(f"{SVG}g") if group.get("class") == "bar"
            for rect in group.iter(f"{SVG}rect") if rect.get("class") == "segment"]


def _drawn(runs, width: float) -> list[tuple[int, int, int]]:
    """The runs whose length is the width (within 3 pixels: anti-aliased edges)."""
    match = [run for run in runs if abs(run[2] - width) <= 3]
    assert match, f"no bar {width:.0f} px wide among runs {sorted({run[2] for run in runs})}"
    return match


def _stacked(parts: list[list[tuple[int, int, int]]]) -> list[tuple[int, int, int]]:
    """One run per part, all on one row, each starting where the one before it ends (within 2 pixels)."""
    for first in parts[0]:
        chain = [first]
        for runs in parts[1:]:
            after = [run for run in runs if run[0] == first[0] and abs(chain[-1][1] + chain[-1][2] - run[1]) <= 2]
            if not after:
                break
            chain.append(after[0])
        if len(chain) == len(parts):
            return chain
    raise AssertionError("the memory parts are not drawn end to end on one row")


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_chromium_draws_the_bars_where_the_svg_puts_them(expert, ib, tmp_path):
    """In a screenshot of the report every bar is there in its colour at its width: the memory parts stacked
    end to end on one row, the builds that work in green and those that do not in red, the document's points in
    grey; and every bar starts at the same x, the plot's left edge."""
    page = explain_html(expert, card_switch(ib))
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    shot = tmp_path / "report.png"
    chromium([f"--screenshot={shot}", "--window-size=1280,4200", path.as_uri()], tmp_path)
    assert shot.exists(), "no screenshot"
    _, _, channels, rows = png_rows(shot)
    starts = []
    segments = _widths(page, "memory")
    assert [role for role, _, _ in segments] == ["optimizer", "state", "activations", "other"]
    chain = _stacked([_drawn(_runs(rows, channels, SEGMENT_COLOURS[role]), width) for role, _, width in segments])
    starts.append(chain[0][1])
    for chart in ("builds", "efficiency"):
        for _, status, width in _widths(page, chart):
            if status in (WORKS, FAILS, REFERENCE):
                starts.append(_drawn(_runs(rows, channels, STATUS_COLOURS[status]), width)[0][1])
    statuses = {status for _, status, _ in _widths(page, "builds")}
    assert statuses == {WORKS, FAILS}
    assert max(starts) - min(starts) <= 2, f"bars start at different x: {sorted(set(starts))}"
    assert len(starts) >= 8


def test_guide_pictures_are_valid_svg():
    """Each picture of the guide parses as SVG, has a title and a description, and no script."""
    for path in Path(DOC_CHARTS).glob("*.svg"):
        root = ET.parse(path).getroot()
        assert root.tag == f"{SVG}svg" and root.find(f"{SVG}title") is not None
        assert not any(element.tag.endswith("script") for element in root.iter())
