"""The quote of a build (issue 29): its bill of materials, price, power and rack units worked out by hand from the
YAML files (read here with PyYAML, not through the code), the fabric's leaf-spine counts, and what the price list
check refuses."""
from __future__ import annotations

import datetime
import math
import shutil
from pathlib import Path

import pytest
import yaml

from kentino_expert.answer.plans import Plan
from kentino_expert.answer.quotes import Pricer, build_of
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.domain.quote import HOURS_PER_YEAR, Build, fabric_counts, quote_of
from kentino_expert.errors import KentinoError
from kentino_expert.expert import Expert
from kentino_expert.ruleset.diagnostics import DiagnosticSink
from kentino_expert.ruleset.prices import read_prices
from kentino_expert.yamlsrc import load_yaml

ROOT = Path(__file__).resolve().parent.parent
PRICES = yaml.safe_load((ROOT / "rules" / "prices.yaml").read_text())["prices"]
PRICE = {line["part"]: line["price"] for line in PRICES["lines"]}
PARTS = yaml.safe_load((ROOT / "knowledge" / "parts.yaml").read_text())
CARDS = {card["id"]: card for card in yaml.safe_load((ROOT / "knowledge" / "gpus.yaml").read_text())["gpus"]}


@pytest.fixture(scope="module")
def expert():
    return Expert()


def _part(part_id: str) -> dict:
    return next(p for p in PARTS["chassis"] + PARTS["network"] if p["id"] == part_id)


def test_one_node_is_its_cards_and_its_chassis(expert):
    """8 x RTX PRO 6000 in the 8-slot chassis: 8 card prices + 1 chassis price; power 8 x board power + the
    chassis's base power; 4 U; the price per million tokens from the purchase over the years plus the energy."""
    quote = quote_of(Build("rtx-pro-6000", 8, 1, output_tokens_per_s=2000.0), expert.knowledge, expert.ruleset.prices)
    chassis = _part("supermicro-sys-421ge-tnrt")
    total = 8 * PRICE["rtx-pro-6000"] + PRICE[chassis["id"]]
    kw = (8 * CARDS["rtx-pro-6000"]["board_power_w"] + chassis["base_power_w"]) / 1000
    hourly = total / (PRICES["amortization_years"] * 365.25 * 24) + kw * PRICES["energy_price_per_kwh"]
    assert quote.price_total == pytest.approx(total)
    assert quote.power_kw == pytest.approx(kw)
    assert quote.rack_units == chassis["rack_units"]
    assert quote.price_per_million_tokens == pytest.approx(hourly / (2000 * 3600) * 1e6)
    assert [(line.part, line.quantity) for line in quote.lines] == [("rtx-pro-6000", 8), (chassis["id"], 1)]
    assert quote.price_per_run is None


def test_a_training_run_costs_its_hours_of_purchase_and_energy(expert):
    """Two days of two L40 nodes: 48 hours of the amortized purchase and of the energy."""
    quote = quote_of(Build("l40", 8, 2, time_to_result_days=2.0), expert.knowledge, expert.ruleset.prices)
    hourly = quote.price_total / (PRICES["amortization_years"] * HOURS_PER_YEAR) \
        + quote.power_kw * PRICES["energy_price_per_kwh"]
    assert quote.price_per_run == pytest.approx(48 * hourly)
    assert quote.price_per_million_tokens is None


def test_a_multi_node_fabric_has_an_adapter_per_gpu_and_one_switch_while_the_ports_last(expert):
    """2 nodes x 8 GPUs on NDR: 16 adapters, one 64-port switch, 16 cables, each priced and drawing power."""
    quote = quote_of(Build("rtx-pro-6000", 8, 2, fabric="ndr-400g-ib"), expert.knowledge, expert.ruleset.prices)
    lines = {line.part: line.quantity for line in quote.lines}
    assert lines == {"rtx-pro-6000": 16, "supermicro-sys-421ge-tnrt": 2, "connectx-7-ndr": 16, "qm9700": 1,
                     "cable-ndr": 16}
    expected = sum(PRICE[part] * count for part, count in lines.items())
    assert quote.price_total == pytest.approx(expected)
    watts = 2 * (8 * 600 + _part("supermicro-sys-421ge-tnrt")["base_power_w"]) \
        + 16 * _part("connectx-7-ndr")["power_w"] + _part("qm9700")["power_w"] + 16 * _part("cable-ndr")["power_w"]
    assert quote.power_kw == pytest.approx(watts / 1000)
    assert quote.rack_units == 2 * 4 + 1


@pytest.mark.parametrize("gpus, fabrics, ports, expected", [
    (16, 1, 64, {"adapter": 16, "switch": 1, "cable": 16}),
    # 72 ports on 64-port switches: 3 leaves of 32 GPU ports each, 96 uplinks over 2 spines of 64
    (72, 1, 64, {"adapter": 72, "switch": 5, "cable": 72 + 96}),
    # two units of 32 GPUs: a switch each
    (64, 2, 64, {"adapter": 64, "switch": 2, "cable": 64}),
    # 100 GPUs on 40-port HDR switches: 5 leaves of 20, 100 uplinks over 3 spines
    (100, 1, 40, {"adapter": 100, "switch": 8, "cable": 200}),
])
def test_fabric_counts_are_a_non_blocking_leaf_spine_tree(gpus, fabrics, ports, expected):
    """A fabric fits one switch until its GPUs exceed the ports; then each leaf gives half its ports to GPUs."""
    assert fabric_counts(gpus, fabrics, ports) == expected


def test_data_parallel_replicas_need_no_fabric(expert):
    """Replicas behind a load balancer are quoted without adapters or switches; a multi-node IB plan with them."""
    replicas = Plan("dp-replicas", 3, 8, "l40", "fp8", None, {}, "", interconnect="none", replicas=3)
    cluster = Plan("multi-node-ib", 2, 8, "l40", "bf16", 2, {}, "", interconnect="ndr-400g-ib")
    assert build_of(replicas, expert.knowledge).fabric is None
    assert build_of(cluster, expert.knowledge).fabric == "ndr-400g-ib"
    parts = {line.part for line in Pricer(expert.knowledge, expert.ruleset.prices).quote(replicas).lines}
    assert parts == {"l40", "supermicro-sys-421ge-tnrt"}


def test_frontier_work_and_a_missing_price_list_are_not_quoted(expert):
    """No quote for frontier work, nor without a price list."""
    frontier = Plan("frontier", 20, 8, "rtx-pro-6000", "bf16", None, {}, "")
    single = Plan("single-node", 1, 8, "rtx-pro-6000", "fp8", None, {}, "")
    assert Pricer(expert.knowledge, expert.ruleset.prices).quote(frontier) is None
    assert Pricer(expert.knowledge, None).quote(single) is None


def _checked(text: str, expert, today=datetime.date(2026, 12, 7)):
    sink = DiagnosticSink()
    data = load_yaml(text, "rules/prices.yaml")
    found = read_prices(data, "rules/prices.yaml", text, expert.knowledge, sink, today)
    return found, [(d.code, d.location.line) for d in sink.sorted()], [d.message for d in sink.sorted()]


def _bundled_text() -> str:
    return (ROOT / "rules" / "prices.yaml").read_text()


def test_the_bundled_price_list_is_clean_and_prices_every_part(expert):
    """No diagnostic; every shipped card and every part of knowledge/parts.yaml has a positive price."""
    found, codes, _ = _checked(_bundled_text(), expert)
    assert codes == []
    shipped = [card for card, spec in CARDS.items() if spec.get("kentino_ships")]
    parts = [p["id"] for p in PARTS["chassis"] + PARTS["network"]]
    assert all(found.price(part) > 0 for part in shipped + parts)


@pytest.mark.parametrize("old, new, code", [
    ("part: l40\n", "part: l4O\n", "E041"),
    ("price: 7169\n", "price: 0\n", "E042"),
    ("price: 7169\n", "price: -5\n", "E042"),
    ("price: 7169\n", "price: 7169\n      currency: USD\n", "E043"),
    ("amortization_years: 3\n", "amortization_years: 0\n", "E044"),
    ("currency: EUR\n", "currency: euro\n", "E044"),
    ("date: \"2026-09-26\"\n", "date: \"2025-01-01\"\n", "W311"),
])
def test_each_price_list_mistake_has_its_code_at_its_line(expert, old, new, code):
    """A misspelt part, a zero or negative price, another currency, an unusable setting, an old list."""
    text = _bundled_text()
    assert old in text
    edited = text.replace(old, new, 1)
    _, codes, messages = _checked(edited, expert)
    line = edited[:edited.index(new)].count("\n") + 1 + (1 if code == "E043" else 0)
    assert (code, line) in codes, (codes, messages)


def test_a_part_the_list_leaves_out_is_named(expert):
    """Deleting a card's line makes E042 name that card."""
    text = _bundled_text()
    start = text.index("    - part: l4\n")
    end = text.index("    - part: supermicro-sys-421ge-tnrt")
    _, codes, messages = _checked(text[:start] + text[end:], expert)
    assert [c for c, _ in codes] == ["E042"] and "'l4'" in messages[0]


def test_the_answer_carries_the_quote_of_its_recommendation(expert):
    """The recommended build's bill sums to its price_total, and each alternative's figures carry its price."""
    answer = expert.recommend({"task": "inference", "model": "llama-3.1-70b", "concurrency": 48})
    bill = answer.bill_of_materials
    assert bill and sum(line.line_total for line in bill) == pytest.approx(answer.figures["price_total"].value)
    rec = answer.recommendation
    assert {line.part: line.quantity for line in bill}[rec.gpu] == rec.nodes * rec.gpus_per_node
    assert answer.price_list.digest and answer.figures["price_total"].unit == "EUR"
    assert all("price_total" in alt.figures and alt.bill_of_materials for alt in answer.alternatives
               if alt.kind != "frontier")


def test_the_cheapest_build_that_works_wins_among_kinds_as_light(expert):
    """No working alternative of the recommendation's kind costs less than the recommendation."""
    answer = expert.recommend({"task": "inference", "model": "llama-3.1-70b", "concurrency": 48})
    price = answer.figures["price_total"].value
    same_kind = [alt for alt in answer.alternatives if alt.works and alt.kind == answer.recommendation.kind]
    assert same_kind and all(alt.figures["price_total"] >= price for alt in same_kind)
    assert any(step.rule == "the-cheapest-build-that-works" for step in answer.trace)


def test_a_named_build_that_works_is_kept_and_the_saving_is_said(expert):
    """The buyer's Pro 6000 is kept; the warning names the cheapest working build and the difference in price."""
    answer = expert.recommend({"task": "inference", "model": "llama-3.1-70b", "concurrency": 48,
                               "gpu": "rtx-pro-6000"})
    assert answer.recommendation.gpu == "rtx-pro-6000"
    cheapest = min((alt for alt in answer.alternatives if alt.works), key=lambda alt: alt.figures["price_total"])
    saving = answer.figures["price_total"].value - cheapest.figures["price_total"]
    warning = next(w for w in answer.warnings if w.code == "cheaper-build-works")
    assert cheapest.gpu in warning.message and f"{saving:,.0f}" in warning.message
    assert math.isclose(saving, round(saving), abs_tol=1)


def _rules_ordered_by(tmp_path: Path, criterion: str, prices: bool = True) -> Path:
    """A copy of the bundled rules whose selection ranks by `criterion` where it ranks by purchase price."""
    rules = tmp_path / "rules"
    for path in (ROOT / "rules").glob("*.yaml"):
        if prices or path.name != "prices.yaml":
            (rules / path.name).parent.mkdir(exist_ok=True)
            (rules / path.name).write_text(path.read_text())
    selection = rules / "selection.yaml"
    selection.write_text(selection.read_text().replace(", cheapest,", f", {criterion},"))
    return rules


@pytest.mark.parametrize(("facts", "figure", "words"), [
    ({"task": "inference", "model": "llama-3.1-70b", "concurrency": 48}, "price_per_million_tokens",
     "per million output tokens"),
    ({"task": "full-finetune", "model": "llama-3.1-8b", "training_tokens": "2B"}, "price_per_run", "per run"),
])
def test_cheapest_to_run_ranks_by_the_price_of_the_work(tmp_path, facts, figure, words):
    """With `cheapest-to-run` in the order, no working alternative of the recommendation's kind does the work for
    less than it (per million output tokens serving, per run training), and the trace says which price decided."""
    answer = Expert(rules_dir=_rules_ordered_by(tmp_path, "cheapest-to-run")).recommend(facts)
    mine = answer.figures[figure].value
    same_kind = [alt for alt in answer.alternatives if alt.works and alt.kind == answer.recommendation.kind
                 and figure in alt.figures]
    assert same_kind and all(alt.figures[figure] >= mine for alt in same_kind), (mine, same_kind)
    step = next(step for step in answer.trace if step.rule == "the-cheapest-build-that-works")
    assert words in step.because


def test_a_price_criterion_without_a_price_list_is_e035(tmp_path):
    """`cheapest-to-run` in the order with no rules/prices.yaml is refused, naming the criterion."""
    with pytest.raises(Exception) as refused:
        Expert(rules_dir=_rules_ordered_by(tmp_path, "cheapest-to-run", prices=False))
    assert "E035" in str(refused.value) and "'cheapest-to-run' needs a price list" in str(refused.value)


def test_a_chassis_form_factor_no_card_has_is_refused_at_its_line(tmp_path):
    """A chassis whose form_factor is neither pcie nor sxm (a typo no card could match: no build would get a chassis)
    is refused at load, at its line and column."""
    knowledge = tmp_path / "knowledge"
    shutil.copytree(ROOT / "knowledge", knowledge)
    text = (knowledge / "parts.yaml").read_text()
    line = text[:text.index("form_factor: pcie")].count("\n") + 1
    (knowledge / "parts.yaml").write_text(text.replace("form_factor: pcie", "form_factor: pcei", 1))
    with pytest.raises(KentinoError) as refused:
        load_knowledge(knowledge)
    assert f"parts.yaml:{line}:" in str(refused.value) and "form_factor" in str(refused.value)
