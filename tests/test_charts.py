"""The charts of an answer: each drawn for representative answers, its bars and lines read back from the SVG's
geometry and checked against the answer's figures, the policy's parameters (rules/) and the document's
points (knowledge/); drawn only when the answer carries the data; every text escaped."""
from __future__ import annotations

import copy
import math
import shutil
import xml.etree.ElementTree as ET

import pytest

from charts_support import (
    BATCH,
    FRONTIER,
    IB_CLUSTER,
    INT4,
    MISSED,
    REPLICAS,
    SINGLE,
    SWITCH,
    alternative,
    calibration,
    card_memory,
    drawn,
    label_of,
    parameter,
    value,
)
from kentino_expert.answer.charts import ChartContext, charts_of, context_of
from kentino_expert.answer.charts.svg import nice_step, to_svg
from kentino_expert.answer.charts.text import to_markdown

TOLERANCE = 0.01  # the SVG writes coordinates to 3 decimals: values come back within 1%
REPRESENTATIVE = (("single", SINGLE), ("int4", INT4), ("replicas", REPLICAS), ("ib", IB_CLUSTER),
                  ("frontier", FRONTIER), ("batch", BATCH), ("switch", SWITCH), ("missed", MISSED))


@pytest.fixture(scope="module")
def answers(expert):
    return {name: expert.recommend(facts).model_dump(mode="json") for name, facts in REPRESENTATIVE}


def charts(expert, answer) -> dict:
    return {chart.key: chart for chart in charts_of(answer, context_of(expert))}


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=0.05)


def parts_of(picture) -> dict:
    return {role: width for role, _, width, _ in picture.bars[0].segments}


def assert_memory_is_the_plan(expert, answer, parts: dict, limit: str) -> None:
    """The memory bar: each segment is its plan_gpu_* figure, stacked end to end up to plan_gpu_memory_gb,
    against the card's memory (knowledge/gpus.yaml) and the policy's limit (rules/parameters.yaml)."""
    picture = drawn(to_svg(charts(expert, answer)["memory"]))
    bar = picture.bars[0]
    drawn_parts = parts_of(picture)
    assert set(drawn_parts) == set(parts.values())
    for name, role in parts.items():
        assert close(drawn_parts[role], value(answer, name)), name
    card = card_memory(answer["recommendation"]["gpu"])
    assert close(bar.total, value(answer, "plan_gpu_memory_gb"))
    assert close(bar.total, value(answer, "plan_gpu_memory_fraction") * card)
    assert close(picture.lines["capacity"], card) and close(picture.lines["limit"], parameter(limit) * card)
    assert bar.highlighted and bar.status == ("works" if bar.total <= parameter(limit) * card else "fails")
    starts = [start for _, _, _, start in bar.segments]
    ends = [start + width for _, _, width, start in bar.segments]
    stacked = all(close(end, start) for end, start in zip(ends[:-1], starts[1:], strict=True))
    assert close(starts[0], 0) and stacked, "each segment starts where the one before it ends"


SERVING_PARTS = {"plan_gpu_weights_gb": "weights", "plan_gpu_kv_cache_gb": "kv-cache",
                 "plan_gpu_overhead_gb": "overhead"}
TRAINING_PARTS = {"plan_gpu_states_gb": "optimizer", "plan_gpu_gathered_gb": "state",
                  "plan_gpu_activations_gb": "activations"}


def assert_builds_are_the_alternatives(expert, answer) -> None:
    """The builds chart: the recommended build first and highlighted, then every alternative in its order, each
    as nodes x GPUs per node, marked works where the search found it works and fails where it does not."""
    picture = drawn(to_svg(charts(expert, answer)["builds"]))
    rec = answer["recommendation"]
    builds = [rec] + answer["alternatives"]
    assert [bar.label for bar in picture.bars] == [label_of(build) for build in builds]
    assert [bar.highlighted for bar in picture.bars] == [True] + [False] * len(answer["alternatives"])
    for bar, build in zip(picture.bars, builds, strict=True):
        assert close(bar.total, build["nodes"] * build["gpus_per_node"]), bar.label
    for bar, item in zip(picture.bars[1:], answer["alternatives"], strict=True):
        assert bar.status == ("works" if item["works"] else "fails"), bar.label


def test_the_prices_chart_is_each_builds_quote(expert, answers):
    """One bar per priced build: the recommendation's price_total first (highlighted), then each alternative's,
    with its power; the summary names the working builds that cost less (none when the price decided)."""
    answer = answers["single"]
    chart = charts(expert, answer)["prices"]
    priced = [alt for alt in answer["alternatives"] if "price_total" in alt["figures"]]
    assert [bar.total for bar in chart.bars] == [value(answer, "price_total")] + [
        alt["figures"]["price_total"] for alt in priced]
    assert chart.bars[0].highlighted and not any(bar.highlighted for bar in chart.bars[1:])
    assert all(f"{alt['figures']['power_kw']:,.1f} kW" in bar.value_text for alt, bar in zip(priced, chart.bars[1:],
                                                                                          strict=True))
    cheaper = [alt for alt in priced if alt["works"] and alt["figures"]["price_total"] < value(answer, "price_total")]
    assert ("would cost less" in chart.summary) == bool(cheaper)


def test_single_node_memory_and_the_other_cards(expert, answers):
    """One 8-GPU node at FP8: the bar is the plan's per-GPU weights (the FP8 weights over TP), KV cache and
    overhead against the card and workload_fraction_max; the builds chart shows why not the other cards; one
    node at inference has no time and no scaling chart."""
    answer = answers["single"]
    rec = answer["recommendation"]
    assert (rec["kind"], rec["nodes"], rec["precision"]) == ("single-node", 1, "fp8")
    assert set(charts(expert, answer)) == {"memory", "builds", "prices"}
    assert_memory_is_the_plan(expert, answer, SERVING_PARTS, "workload_fraction_max")
    assert close(value(answer, "plan_gpu_weights_gb"), value(answer, "weights_gb_fp8") / rec["parallelism"]["tp"])
    assert_builds_are_the_alternatives(expert, answer)


def test_int4_memory_bar_draws_the_int4_weights(expert, answers):
    """One node at INT4: the weights segment is the INT4 weights over the plan's TP, not the FP8 ones."""
    answer = answers["int4"]
    rec = answer["recommendation"]
    assert rec["precision"] == "int4"
    assert_memory_is_the_plan(expert, answer, SERVING_PARTS, "workload_fraction_max")
    weights = parts_of(drawn(to_svg(charts(expert, answer)["memory"])))["weights"]
    assert close(weights, value(answer, "weights_gb_int4") / rec["parallelism"]["tp"])
    assert not close(weights, value(answer, "weights_gb_fp8") / rec["parallelism"]["tp"])
    assert_builds_are_the_alternatives(expert, answer)


def test_replicas_hold_a_share_of_the_kv_cache(expert, answers):
    """Data-parallel replicas: every GPU keeps its TP share of the weights and less KV cache than one copy
    would hold for every request; independent replicas draw no scaling chart."""
    answer = answers["replicas"]
    rec = answer["recommendation"]
    assert rec["kind"] == "dp-replicas" and rec["replicas"] > 1
    assert "efficiency" not in charts(expert, answer), "independent replicas do not cross nodes"
    assert_memory_is_the_plan(expert, answer, SERVING_PARTS, "workload_fraction_max")
    parts = parts_of(drawn(to_svg(charts(expert, answer)["memory"])))
    assert close(parts["weights"], value(answer, "weights_gb_fp8") / rec["parallelism"]["tp"])
    assert parts["kv-cache"] < value(answer, "kv_cache_gb") / rec["parallelism"]["tp"]
    assert_builds_are_the_alternatives(expert, answer)


def test_ib_cluster_memory_time_and_efficiency(expert, answers):
    """An IB cluster of training_nodes nodes: the per-GPU state, gathered module and activations against
    training_fraction_max; days of the plan and of every other card's plan; the plan's efficiency against
    efficiency_floor and the document's 0.73 / 0.65."""
    answer = answers["ib"]
    rec = answer["recommendation"]
    assert rec["kind"] == "multi-node-ib" and rec["nodes"] == value(answer, "training_nodes") > 1
    found = charts(expert, answer)
    assert set(found) == {"memory", "builds", "prices", "time", "efficiency"}
    assert_memory_is_the_plan(expert, answer, TRAINING_PARTS, "training_fraction_max")
    assert_builds_are_the_alternatives(expert, answer)
    time = drawn(to_svg(found["time"]))
    assert "deadline" not in time.lines, "no deadline was given"
    plan = time.bar(label_of(rec))
    assert close(plan.total, value(answer, "time_to_result_days")) and plan.highlighted
    assert close(value(answer, "time_to_result_days"), value(answer, "days_on_plan"))
    for item in answer["alternatives"]:
        bar = time.bar(label_of(item))
        assert close(bar.total, item["time_to_result_days"]) and not bar.highlighted
        assert bar.status == ("works" if item["works"] else "fails")
    efficiency = drawn(to_svg(found["efficiency"]))
    plan = efficiency.bar("this plan")
    assert close(plan.total, value(answer, "plan_efficiency")) and plan.highlighted
    assert close(efficiency.bar("not the plan").total, value(answer, "naive_tp_efficiency"))
    assert close(efficiency.lines["floor"], parameter("efficiency_floor"))
    points = sorted(bar.total for bar in efficiency.bars if bar.status == "reference")
    assert points == pytest.approx(calibration(), abs=0.005) and calibration() == [0.65, 0.73]


def test_frontier_is_recommended_but_not_built(expert, answers):
    """Frontier: the efficiency figures are at scale_out_nodes, not the plan's count, and the chart says so;
    the recommended build is drawn red with the policy's reason (frontier work: beyond the IB cluster of
    max_ib_cluster_nodes Kentino builds)."""
    answer = answers["frontier"]
    rec = answer["recommendation"]
    assert rec["kind"] == "frontier"
    found = charts(expert, answer)
    chart = found["efficiency"]
    nodes = int(value(answer, "scale_out_nodes"))
    assert nodes != rec["nodes"]
    assert f"the plan has {rec['nodes']}" in chart.bars[0].label and f"{nodes} nodes" in chart.bars[0].label
    assert close(drawn(to_svg(chart)).bars[0].total, value(answer, "plan_efficiency"))
    assert_memory_is_the_plan(expert, answer, TRAINING_PARTS, "training_fraction_max")
    builds = drawn(to_svg(found["builds"]))
    assert builds.bars[0].highlighted and builds.bars[0].status == "fails"
    assert f"{parameter('max_ib_cluster_nodes'):g}-node IB cluster" in found["builds"].table.rows[0][-1]
    time = drawn(to_svg(found["time"]))
    assert close(time.bars[0].total, value(answer, "time_to_result_days")) and time.bars[0].status == "fails"


def test_batch_corpus_days_against_the_deadline(expert, answers):
    """A batch corpus with a deadline: the plan's replicas split the corpus (one node's days over the nodes)
    and meet it; the one-node plan misses it; every other card's plan is drawn at its own days."""
    answer = answers["batch"]
    rec = answer["recommendation"]
    assert_memory_is_the_plan(expert, answer, SERVING_PARTS, "workload_fraction_max")
    picture = drawn(to_svg(charts(expert, answer)["time"]))
    assert close(picture.lines["deadline"], BATCH["deadline_days"])
    plan = picture.bar(label_of(rec))
    assert close(plan.total, value(answer, "time_to_result_days")) and plan.status == "works"
    # one node's days at the plan's own precision (batch_days_one_node is FP8's; a 405B corpus runs at INT4)
    one_node_days = BATCH["corpus_tokens"] / value(answer, f"node_tokens_per_s_{rec['precision']}") / 86400
    assert close(plan.total, one_node_days / rec["nodes"])
    one = picture.bar(label_of({**rec, "nodes": 1}))
    assert close(one.total, one_node_days) and one.status == "fails"
    for item in answer["alternatives"]:
        bar = picture.bar(label_of(item))
        assert close(bar.total, item["time_to_result_days"])
        assert (bar.status == "fails") == (item["time_to_result_days"] > BATCH["deadline_days"])


def test_card_switch_shows_why_not_the_named_card(expert, answers):
    """A 70B full fine-tune asked on RTX 5090s: the builds chart draws the 5090 plan red at its nodes with the
    search's reason, the recommended card highlighted; memory is drawn against the recommended card's memory,
    not the named one's."""
    answer = answers["switch"]
    rec = answer["recommendation"]
    assert rec["gpu"] != SWITCH["gpu"]
    found = charts(expert, answer)
    assert_builds_are_the_alternatives(expert, answer)
    named = alternative(answer, SWITCH["gpu"])
    bar = drawn(to_svg(found["builds"])).bar(label_of(named))
    assert bar.status == "fails" and close(bar.total, named["nodes"] * named["gpus_per_node"])
    row = next(row for row in found["builds"].table.rows if row[0] == label_of(named))
    assert row[-1] == named["why"] and f"{named['figure']['value']:g}" in row[-2]
    assert_memory_is_the_plan(expert, answer, TRAINING_PARTS, "training_fraction_max")
    assert card_memory(rec["gpu"]) != card_memory(SWITCH["gpu"])
    assert "per-GPU figures" in found["memory"].caption


def test_missed_deadline_is_drawn_past_the_line(expert, answers):
    """8B in 30 days: the one-node plan's days (days_on_one_node) run past the deadline line in red; the plan
    the deadline sized meets it, drawn red all the same: frontier work, which Kentino does not build."""
    answer = answers["missed"]
    rec = answer["recommendation"]
    picture = drawn(to_svg(charts(expert, answer)["time"]))
    assert close(picture.lines["deadline"], MISSED["deadline_days"])
    one = picture.bar(label_of({**rec, "nodes": 1}))
    assert close(one.total, value(answer, "days_on_one_node")) and one.total > MISSED["deadline_days"]
    assert one.status == "fails" and "misses the deadline" in one.value_text
    plan = picture.bars[0]
    assert plan.highlighted and close(plan.total, value(answer, "time_to_result_days"))
    assert plan.total <= MISSED["deadline_days"] and "meets the deadline" in plan.value_text
    assert plan.status == "fails" and rec["kind"] == "frontier" and "does not work" in plan.value_text
    assert len(picture.bars) == 1 + len(answer["alternatives"])


def test_older_answers_keep_their_time_chart(expert, answers):
    """An answer logged before alternatives carried their days draws those decided by time; one logged before
    time_to_result_days draws one node (red: the state needs more) against the scale-out plan."""
    answer = copy.deepcopy(answers["missed"])
    for item in answer["alternatives"]:
        del item["time_to_result_days"]
    bars = drawn(to_svg(charts(expert, answer)["time"])).bars
    timed = [item for item in answer["alternatives"] if item["figure"]["name"] == "time_to_result_days"]
    assert len(bars) == 1 + len(timed) and timed
    older = copy.deepcopy(answers["ib"])
    del older["figures"]["time_to_result_days"]
    older["alternatives"] = []
    time = drawn(to_svg(charts(expert, older)["time"]))
    nodes = int(value(older, "scale_out_nodes"))
    spread = time.bar(f"{nodes} nodes")
    assert close(spread.total, value(older, "days_on_plan")) and spread.highlighted
    one = next(bar for bar in time.bars if bar is not spread)
    assert close(one.total, value(older, "days_on_one_node")) and one.status == "fails"


def test_no_data_no_chart(expert, answers):
    """An answer without figures or alternatives gets no chart; a plan within one node no scaling chart; an
    answer logged before the build search no builds chart."""
    bare = {**answers["single"], "figures": {}, "alternatives": []}
    assert charts_of(bare, context_of(expert)) == ()
    assert "efficiency" not in charts(expert, answers["int4"])
    assert "builds" not in charts(expert, {**answers["ib"], "alternatives": []})


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
    answer = copy.deepcopy(answers["switch"])
    answer["recommendation"]["gpu"] = '<script>alert("x")</script>&'
    answer["alternatives"][0]["why"] = "<b>buildable</b>"
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
