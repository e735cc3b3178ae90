"""The compact view (`view=compact`): at most 2 KB whatever the workload or the rule set writes, clipped with an
ellipsis, the decision id kept, and the same decision as the full answer; over HTTP as a query or body key."""
from __future__ import annotations

import itertools
import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kentino_expert import fastjson
from kentino_expert.domain.vocabulary import KINDS, STATUSES
from kentino_expert.service.compact import (
    ASK_BYTES,
    ELLIPSIS,
    MAX_ALTERNATIVES,
    MAX_COMPACT_BYTES,
    MAX_QUESTIONS,
    MAX_WARNINGS,
    SUMMARY_BYTES,
    CompactDecision,
    clip,
    compact,
)
from kentino_expert.service.decide import decide
from kentino_expert.service.tool_schema import facts_schema_for

SCALES = {"concurrency": [1, 64, 4096], "context_tokens": [2048, 131072], "deadline_days": [3, 90]}


def _size(value) -> int:
    return len(fastjson.dumps_bytes(value))


def _grid(expert) -> list[dict]:
    """Every task with every model of the catalog, on each card, at a few scales: about 400 workloads."""
    properties = facts_schema_for(expert.ruleset, expert.knowledge)["properties"]

    def names(fact):
        return next(option["enum"] for option in properties[fact]["anyOf"] if "enum" in option)

    workloads = []
    for task, model in itertools.product(properties["task"]["enum"], names("model")):
        workloads.append({"task": task, "model": model})
        for gpu, (scale, values) in zip(names("gpu"), itertools.cycle(SCALES.items())):
            workloads.append({"task": task, "model": model, "gpu": gpu, scale: values[len(workloads) % len(values)]})
    return workloads


def test_the_compact_view_of_every_workload_of_a_grid_fits(expert):
    """Over a grid of real decisions (tasks x models x cards x scales) the compact view is at most 2 KB, valid for
    its model, and agrees with the full answer; the largest is reported."""
    sizes = []
    for facts in _grid(expert):
        full = decide(expert, None, facts, "http").response()
        short = compact({**full, "decision_id": uuid.uuid4().hex})
        sizes.append(_size(short))
        CompactDecision.model_validate(short)
        assert short["status"] == full["status"] and short["recommendation"]["kind"] == full["recommendation"]["kind"]
        assert [q["fact"] for q in short["questions"]] == [q["fact"] for q in full["questions"][:MAX_QUESTIONS]]
        assert short["more_questions"] == max(0, len(full["questions"]) - MAX_QUESTIONS)
        assert short["warnings"] == [w["code"] for w in full["warnings"][:MAX_WARNINGS]]
    assert len(sizes) > 300 and max(sizes) <= MAX_COMPACT_BYTES
    print(f"compact view over {len(sizes)} workloads: max {max(sizes)} bytes, mean {sum(sizes) / len(sizes):.0f}")


def _text(max_size=3000):
    """Any text, long ones included, with control characters (escaped as 6 bytes) and 4-byte characters."""
    return st.one_of(st.text(max_size=60), st.text(max_size=max_size),
                     st.builds(lambda c, n: c * n, st.sampled_from(["\x01", "😀", "é", '"', "a"]),
                               st.integers(0, max_size)))


_questions = st.lists(st.fixed_dictionaries({"fact": _text(), "ask": _text()}), max_size=30)
_warnings = st.lists(st.fixed_dictionaries({"code": _text(400)}), max_size=60)
_alternatives = st.lists(st.fixed_dictionaries({
    "gpu": st.one_of(st.none(), _text(500)), "kind": st.sampled_from(KINDS), "nodes": st.integers(0, 2**63 - 1),
    "works": st.booleans(), "precision": _text(50), "sentence": _text()}), max_size=20)
_responses = st.fixed_dictionaries({
    "decision_id": st.one_of(st.none(), st.builds(lambda: uuid.uuid4().hex)),
    "status": st.sampled_from(STATUSES),
    "recommendation": st.fixed_dictionaries({
        "kind": st.sampled_from(KINDS), "nodes": st.one_of(st.none(), st.integers(0, 2**63 - 1)),
        "gpus_per_node": st.one_of(st.none(), st.integers(0, 2**63 - 1)), "gpu": st.one_of(st.none(), _text(500)),
        "precision": st.one_of(st.none(), _text(200)), "summary": _text(20000)}),
    "questions": _questions, "warnings": _warnings, "alternatives": _alternatives})


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_responses)
def test_the_compact_view_fits_whatever_the_rules_write(response):
    """Long summaries, questions, codes and card names, many of each, escapes and wide characters: the view stays
    within 2 KB, keeps the id, status and kind, and every clipped text is a prefix of the original."""
    short = compact(response)
    assert _size(short) <= MAX_COMPACT_BYTES
    CompactDecision.model_validate(short)
    assert (short["decision_id"], short["status"]) == (response["decision_id"], response["status"])
    assert short["recommendation"]["kind"] == response["recommendation"]["kind"]
    assert len(short["questions"]) == min(MAX_QUESTIONS, len(response["questions"]))
    assert len(short["alternatives"]) == min(MAX_ALTERNATIVES, len(response["alternatives"]))
    summary, original = short["recommendation"]["summary"], response["recommendation"]["summary"]
    assert summary == original or (summary.endswith(ELLIPSIS) and original.startswith(summary[:-1]))


def test_clip_keeps_what_fits_and_cuts_the_rest_with_an_ellipsis():
    """A text whose JSON fits is kept; a longer one is its longest prefix that fits with the ellipsis."""
    assert clip("short", 40) == "short" and clip(None, 10) is None
    cut = clip("x" * 100, 20)
    assert cut == "x" * 15 + ELLIPSIS and _size(cut) <= 20  # 2 quotes + 15 + 3 bytes of the ellipsis
    escaped = clip("\x01" * 10, 20)  # each control character is 6 bytes of JSON
    assert escaped == "\x01" * 2 + ELLIPSIS and _size(escaped) <= 20
    assert _size(clip("😀" * 500, SUMMARY_BYTES)) <= SUMMARY_BYTES and _size(clip("a" * 500, ASK_BYTES)) == ASK_BYTES


def test_alternatives_of_the_answer_are_shortened():
    """Alternatives given as dicts or objects keep only card, kind, nodes, precision, works, and the price and power
    of their figures (null without a quote; a figure that is not a number is null too)."""
    class Weighed:
        gpu, kind, nodes, works, precision = "l40", "dp-replicas", 3, False, "fp8"

    response = {"decision_id": None, "status": "final", "questions": [], "warnings": [],
                "recommendation": {"kind": "single-node", "nodes": 1, "gpus_per_node": 8, "gpu": "rtx-5090",
                                   "precision": "fp8", "summary": "s"},
                "alternatives": [{"gpu": "l4", "kind": "single-node", "nodes": 1, "precision": "int4", "works": True,
                                  "sentence": "x", "figures": {"price_total": 68929.0, "power_kw": "a lot"}},
                                 Weighed()]}
    assert compact(response)["alternatives"] == [
        {"gpu": "l4", "kind": "single-node", "nodes": 1, "precision": "int4", "works": True, "price_total": 68929.0,
         "power_kw": None},
        {"gpu": "l40", "kind": "dp-replicas", "nodes": 3, "precision": "fp8", "works": False, "price_total": None,
         "power_kw": None}]


def test_a_card_switch_shows_its_alternatives(expert):
    """70B full fine-tuning on the RTX 5090: the compact view lists the builds the search weighed, the named 5090
    among them as not working, exactly as the full answer has them."""
    decision = decide(expert, None, {"task": "full-finetune", "model": "llama-3.1-70b", "gpu": "rtx-5090"}, "cli")
    response = decision.response()
    short = compact(response)
    assert short["recommendation"]["gpu"] == "rtx-pro-6000"
    named = next(item for item in short["alternatives"] if item["gpu"] == "rtx-5090")
    limit = expert.ruleset.parameter_values["max_ib_cluster_nodes"]
    assert (named["kind"], named["works"]) == ("frontier", False) and named["nodes"] > limit, "beyond an IB cluster"
    assert short["alternatives"] == [{**{key: item[key] for key in ("gpu", "kind", "nodes", "precision", "works")},
                                      "price_total": item["figures"].get("price_total"),
                                      "power_kw": item["figures"].get("power_kw")}
                                     for item in response["alternatives"][:MAX_ALTERNATIVES]]
    assert short["recommendation"]["price_total"] == response["figures"]["price_total"]["value"]
    assert short["currency"] == "EUR"
    CompactDecision.model_validate(short)


# -- over HTTP ----------------------------------------------------------------------------------------

@pytest.fixture()
def client(tmp_path):
    pytest.importorskip("fastapi", reason="the HTTP service needs fastapi")
    from fastapi.testclient import TestClient

    from kentino_expert.decisions.connect import open_log
    from kentino_expert.service.app import create_app
    with open_log(tmp_path / "decisions.db") as log, \
            TestClient(create_app(log=log), base_url="http://localhost") as test_client:
        yield test_client


FACTS = {"task": "inference", "model": "llama-3.1-70b"}


def test_view_compact_over_http_in_the_query_or_the_body(client):
    """?view=compact and a body key `view` both give the compact view of a logged decision (about a twentieth of
    the full answer); the full answer stays the default and is in the log under the same id."""
    full = client.post("/v1/recommend", json=FACTS)
    by_query = client.post("/v1/recommend?view=compact", json=FACTS)
    by_body = client.post("/v1/recommend", json={**FACTS, "view": "compact"})
    for short in (by_query, by_body):
        assert short.status_code == 200 and len(short.content) <= MAX_COMPACT_BYTES
        assert short.json()["view"] == "compact" and "trace" not in short.json()
    assert "trace" in full.json() and len(full.content) > 5 * len(by_query.content)
    logged = client.get(f"/v1/decisions/{by_body.json()['decision_id']}").json()
    assert logged["facts"] == FACTS and logged["answer"]["trace"]
    assert client.post("/v1/recommend", json={**FACTS, "view": "full"}).json()["trace"]


@pytest.mark.parametrize("url, body", [("/v1/recommend?view=short", FACTS), ("/v1/recommend", {**FACTS, "view": 3}),
                                       ("/v1/recommend?view=compact&view=full", FACTS)])
def test_a_wrong_view_is_refused_naming_it(client, url, body):
    """An unknown view, one that is not text, or two views in the query are a 422 on `view`, and nothing is logged."""
    response = client.post(url, content=json.dumps(body), headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json()["detail"][0]["field"] == "view"
    assert client.get("/v1/decisions").json()["decisions"] == []
