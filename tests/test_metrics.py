"""GET /metrics, scraped and parsed with prometheus-client's own parser: decisions by kind, status and source, their
latency, reloads and refusals, the rule set served, the answer cache and the group commit; the read token guards it;
with `serve --workers 2` every worker's counts add up in any scrape, and the metrics directory goes with the server."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx", reason="the metrics are scraped over HTTP")
pytest.importorskip("fastapi", reason="the service needs fastapi")
from fastapi.testclient import TestClient  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from kentino_expert.service.app import create_app  # noqa: E402
from ports import free_port  # noqa: E402
from replica_harness import ROOT, wait_until  # noqa: E402

FACTS = {"task": "inference", "model": "llama-3.1-70b"}
ADMIN, READER = "metrics-admin-token", "metrics-read-token"


def scrape(client, **headers) -> dict[tuple, float]:
    """{(sample name, sorted labels): value} of one scrape."""
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _client(tmp_path, rules_dir=None, **tokens) -> TestClient:
    app = create_app(rules_dir=str(rules_dir or ROOT / "rules"), knowledge_dir=str(ROOT / "knowledge"),
                     db=str(tmp_path / "log.db"), instance="metrics-test:1", allowed_hosts=["localhost"],
                     **{"read_token": "", "admin_token": "", **tokens})
    return TestClient(app, base_url="http://localhost")


def test_a_decision_is_counted_timed_and_batched(tmp_path):
    """One decision adds one to kentino_decisions_total with its kind, status and source, one observation to the
    latency histograms (the request, the log's commit), one batch of one row to the group commit and one cache
    miss; the same facts again are a cache hit. The rule set served shows as 1 under its digest and the instance
    label."""
    with _client(tmp_path) as client:
        before = scrape(client)
        answer = client.post("/v1/recommend", json=FACTS).json()
        after = scrape(client)
        client.post("/v1/recommend", json=FACTS)
        again = scrape(client)
    labels = {"kind": answer["recommendation"]["kind"], "status": answer["status"], "source": "http"}
    assert value(after, "kentino_decisions_total", **labels) == value(before, "kentino_decisions_total", **labels) + 1
    count = "kentino_decision_seconds_count"
    assert value(after, count, code="200") == value(before, count, code="200") + 1
    for name in ("kentino_group_commit_batches_total", "kentino_group_commit_rows_total",
                 "kentino_answer_cache_misses_total", "kentino_log_record_seconds_count"):
        assert value(after, name) == value(before, name) + 1, name
    hits = "kentino_answer_cache_hits_total"
    assert value(again, hits) == value(after, hits) + 1
    digest = answer["ruleset"]["digest"]
    assert value(after, "kentino_rule_set_info", digest=digest, instance="metrics-test:1", source="local") == 1


def test_a_refused_request_is_timed_under_its_status(tmp_path):
    """A request with bad facts is a 422 in the latency histogram and no decision."""
    with _client(tmp_path) as client:
        before = scrape(client)
        assert client.post("/v1/recommend", json={"task": "nonsense"}).status_code == 422
        after = scrape(client)
    count = "kentino_decision_seconds_count"
    assert value(after, count, code="422") == value(before, count, code="422") + 1
    assert sum(v for (name, _), v in after.items() if name == "kentino_decisions_total") == \
        sum(v for (name, _), v in before.items() if name == "kentino_decisions_total")


def test_reloads_and_refusals_are_counted_and_the_rule_set_moves(tmp_path):
    """A reload to an edited rule set counts as ok and moves kentino_rule_set_info to the new digest (the old one
    is no longer shown); a broken rule set counts as refused and changes nothing served."""
    rules = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", rules)
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with _client(tmp_path, rules_dir=rules, admin_token=ADMIN) as client:
        old = client.get("/readyz").json()["digest"]
        before = scrape(client, **admin)
        parameters = rules / "parameters.yaml"
        parameters.write_text(parameters.read_text().replace("    value: 405\n", "    value: 60\n"))
        new = client.post("/v1/admin/reload", headers=admin).json()["digest"]
        after = scrape(client, **admin)
        (rules / "flow.yaml").write_text("rules: [broken")
        assert client.post("/v1/admin/reload", headers=admin).status_code == 409
        refused = scrape(client, **admin)
    reloads = "kentino_reloads_total"
    assert value(after, reloads, result="ok", trigger="http") == value(before, reloads, result="ok", trigger="http") + 1
    assert value(refused, reloads, result="refused", trigger="http") == \
        value(after, reloads, result="refused", trigger="http") + 1
    info = {"instance": "metrics-test:1", "source": "local"}
    assert new != old and value(after, "kentino_rule_set_info", digest=new, **info) == 1
    assert ("kentino_rule_set_info", tuple(sorted({"digest": old, **info}.items()))) not in after
    assert value(refused, "kentino_rule_set_info", digest=new, **info) == 1


def test_metrics_need_the_read_token_when_one_is_configured(tmp_path):
    """With a read token configured, /metrics is a 401 without it (or with a wrong one) and answers with the read
    or the admin token; with no token configured it is open, like the log."""
    with _client(tmp_path, read_token=READER, admin_token=ADMIN) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        for token in (READER, ADMIN):
            assert client.get("/metrics", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    with _client(tmp_path) as client:
        assert client.get("/metrics").status_code == 200


def _serve(tmp_path: Path, *args: str, **env) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "kentino_expert", "serve", "--port", str(port), "--log-level",
                                "warning", *args], cwd=str(tmp_path), env={**os.environ, **env},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"

    def ready():
        if process.poll() is not None:
            raise AssertionError(f"serve exited: {process.stderr.read().decode(errors='replace')[-2000:]}")
        try:
            return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False
    wait_until(ready, 60, "serve ready")
    return process, base


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def test_workers_counts_add_up_in_every_scrape(tmp_path):
    """Under `serve --workers 2` decisions sent on separate connections (spread over both workers by the kernel)
    are counted once each in every scrape, whichever worker answers it; the workers' metrics directory is
    removed when the server stops."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    process, base = _serve(tmp_path, "--workers", "2", "--db", str(tmp_path / "log.db"), TMPDIR=str(scratch))
    try:
        pids, sent = set(), 0
        # The kernel hands a new connection to whichever worker accepts first, so an idle pair may give one worker
        # a long run; keep sending (at least 20, at most 300) until both have answered.
        while sent < 300 and (sent < 20 or len(pids) < 2):
            with httpx.Client(base_url=base, timeout=30) as client:  # a new connection each time
                assert client.post("/v1/recommend", json=FACTS).status_code == 200
                sent += 1
                pids.add(client.get("/readyz").json()["worker_pid"])
        totals = set()
        for _ in range(8):
            with httpx.Client(base_url=base, timeout=30) as client:
                samples = scrape(client)
                totals.add(sum(v for (name, labels), v in samples.items() if name == "kentino_decisions_total"
                               and dict(labels)["source"] == "http"))
        assert list(scratch.glob("kentino-metrics-*"))
    finally:
        _stop(process)
    assert totals == {float(sent)}, (totals, sent)
    assert len(pids) == 2, f"one worker answered all {sent} connections: {pids}"
    assert not list(scratch.glob("kentino-metrics-*")), "the metrics directory outlived the server"
