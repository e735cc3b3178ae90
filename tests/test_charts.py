"""The charts of an answer: each drawn for representative answers, its bars and lines read back from the SVG's
geometry and checked against the answer's figures, the policy's parameters (rules/) and the document's
points (knowledge/); drawn only when the answer carries the data; every text escaped."""
from __future__ import annotations

import math
import shutil
import xml.etree.ElementTree as ET

import pytest

from charts_support import (
    BATCH,
    FRONTIER,
    IB_CLUSTER,
    INT4,
    REPLICAS,
    SINGLE,
    calibration,
    card_switch,
    drawn,
    missed_deadline,
    parameter,
    value,
)
from kentino_expert.answer.charts import ChartContext, charts_of, context_of
from kentino_expert.answer.charts.svg import nice_step, to_svg
from kentino_expert.answer.charts.text import to_markdown

TOLERANCE = 0.01  # the SVG writes coordinates to 3 decimals: values come back within 1%


@pytest.fixture(scope="module")
def answers(expert):
    return {name: expert.recommend(facts).model_dump(mode="json") for name, facts in (
        ("single", SINGLE), ("int4", INT4), ("replicas", REPLICAS), ("ib", IB_CLUSTER), ("frontier", FRONTIER),
        ("batch", BATCH))}


def charts(expert, answer) -> dict:
    return {chart.key: chart for chart in charts_of(answer, context_of(expert))}


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=0.05)


def test_single_node_memory_bar_is_its_node_figures_per_gpu(expert, answers):
    """One 8-GPU node at FP8: the weights, KV cache and overhead segments are the node figures over 8 GPUs, the
    bar's end is the workload fraction of the card, the lines are the card and workload_fraction_max of it."""
    answer = answers["single"]
    assert answer["recommendation"]["kind"] == "single-node"
    found = charts(expert, answer)
    assert set(found) == {"memory"}, "one node, inference: no builds, no time, no scaling chart"
    picture = drawn(to_svg(found["memory"]))
    bar = picture.bars[0]
    parts = {role: width for role, _, width, _ in bar.segments}
    card = value(answer, "gpu_memory_gb")
    assert close(parts["weights"], value(answer, "weights_gb_fp8") / 8)
    assert close(parts["kv-cache"], value(answer, "kv_cache_gb") / 8)
    assert close(bar.total, value(answer, "workload_fraction_fp8") * card)
    assert close(picture.lines["capacity"], card)
    assert close(picture.lines["limit"], parameter("workload_fraction_max") * card)
    assert bar.status == "works" and bar.highlighted
    starts = [start for _, _, _, start in bar.segments]
    ends = [start + width for _, _, width, start in bar.segments]
    stacked = all(close(end, start) for end, start in zip(ends[:-1], starts[1:], strict=True))
    assert close(starts[0], 0) and stacked, "each segment starts where the one before it ends"


def test_int4_memory_bar_draws_the_int4_weights(expert, answers):
    """One node at INT4: the weights segment is the INT4 weights per GPU, not the FP8 ones."""
    answer = answers["int4"]
    assert answer["recommendation"]["precision"] == "int4"
    bar = drawn(to_svg(charts(expert, answer)["memory"])).bars[0]
    weights = next(width for role, _, width, _ in bar.segments if role == "weights")
    assert close(weights, value(answer, "weights_gb_int4") / 8)
    assert not close(weights, value(answer, "weights_gb_fp8") / 8)


def test_replicas_share_the_kv_cache(expert, answers):
    """Data-parallel replicas: every GPU keeps the whole weights share of its node and 1/replicas of the KV cache."""
    answer = answers["replicas"]
    rec = answer["recommendation"]
    assert rec["kind"] == "dp-replicas" and rec["replicas"] > 1
    found = charts(expert, answer)
    assert "efficiency" not in found, "independent replicas do not cross nodes"
    parts = {role: width for role, _, width, _ in drawn(to_svg(found["memory"])).bars[0].segments}
    assert close(parts["weights"], value(answer, "weights_gb_fp8") / 8)
    assert close(parts["kv-cache"], value(answer, "kv_cache_gb") / (8 * rec["replicas"]))


def test_ib_cluster_memory_time_and_efficiency(expert, answers):
    """A 2-node IB cluster: the training state over its 16 GPUs against training_fraction_max; days on the plan
    and on one node; the plan's efficiency against efficiency_floor and the document's 0.73 / 0.65."""
    answer = answers["ib"]
    rec = answer["recommendation"]
    assert rec["kind"] == "multi-node-ib" and rec["nodes"] == 2
    found = charts(expert, answer)
    memory = drawn(to_svg(found["memory"]))
    card = value(answer, "gpu_memory_gb")
    assert close(memory.bars[0].total, value(answer, "training_state_gb") / 16)
    assert close(memory.lines["limit"], parameter("training_fraction_max") * card)
    time = drawn(to_svg(found["time"]))
    assert close(time.bar("2 nodes").total, value(answer, "days_on_plan")) and time.bar("2 nodes").highlighted
    one = [bar for bar in time.bars if not bar.label.startswith("2 nodes")][0]
    assert close(one.total, value(answer, "days_on_one_node")) and one.status == "fails", "the state needs 2 nodes"
    efficiency = drawn(to_svg(found["efficiency"]))
    plan = efficiency.bar("this plan")
    assert close(plan.total, value(answer, "plan_efficiency")) and plan.highlighted
    assert close(efficiency.bar("not the plan").total, value(answer, "naive_tp_efficiency"))
    assert close(efficiency.lines["floor"], parameter("efficiency_floor"))
    points = sorted(bar.total for bar in efficiency.bars if bar.status == "reference")
    assert points == pytest.approx(calibration(), abs=0.005) and calibration() == [0.65, 0.73]


def test_frontier_says_its_figures_are_for_fewer_nodes(expert, answers):
    """Frontier: the efficiency figures are at scale_out_nodes, not the plan's count, and the chart says so."""
    answer = answers["frontier"]
    rec = answer["recommendation"]
    assert rec["kind"] == "frontier"
    chart = charts(expert, answer)["efficiency"]
    nodes = int(value(answer, "scale_out_nodes"))
    assert nodes != rec["nodes"]
    assert f"the plan has {rec['nodes']}" in chart.bars[0].label and f"{nodes} nodes" in chart.bars[0].label
    assert close(drawn(to_svg(chart)).bars[0].total, value(answer, "plan_efficiency"))


def test_batch_corpus_days_against_the_deadline(expert, answers):
    """A batch corpus with a deadline: one node misses it, the plan's replicas split the corpus and meet it."""
    answer = answers["batch"]
    nodes = answer["recommendation"]["nodes"]
    picture = drawn(to_svg(charts(expert, answer)["time"]))
    assert close(picture.lines["deadline"], 30)
    plan, one = picture.bar(f"{nodes} nodes"), [bar for bar in picture.bars if "nodes" not in bar.label][0]
    assert close(one.total, value(answer, "batch_days_one_node")) and one.status == "fails"
    assert close(plan.total, value(answer, "batch_days_one_node") / nodes) and plan.status == "works"


def test_card_switch_draws_the_builds_and_the_per_gpu_parts(expert, answers):
    """Shaped as issue 11 answers: the builds chart has the recommended build highlighted and each alternative
    in GPUs, works or not; the memory bar is the plan's own per-GPU parts plus the rest of its total."""
    answer = card_switch(answers["ib"])
    found = charts(expert, answer)
    builds = drawn(to_svg(found["builds"]))
    assert [bar.highlighted for bar in builds.bars] == [True, False, False, False]
    assert builds.bars[0].label == "2 nodes x 8 x rtx-pro-6000" and close(builds.bars[0].total, 16)
    assert close(builds.bar("rtx-5090").total, 48) and builds.bar("rtx-5090").status == "fails"
    assert close(builds.bar("l40").total, 32) and builds.bar("l40").status == "works"
    assert close(builds.bar("x l4 ").total, 8) and "at least 8 GPUs" in builds.bar("x l4 ").value_text
    table = found["builds"].table
    assert ("recommended_nodes = 6 nodes" in table.rows[1]) and "does not work" in table.rows[1]
    memory = drawn(to_svg(found["memory"])).bars[0]
    parts = {role: width for role, _, width, _ in memory.segments}
    assert close(parts["optimizer"], 68.0) and close(parts["state"], 1.8) and close(parts["activations"], 7.1)
    assert close(parts["other"], 79.5 - 68.0 - 1.8 - 7.1) and close(memory.total, 79.5)
    assert "per-GPU figures" in found["memory"].caption


def test_missed_deadline_is_drawn_past_the_line(expert, answers):
    """The plan's time_to_result_days past the deadline is a failing highlighted bar; the one-node alternative
    is drawn with its deciding days; an alternative decided by another figure is not a time bar."""
    answer = missed_deadline(answers["frontier"])
    picture = drawn(to_svg(charts(expert, answer)["time"]))
    assert close(picture.lines["deadline"], 30)
    plan = picture.bars[0]
    assert plan.highlighted and plan.status == "fails" and close(plan.total, 41.25)
    assert "misses the deadline" in plan.value_text
    assert len(picture.bars) == 2 and close(picture.bars[1].total, 349.4)


def test_no_data_no_chart(expert, answers):
    """An answer without figures, or a plan within one node, gets no chart it has no data for."""
    bare = {**answers["single"], "figures": {}}
    assert charts_of(bare, context_of(expert)) == ()
    assert "efficiency" not in charts(expert, answers["int4"])
    assert "builds" not in charts(expert, answers["ib"]), "no alternatives in this answer"


def test_policy_lines_come_from_the_loaded_rules(expert, answers, tmp_path):
    """Edit workload_fraction_max in a copy of rules/: the limit line moves with it; without parameters, no line."""
    from kentino_expert.expert import Expert
    from kentino_expert.paths import bundled
    rules = tmp_path / "rules"
    shutil.copytree(bundled("rules"), rules)
    params = rules / "parameters.yaml"
    params.write_text(params.read_text().replace("workload_fraction_max:\n    value: 0.90",
                                                 "workload_fraction_max:\n    value: 0.85"))
    other = Expert(rules)
    try:
        answer = answers["single"]
        picture = drawn(to_svg(charts(other, answer)["memory"]))
        assert close(picture.lines["limit"], 0.85 * value(answer, "gpu_memory_gb"))
    finally:
        other.close()
    bare = charts_of(answers["single"], ChartContext())[0]
    assert "limit" not in drawn(to_svg(bare)).lines


def test_every_text_is_escaped(expert, answers):
    """User-provided strings (a card name, a why) are text in the SVG and its table, never markup."""
    answer = card_switch(answers["ib"])
    answer["recommendation"]["gpu"] = '<script>alert("x")</script>&'
    for chart in charts(expert, answer).values():
        svg = to_svg(chart)
        root = ET.fromstring(svg)  # well-formed XML
        assert not any(element.tag.endswith("script") for element in root.iter())
        assert "<script>" not in svg and "<b>" not in svg
    builds = charts(expert, answer)["builds"]
    assert '<script>alert("x")</script>&' in builds.bars[0].label
    assert "<b>buildable</b>" in "\n".join(to_markdown(builds)), "Markdown keeps the text as it was given"


def test_text_equivalent_names_every_number(expert, answers):
    """The summary and the table of the memory chart carry the numbers the bar draws."""
    chart = charts(expert, answers["single"])["memory"]
    for row in chart.table.rows:
        assert row[1] in chart.summary or row[0] in ("total per GPU", "card memory") or "limit" in row[0]
    assert f"{value(answers['single'], 'gpu_memory_gb'):g} GB" in chart.summary


@pytest.mark.parametrize("top, step", [(1.05, 0.2), (100.8, 20), (5.0, 1), (48_261.2, 10_000), (3.5, 1)])
def test_ticks_are_round(top, step):
    """Axis ticks are 1, 2 or 5 times a power of ten, at most six of them."""
    assert nice_step(top) == pytest.approx(step)
