"""Charts whose texts never collide or get cut, and a colour per kind of purchase (issue 30, item 8): "150GPUs" (the
last tick and the unit), labels cut to 44 characters, one colour for every build. Measured where Chromium draws
each text, for the representative answers and for charts made to crowd: every text inside its picture, none over
another text, a bar, an outline or a reference line; and every label drawn whole."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from charts_support import BATCH, FRONTIER, IB_CLUSTER, INT4, MISSED, REPLICAS, SINGLE, SVG, SWITCH
from headless import CHROMIUM, SKIP_REASON, chromium
from kentino_expert.answer.charts import charts_of, context_of
from kentino_expert.answer.charts.spec import Bar, Chart, Line, Segment, Table
from kentino_expert.answer.charts.svg import KIND_COLOURS, fill_of, to_svg
from kentino_expert.domain.vocabulary import KINDS

REPRESENTATIVE = (SINGLE, INT4, REPLICAS, IB_CLUSTER, FRONTIER, SWITCH, MISSED, BATCH)
LONG = "the plan's layout, TP in node, PP across 4 nodes (the plan has 13) and more words besides"


def crowded() -> list[Chart]:
    """Charts made to crowd: an axis ending on a tick (150 GPUs), labels and values past their room, a word
    longer than a line, reference lines on both sides with long labels, every kind of purchase."""
    bars = tuple(Bar(label, (Segment(kind, value, kind),), text, status, highlighted)
                 for label, kind, value, text, status, highlighted in (
                     (LONG, "single-node", 142.86, "at least 150 GPUs, dp-replicas: recommended, does not work at "
                      "all, as the policy says", "fails", True),
                     ("8 x nvidia-rtx-pro-6000-blackwell-server-edition-with-a-long-name", "dp-replicas", 60,
                      "60 GPUs", "works", False),
                     ("11 nodes x 8 x l4", "multi-node-ib", 88, "88 GPUs, multi-node-ib: does not work", "fails",
                      False),
                     ("2 x 8 x l40", "single-node-int4", 16, "16 GPUs", "works", False),
                     ("x", "frontier", 149, "149 GPUs, frontier", "works", False)))
    lines = (Line("policy limit 90% (workload_fraction_max) = 86.4 GB and some more words to make it long", 140,
                  "limit"), Line("card memory 96 GB, the whole card as its data sheet says", 10, "capacity"),
             Line("deadline 100 days", 100, "deadline"))
    table = Table(("build",), ())
    return [Chart("builds", "The builds weighed", "GPUs", bars, lines, 150.0, "crowded", table),
            Chart("time", "Time to result", "days", bars[:2], (), 150.0, "crowded", table),
            Chart("memory", "Memory per GPU", "GB", bars[2:], lines[:1], 1.0e6, "crowded", table)]


@pytest.fixture(scope="module")
def pictures(expert) -> list[str]:
    found = [to_svg(chart) for facts in REPRESENTATIVE
             for chart in charts_of(expert.recommend(facts).model_dump(mode="json"), context_of(expert))]
    return found + [to_svg(chart) for chart in crowded()]


def _lines_of(text) -> list[str]:
    spans = [span for span in text.iter(f"{SVG}tspan")]
    return [span.text or "" for span in spans] if spans else [text.text or ""]


def test_every_label_and_value_is_drawn_whole(pictures):
    """What a bar's label and value say is drawn, every character, on as many lines as it takes: nothing cut."""
    for svg in pictures:
        for group in ET.fromstring(svg).iter(f"{SVG}g"):
            if group.get("class") != "bar":
                continue
            label, value = (next(t for t in group.iter(f"{SVG}text") if t.get("class") == kind)
                            for kind in ("label", "value"))
            assert "".join(_lines_of(label)).replace(" ", "") == group.get("data-label").replace(" ", "")
            assert "\u2026" not in "".join(_lines_of(value))


def test_a_colour_per_kind_of_purchase(expert):
    """The builds weighed are drawn in their kind's colour (they were all green or red), the legend names each
    kind drawn, and a build that does not work keeps its kind's colour with an outline the legend names."""
    assert len(set(KIND_COLOURS.values())) == len(KINDS) and set(KIND_COLOURS) == set(KINDS)
    answer = expert.recommend(SWITCH).model_dump(mode="json")
    chart = next(chart for chart in charts_of(answer, context_of(expert)) if chart.key == "builds")
    kinds = [answer["recommendation"]["kind"]] + [item["kind"] for item in answer["alternatives"]]
    assert len(set(kinds)) > 1
    root = ET.fromstring(to_svg(chart))
    fills = [rect.get("fill") for rect in root.iter(f"{SVG}rect") if rect.get("class") == "segment"]
    assert fills == [KIND_COLOURS[kind] for kind in kinds] == [fill_of(kind, "fails") for kind in kinds]
    legend = [text.text for text in root.iter(f"{SVG}text") if text.text in (*KINDS, "does not work")]
    assert legend == [*dict.fromkeys(kinds), "does not work"]
    outlined = [group for group in root.iter(f"{SVG}g") if group.get("class") == "bar"
                and any(rect.get("class") == "failing" for rect in group.iter(f"{SVG}rect"))]
    assert [group.get("data-status") for group in outlined] == ["fails"] * len(outlined) and outlined


def test_ticks_write_numbers_as_the_values_do(pictures):
    """An axis's ticks are written with thousands separators, never in exponent form ('1e+06' it was), and
    read back as the round steps they mark."""
    ticks = [[text.text for text in ET.fromstring(svg).iter(f"{SVG}text") if text.get("class") == "tick"]
             for svg in pictures]
    assert all(ticks), "every picture has its axis' ticks"
    for labels in ticks:
        assert not any("e" in label for label in labels), labels
        values = [float(label.replace(",", "")) for label in labels]
        assert values == sorted(values) and values[0] == 0
    assert ticks[-1][-1] == "1,000,000", "the crowded memory chart's axis ends at a million"
    assert any("20,000" in labels for labels in ticks), "the frontier plan's days are in the tens of thousands"


MEASURE = """<script>
const found = [];
const CLEAR = 2;
const box = (e) => e.getBoundingClientRect();
const grown = (r, by) => ({left: r.left - by, right: r.right + by, top: r.top - by, bottom: r.bottom + by});
const meets = (a, b, by = 0.5) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > by &&
                                  Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > by;
document.querySelectorAll("svg").forEach((svg, index) => {
  const frame = box(svg);
  const texts = [...svg.querySelectorAll("text")]
    .flatMap(t => t.querySelector("tspan") ? [...t.querySelectorAll("tspan")] : [t])
    .filter(t => t.textContent.trim()).map(t => [t.textContent, box(t)]);
  // a shape's box reaches past its geometry by half its stroke, and a text keeps CLEAR pixels from it
  const things = [...svg.querySelectorAll("rect.segment, rect.highlight, rect.failing, rect.swatch, g.reference line")]
    .map(e => [e.tagName + "." + (e.getAttribute("class") || "line"),
               grown(box(e), parseFloat(e.getAttribute("stroke-width") || 0) / 2 + CLEAR)]);
  texts.forEach(([text, r], i) => {
    if (r.left < frame.left - 0.5 || r.right > frame.right + 0.5 || r.top < frame.top - 0.5 ||
        r.bottom > frame.bottom + 0.5)
      found.push(`${index}: '${text}' is cut by the picture's edge`);
    texts.slice(i + 1).forEach(([other, s]) => {
      if (meets(r, s)) found.push(`${index}: '${text}' meets '${other}'`);
    });
    things.forEach(([what, s]) => {
      if (meets(r, s, 0)) found.push(`${index}: '${text}' is within ${CLEAR}px of a ${what}`);
    });
  });
});
document.getElementById("found").textContent = JSON.stringify(found);
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_chromium_draws_no_text_over_another_or_past_the_edge(pictures, tmp_path):
    """Each picture on a page of its own size, measured in Chromium: every text (each line of it) lies inside the
    picture and clear of every other text, every bar, outline and swatch, and every reference line."""
    body = "".join(f"<div>{svg}</div>" for svg in pictures)
    page = tmp_path / "charts.html"
    page.write_text(f'<!doctype html><html><body style="margin:0">{body}<pre id="found"></pre>{MEASURE}</body></html>',
                    encoding="utf-8")
    dom = chromium(["--dump-dom", page.as_uri()], tmp_path).stdout
    found = json.loads(re.search(r'<pre id="found">(.*?)</pre>', dom, re.S).group(1).replace("&amp;", "&"))
    assert found == [], "\n".join(found)
