"""The HTTP service through FastAPI's TestClient: every endpoint, errors as 422 naming the field, reload."""
from __future__ import annotations

import json
import logging
import shutil
import time

import pytest

pytest.importorskip("fastapi", reason="the HTTP service needs fastapi (pip install fastapi uvicorn httpx)")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")

from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kentino_expert.answer.questions import missing_facts, probe_values  # noqa: E402
from kentino_expert.decisions.connect import open_log  # noqa: E402
from kentino_expert.domain.vocabulary import KINDS  # noqa: E402
from kentino_expert.domain.workload import validate_facts  # noqa: E402
from kentino_expert.expert import Expert  # noqa: E402
from kentino_expert.paths import bundled  # noqa: E402
from kentino_expert.service.app import create_app  # noqa: E402

CHAT = {"task": "inference", "model": "llama-3.1-70b"}


def local_client(app, **options) -> TestClient:
    """A TestClient that calls the app as http://localhost (the Host the service allows by default)."""
    return TestClient(app, base_url="http://localhost", **options)


@pytest.fixture()
def log(tmp_path):
    """A fresh SQLite decision log in the test's directory."""
    with open_log(tmp_path / "decisions.db") as opened:
        yield opened


@pytest.fixture()
def client(log):
    """A TestClient over the bundled rules that re-raises any server error (so a 500 fails loudly)."""
    app = create_app(log=log)
    with local_client(app) as test_client:
        yield test_client


def complete_facts(expert, facts: dict) -> dict:
    """Facts with every missing relevant fact filled in with its first probe value."""
    facts = dict(facts)
    for _ in range(40):
        missing = missing_facts(validate_facts(facts), expert.ruleset)
        if not missing:
            return facts
        facts[missing[0]] = probe_values(expert, missing[0])[0]
    raise AssertionError("facts never became complete")


def test_recommend_provisional_has_ranked_questions(client):
    """A chat with facts missing gets a provisional answer whose questions are ranked by alternatives, then fact
    order."""
    response = client.post("/v1/recommend", json=CHAT)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "provisional" and body["questions"]
    for key in ("decision_id", "recommendation", "figures", "warnings", "assumptions", "trace", "ruleset", "facts",
                "why_not"):
        assert key in body
    order = list(client.app.state.holder.expert.ruleset.fact_policies)
    ranks = [(-len(q["alternatives"]), order.index(q["fact"])) for q in body["questions"]]
    assert ranks == sorted(ranks)
    for question in body["questions"]:
        assert question["ask"] and question["current_kind"] == body["recommendation"]["kind"]
        assert set(question["could_lead_to"]) <= set(KINDS)
        assert question["alternatives"] == [k for k in question["could_lead_to"] if k != question["current_kind"]]
    assert any(q["alternatives"] for q in body["questions"]), "some what-if answer should change the kind"


def test_recommend_final_when_nothing_is_missing(client):
    """Facts with every relevant fact given answer final with no questions."""
    expert = client.app.state.holder.expert
    facts = complete_facts(expert, {"task": "full-finetune", "model": "llama-3.1-70b"})
    body = client.post("/v1/recommend", json=facts).json()
    assert body["status"] == "final" and body["questions"] == []


@pytest.mark.parametrize("throughput", [{"qps": 20}, {"tokens_per_s": 3000}])
def test_one_throughput_fact_is_enough(throughput):
    """Inference with either qps or tokens_per_s (the other derived or not needed) is final, and the other is not
    asked."""
    expert = Expert()
    facts = {"task": "inference", "model": "llama-3.1-70b", "concurrency": 32, "context_tokens": 8192,
             "prompt_tokens": 1024, "output_tokens": 300, "kv_cache_precision": "fp8", "latency": "production",
             "tenancy": "single", **throughput}
    assert missing_facts(validate_facts(facts), expert.ruleset) == []
    assert expert.recommend(facts).status == "final"
    assert {"qps", "tokens_per_s"} <= set(missing_facts(validate_facts({"task": "inference", "model": "llama-3.1-70b"}),
                                                         expert.ruleset))


def test_why_not_prefers_a_rule_about_the_same_job(client):
    """For 70B inference, multi-node-ib is explained by an inference rule, not by a fine-tuning one that needs
    another task."""
    body = client.post("/v1/recommend", json={"task": "inference", "model": "llama-3.1-70b"}).json()
    item = next(i for i in body["why_not"] if i["kind"] == "multi-node-ib")
    assert not any("task" in failing["values"] for failing in item["failing"]), item["text"]


def test_why_not_names_rule_condition_and_values(client):
    """Each kind not chosen is explained by a real rule, its failing conditions and the actual values."""
    body = client.post("/v1/recommend", json=CHAT).json()
    rules = {r["id"] for r in client.get("/v1/rules").json()["rules"]}
    chosen = body["recommendation"]["kind"]
    assert [item["kind"] for item in body["why_not"]] == [k for k in KINDS if k != chosen]
    for item in body["why_not"]:
        assert item["text"].startswith(f"{item['kind']} was not chosen: ")
        if item["rule"] is None:
            continue
        assert item["rule"] in rules and f"rule '{item['rule']}'" in item["text"]
        assert item["failing"] or item["preempted_by"]
        for failing in item["failing"]:
            assert failing["condition"] in item["text"]
            for name, value in failing["values"].items():
                if value is None:  # a fact not given, a plan field not set, or a figure the facts do not allow
                    assert any(f"{name} is {word}" in item["text"]
                               for word in ("not given", "not set by the plan", "unknown"))
                elif isinstance(value, str):
                    assert f"{name} is '{value}'" in item["text"]
                elif value is False:  # a conclusion no rule drew, or a figure that is false
                    assert f"{name} is false" in item["text"]
            for name in failing["thresholds"]:
                assert f"{name} = " in item["text"]


def test_why_not_example_sentence(client):
    """The documented why-not sentence for 70B chat renders word for word."""
    body = client.post("/v1/recommend", json=CHAT).json()
    nearest = next(i for i in body["why_not"] if i["kind"] == "multi-node-ib")
    assert nearest["text"] == ("multi-node-ib was not chosen: rule 'beyond-cliff-at-production-latency' needs "
                               "beyond_cliff (beyond_cliff is false, as no rule concluded it: rule "
                               "'at-or-beyond-the-405b-cliff' needs params_b >= cliff_params_b (params_b is 70.6; "
                               "cliff_params_b = 405))")


def test_decision_logged_with_session_and_digest(client, log):
    """The decision is in the log before the response, with session, turn, source, kind and digest."""
    body = client.post("/v1/recommend?turn=3", json={**CHAT, "session_id": "chat-42"}).json()
    stored = log.get(body["decision_id"])
    assert stored is not None
    assert stored["session_id"] == "chat-42" and stored["turn"] == 3 and stored["source"] == "http"
    assert stored["facts"] == CHAT
    assert stored["kind"] == body["recommendation"]["kind"]
    assert stored["digest"] == body["ruleset"]["digest"] == client.app.state.holder.expert.ruleset.digest
    assert stored["answer"]["trace"] == body["trace"]
    fetched = client.get(f"/v1/decisions/{body['decision_id']}")
    assert fetched.status_code == 200 and fetched.json()["decision_id"] == body["decision_id"]
    listed = client.get("/v1/decisions", params={"kind": stored["kind"]}).json()["decisions"]
    assert body["decision_id"] in [d["decision_id"] for d in listed]


def test_a_whole_float_turn_is_stored_as_its_integer(client, log):
    """A turn of 2.0 (what Python's json writes for a float count) is turn 2, as a fact's 8.0 is 8; 2.5 is a 422."""
    body = client.post("/v1/recommend", json={**CHAT, "session_id": "floats", "turn": 2.0}).json()
    stored = log.get(body["decision_id"])
    assert stored["turn"] == 2 and type(stored["turn"]) is int
    refused = client.post("/v1/recommend", json={**CHAT, "turn": 2.5})
    assert refused.status_code == 422 and refused.json()["detail"][0]["field"] == "turn"


def test_the_served_schema_states_answer_sizes_measured_on_real_answers(client, expert):
    """The schema of `view` (the body of POST /v1/recommend, the MCP tool's input) states the sizes of a full answer
    and of its compact view as measured on this rule set's examples, not as written: each of those examples,
    asked over HTTP, is answered within the stated range (it said 'about 13 KB' of answers of 20-22 KB)."""
    import re

    from kentino_expert.service.answer_size import SERVED_SAMPLE, _examples
    document = client.get("/openapi.json").json()
    body = document["paths"]["/v1/recommend"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    text = body["properties"]["view"]["description"]
    full = re.search(r"whole answer \((\d+\.\d)-(\d+\.\d) KB in the answers to (\d+) of this rule set's", text)
    short = re.search(r"\((\d+\.\d)-(\d+\.\d) KB in those answers\)", text)
    assert full and short, text
    examples = _examples(expert, SERVED_SAMPLE)
    assert int(full.group(3)) == len(examples) == SERVED_SAMPLE
    for facts, view, (low, high) in [(f, "full", full.groups()[:2]) for f in examples] + \
            [(f, "compact", short.groups()) for f in examples]:
        size = len(client.post("/v1/recommend", json={**facts, "view": view}).content)
        assert float(low) * 1000 - 50 <= size <= float(high) * 1000 + 50, (view, size, text)


def test_decision_404_and_explain(client):
    """An unknown decision id is a 404 naming the field; a known one explains as markdown and html, the page with
    the decision browser's policy (no script, nothing remote, no framing) and neither sniffed as another type."""
    missing = client.get("/v1/decisions/does-not-exist")
    assert missing.status_code == 404 and missing.json()["detail"][0]["field"] == "decision_id"
    decision_id = client.post("/v1/recommend", json=CHAT).json()["decision_id"]
    markdown = client.get(f"/v1/decisions/{decision_id}/explain")
    assert markdown.status_code == 200 and "# Recommendation:" in markdown.text
    page = client.get(f"/v1/decisions/{decision_id}/explain", params={"format": "html"})
    assert page.status_code == 200 and page.text.startswith("<!DOCTYPE html>")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy and "script" not in policy
    assert page.headers["x-content-type-options"] == markdown.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-store" and page.headers["referrer-policy"] == "no-referrer"


@pytest.mark.parametrize("body, field", [
    ({"task": "cooking"}, "task"),
    ({"model": "llama-3.1-70b"}, "task"),
    ({"task": "inference", "modle": "llama-3.1-70b"}, "modle"),
    ({"task": "inference", "model": "gpt-17"}, "model"),
    ({"task": "inference", "concurrency": 0}, "concurrency"),
    ({"task": "inference", "concurrency": 10**30}, "concurrency"),
    ({"task": "inference", "params_b": "NaN"}, "params_b"),
    ({"task": "inference", "training_tokens": "lots"}, "training_tokens"),
    ({"task": "inference", "proposed_build": {"nodes": 0, "gpus_per_node": 8}}, "proposed_build.nodes"),
    ({"task": "inference", "turn": "third"}, "turn"),
    ({"task": "inference", "session_id": ["a"]}, "session_id"),
    ({"task": "inference", "gpu": "x" * 500}, "gpu"),
])
def test_bad_facts_are_422_naming_the_field(client, body, field):
    """Facts that do not validate are a 422 whose detail names the offending field."""
    response = client.post("/v1/recommend", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail[0]["field"] == field and detail[0]["message"]


def test_unknown_fact_suggests_the_name(client):
    """A misspelt fact's message suggests the closest known one."""
    detail = client.post("/v1/recommend", json={"task": "inference", "modle": "x"}).json()["detail"][0]
    assert "model" in detail["message"]


HOSTILE = [b"", b"   ", b"null", b"[]", b"[1,2,3]", b'"inference"', b"42", b"true", b"{", b"\xff\xfe\x00",
           b'{"task": NaN}', b'{"task": "inference", "params_b": Infinity}',
           b'{"task": "inference", "params_b": 1e999}',
           b'{"task": "inference", "params_b": -1e999}', b'{"task": "inference", "concurrency": ' + b"9" * 5000 + b"}",
           b"[" * 100_000, b'{"a":' * 50_000, b'{"task": "inference", "task": "lora"}',
           b'{"task": {"$ne": 1}}', b'{"task": "inference", "params_b": true}',
           b'{"task": "inference", "qps": "1e400"}',
           b'{"task": "inference", "training_tokens": "99999999999999999T"}', b'{"task": "\\u0000"}',
           b'{"task": "inference", "model": "' + b"a" * 100_000 + b'"}', b'{"task": "inference", "turn": 1e308}',
           b'{"task": "inference", "proposed_build": []}', b'{"task": "inference", "proposed_build": {"nodes": "x"}}',
           b'{"task": "pretraining", "params_b": 99999, "training_tokens": "9999T", "deadline_days": 0.0001}',
           b'{"task": "batch-inference", "params_b": 0.0000001, "corpus_tokens": 1e16, "deadline_days": 36500}',
           b"x" * 1_100_000]


@pytest.mark.parametrize("raw", HOSTILE, ids=[f"hostile{i}" for i in range(len(HOSTILE))])
def test_hostile_bodies_never_500(log, raw):
    """Malformed, huge, deep or absurd bodies are answered 2xx/4xx, never with a server error."""
    with local_client(create_app(log=log), raise_server_exceptions=False) as client:
        response = client.post("/v1/recommend", content=raw, headers={"content-type": "application/json"})
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert response.json()["detail"][0]["message"]


_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(max_size=20))
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)
_FACT_NAMES = st.sampled_from(["task", "model", "params_b", "precision", "gpu", "gpus_per_node", "concurrency",
                               "context_tokens", "qps", "tokens_per_s", "latency", "tenancy", "training_tokens",
                               "corpus_tokens", "deadline_days", "proposed_build", "interconnect", "session_id",
                               "turn"])


@pytest.fixture(scope="module")
def fuzz_client(tmp_path_factory):
    """One client for all fuzz examples, not re-raising server errors (the test checks the status)."""
    log = open_log(tmp_path_factory.mktemp("fuzz") / "fuzz.db")
    with local_client(create_app(log=log), raise_server_exceptions=False) as client:
        yield client
    log.close()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(_FACT_NAMES, _JSON | st.sampled_from(["inference", "lora", "pretraining", "int4",
                                                                   "multi", "15T", "llama-3.1-8b", "l4"]),
                            max_size=6))
def test_random_fact_mappings_never_500(fuzz_client, body):
    """Random mappings over the fact names are answered 200 or 422, never 500."""
    response = fuzz_client.post("/v1/recommend", json=body)
    assert response.status_code in (200, 422), response.text


def test_schema_facts_and_tool_form(client):
    """The facts schema carries descriptions and x-ask; format=tool is an LLM tool definition without $refs."""
    schema = client.get("/v1/schema/facts").json()
    assert schema["required"] == ["task"]
    for name in ("task", "model", "concurrency"):
        assert schema["properties"][name]["description"] and schema["properties"][name]["x-ask"]
    tool = client.get("/v1/schema/facts", params={"format": "tool"}).json()
    assert tool["name"] == "kentino_recommend" and tool["description"]
    assert tool["parameters"]["type"] == "object" and "task" in tool["parameters"]["properties"]
    assert "$ref" not in json.dumps(tool) and "$defs" not in tool["parameters"]
    assert client.get("/v1/schema/facts", params={"format": "xml"}).status_code == 422


def test_rules_listing(client):
    """GET /v1/rules lists every rule with id, heuristics, description, file and line."""
    body = client.get("/v1/rules").json()
    expert = client.app.state.holder.expert
    assert body["digest"] == expert.ruleset.digest
    assert [r["id"] for r in body["rules"]] == [r.id for r in expert.ruleset.rules]
    first = body["rules"][0]
    assert set(first) >= {"id", "heuristics", "description", "file", "line"}
    assert first["file"].startswith("rules/") and first["line"] > 0


def test_health_ready_and_openapi(client):
    """Liveness, readiness (rules loaded, log writable) and the OpenAPI document answer; the document offers the
    tools, not the operators' routes."""
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] and ready.json()["log_writable"]
    spec = client.get("/openapi.json").json()
    for path in ("/v1/recommend", "/v1/schema/facts", "/v1/rules", "/v1/decisions/{decision_id}"):
        assert path in spec["paths"]
    for path in ("/healthz", "/readyz", "/v1/admin/reload"):
        assert path not in spec["paths"]
    request = spec["paths"]["/v1/recommend"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "task" in request["properties"] and "session_id" in request["properties"]


def test_readyz_fails_when_log_is_closed(tmp_path):
    """Readiness is 503 once the decision log cannot be written, and recommend refuses with 503."""
    log = open_log(tmp_path / "closing.db")
    with local_client(create_app(log=log)) as client:
        log.close()
        assert client.get("/readyz").status_code == 503
        response = client.post("/v1/recommend", json=CHAT)
        assert response.status_code == 503 and "not given" in response.json()["detail"][0]["message"]


def test_a_log_failure_names_no_database_to_the_client_and_is_logged_once(tmp_path, caplog):
    """A 503 for a log that cannot be written or read says which in a sentence, without the log's target (on
    PostgreSQL its user, host and database); the server's log has the reason, once while it stays the same."""
    path = tmp_path / "hidden-name.db"
    log = open_log(path)
    with local_client(create_app(log=log)) as client, caplog.at_level(logging.WARNING, logger="uvicorn.error"):
        log.close()
        written = [client.post("/v1/recommend", json=CHAT) for _ in range(3)]
        read = client.get("/v1/decisions")
    messages = [r.json()["detail"][0]["message"] for r in [*written, read]]
    assert all(r.status_code == 503 for r in [*written, read]) and not any("hidden-name" in m for m in messages)
    assert messages[0].startswith("the decision could not be recorded, so it is not given")
    assert messages[-1].startswith("the decision log cannot be read now")
    logged = [r.getMessage() for r in caplog.records if "hidden-name" in r.getMessage()]
    assert len(logged) == 1, logged


def test_reload_refuses_broken_rules_and_keeps_serving(tmp_path, log):
    """A broken rules copy is refused with 409 and diagnostics; the old rules answer on; a good edit swaps in."""
    rules = tmp_path / "rules"
    shutil.copytree(bundled("rules"), rules)
    app = create_app(expert_factory=lambda: Expert(rules), log=log, admin_token="s3cret")
    with local_client(app, headers={"authorization": "Bearer s3cret"}) as client:
        before = client.post("/v1/recommend", json=CHAT).json()
        old_digest = before["ruleset"]["digest"]
        flow = rules / "flow.yaml"
        good_text = flow.read_text()
        flow.write_text(good_text.replace("priority: 320", "priority: [broken", 1) + "\n  - id: Not Kebab\n")
        refused = client.post("/v1/admin/reload")
        assert refused.status_code == 409
        assert refused.json()["diagnostics"] and refused.json()["diagnostics"][0]["file"]
        assert refused.json()["serving_digest"] == old_digest
        still = client.post("/v1/recommend", json=CHAT)
        assert still.status_code == 200 and still.json()["ruleset"]["digest"] == old_digest
        assert client.get("/readyz").json()["last_reload_error"]
        flow.write_text(good_text + "\n")
        accepted = client.post("/v1/admin/reload")
        assert accepted.status_code == 200 and accepted.json()["previous_digest"] == old_digest
        new_digest = accepted.json()["digest"]
        assert new_digest != old_digest
        after = client.post("/v1/recommend", json=CHAT).json()
        assert after["ruleset"]["digest"] == new_digest
        assert log.get(after["decision_id"])["digest"] == new_digest
        assert log.get(before["decision_id"])["digest"] == old_digest


def test_admin_reload_token(log):
    """With an admin token set, reload without the bearer token is refused with 401."""
    with local_client(create_app(log=log, admin_token="s3cret")) as client:
        assert client.post("/v1/admin/reload").status_code == 401
        ok = client.post("/v1/admin/reload", headers={"authorization": "Bearer s3cret"})
        assert ok.status_code == 200


def test_unknown_route_and_method(client):
    """Unknown paths and methods are 404/405 with the same detail shape."""
    assert client.get("/v2/nothing").status_code == 404
    wrong = client.get("/v1/recommend")
    assert wrong.status_code == 405 and wrong.json()["detail"][0]["message"]
    assert client.get("/v1/decisions", params={"since": "yesterday"}).status_code == 422
    assert client.get("/v1/decisions", params={"limit": "many"}).json()["detail"][0]["field"] == "limit"


def test_holder_snapshot_never_mixes_generations():
    """A reader beside a reloading thread always sees a generation together with its own expert."""
    import threading
    from types import SimpleNamespace

    from kentino_expert.service.holder import ExpertHolder

    built = iter(range(10**6))

    def factory():
        number = next(built)
        return SimpleNamespace(number=number, ruleset=SimpleNamespace(digest=str(number), rules=()))

    holder = ExpertHolder(factory)
    stop, mismatches = threading.Event(), []

    def reload_forever():
        while not stop.is_set():
            holder.reload()

    reloader = threading.Thread(target=reload_forever)
    reloader.start()
    try:  # each build runs in a thread of its own: read until a hundred generations went by (bounded in time)
        deadline = time.monotonic() + 60
        while holder.serving.generation <= 100 and time.monotonic() < deadline:
            serving = holder.snapshot()
            # the factory numbers experts 0, 1, 2 ... and generation n serves expert n - 1
            if serving.generation != serving.expert.number + 1:
                mismatches.append((serving.generation, serving.expert.number))
    finally:
        stop.set()
        reloader.join()
    assert holder.serving.generation > 100 and not mismatches


# -- conversation keys, since, HEAD, auth, encodings, the port -------------------------------------

@pytest.mark.parametrize("raw, query, field", [
    (b'{"task": "inference", "session_id": "\\ud800"}', "", "session_id"),
    (b'{"task": "inference", "session_id": "forged\\n2025-01-01  id  http"}', "", "session_id"),
    (b'{"task": "inference", "session_id": "\\u0000"}', "", "session_id"),
    (b'{"task": "inference", "session_id": ""}', "", "session_id"),
    (b'{"task": "inference", "turn": 1180591620717411303424}', "", "turn"),
    (b'{"task": "inference", "turn": -5}', "", "turn"),
    (b'{"task": "inference", "turn": "\\u00b2"}', "", "turn"),
    (b'{"task": "inference", "turn": "--5"}', "", "turn"),
    (b'{"task": "inference"}', "?turn=%C2%B2", "turn"),
    (b'{"task": "inference"}', "?turn=--5", "turn"),
    (b'{"task": "inference"}', "?turn=9223372036854775808", "turn"),
    (b'{"task": "inference"}', "?session_id=a%0Ab", "session_id"),
    (b'{"task": "inference"}', "?session_id=a&session_id=b", "session_id"),
    (b'{"task": "inference"}', "?turn=1&turn=2", "turn"),
])
def test_bad_conversation_keys_are_422_and_the_log_stays_writable(log, raw, query, field):
    """A session id or turn the log cannot store, or a repeated query key, is a 422 naming the field;
    later writes and /readyz are unaffected."""
    with local_client(create_app(log=log), raise_server_exceptions=False) as client:
        response = client.post(f"/v1/recommend{query}", content=raw, headers={"content-type": "application/json"})
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["field"] == field
        assert client.post("/v1/recommend?session_id=ok&turn=9223372036854775807", json=CHAT).status_code == 200
        assert client.get("/readyz").status_code == 200
    assert [row["turn"] for row in log.list()] == [2**63 - 1]


@pytest.mark.parametrize("since, listed", [("9999-12-31T23:00:00-05:00", 0), ("0001-01-01T00:00:00+05:00", 1)])
def test_since_out_of_utc_range_is_the_first_or_last_moment(log, since, listed):
    """A since that overflows when moved to UTC (a date-time the OpenAPI document allows) lists from the first
    moment there is, or after the last: a 200, not a 422 and not a 500."""
    with local_client(create_app(log=log), raise_server_exceptions=False) as client:
        client.post("/v1/recommend", json=CHAT)
        response = client.get("/v1/decisions", params={"since": since})
    assert response.status_code == 200 and len(response.json()["decisions"]) == listed


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/v1/schema/facts", "/v1/rules", "/v1/decisions",
                                  "/openapi.json"])
def test_head_on_get_routes(client, path):
    """HEAD answers as GET does, with no body (load balancers probe with HEAD)."""
    got = client.get(path)
    head = client.head(path)
    assert head.status_code == got.status_code == 200
    assert head.content == b"" and head.headers["content-type"] == got.headers["content-type"]


def test_head_on_a_post_route_is_405_and_allow_lists_head(client):
    """HEAD on POST-only /v1/recommend stays a 405; a 405 on a GET route allows HEAD too."""
    assert client.head("/v1/recommend").status_code == 405
    wrong = client.post("/healthz")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize("header, status", [("bearer s3cret", 200), ("BEARER  s3cret ", 200), ("Bearer s3cret", 200),
                                            ("Bearer s3cre", 401), ("Bearer s3cret2", 401), ("Basic s3cret", 401),
                                            ("s3cret", 401), ("Bearer", 401), ("Bearer é", 401)])
def test_admin_token_scheme_is_case_insensitive(log, header, status):
    """The Bearer scheme is matched in any case (RFC 7235); the token itself exactly."""
    with local_client(create_app(log=log, admin_token="s3cret")) as client:
        response = client.post("/v1/admin/reload", headers={"authorization": header.encode("utf-8")})
    assert response.status_code == status


@pytest.mark.parametrize("encoding", ["gzip", "br", "deflate, gzip"])
def test_content_encoding_is_415(client, encoding):
    """A compressed body is refused with 415 naming the encoding, not misread as non-UTF-8 JSON."""
    import gzip
    response = client.post("/v1/recommend", content=gzip.compress(json.dumps(CHAT).encode()),
                           headers={"content-type": "application/json", "content-encoding": encoding})
    assert response.status_code == 415
    detail = response.json()["detail"][0]
    assert detail["field"] == "content-encoding" and "not supported" in detail["message"]
    assert client.post("/v1/recommend", json=CHAT, headers={"content-encoding": "identity"}).status_code == 200
    assert "415" in client.get("/openapi.json").json()["paths"]["/v1/recommend"]["post"]["responses"]


def test_a_probe_the_arithmetic_cannot_evaluate_is_skipped(log):
    """A what-if probe that raises OverflowError (extreme facts) drops that probe; the answer is still given."""
    from unittest import mock

    from kentino_expert.answer.whatif import Turn
    expert = Expert()
    real_builds_of = Turn.builds_of

    def builds_of(turn, mappings):  # the probes ask the request's Turn, which hands each probe's error back
        found = real_builds_of(turn, mappings)
        # as math.ceil(inf) did for a probe next to a huge corpus
        return [OverflowError("cannot convert float infinity to integer") if "deadline_days" in facts else build
                for facts, build in zip(mappings, found, strict=True)]

    with mock.patch.object(Turn, "builds_of", builds_of), \
            local_client(create_app(expert_factory=lambda: expert, log=log), raise_server_exceptions=False) as client:
        response = client.post("/v1/recommend", json={"task": "batch-inference", "corpus_tokens": 1e16})
    assert response.status_code == 200, response.text
    question = next(q for q in response.json()["questions"] if q["fact"] == "deadline_days")
    assert question["probes"] == []


def test_serve_on_a_port_in_use_is_one_error_line(tmp_path):
    """`serve --port <busy>` with one worker fails as with several: one `error: cannot listen` line, exit 2."""
    import socket

    from click.testing import CliRunner

    from kentino_expert.cli.service import standalone
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        port = busy.getsockname()[1]
        result = CliRunner().invoke(standalone, ["serve", "--port", str(port), "--db", str(tmp_path / "d.db")])
    finally:
        busy.close()
    assert result.exit_code == 2, result.output
    assert result.output == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
