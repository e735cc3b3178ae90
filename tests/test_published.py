"""One rule set everywhere: `rules publish` checks a rule set and stores it in the PostgreSQL log; a service on that
log serves the published set, follows each new one on NOTIFY, refuses one that does not build (keeping its rules
and saying so in /readyz), and records its instance and digest in every decision (KENTINO_TEST_PG_URL)."""
from __future__ import annotations

import json
import shutil

import psycopg
import pytest
from click.testing import CliRunner

from kentino_expert.cli.main import main
from kentino_expert.decisions import published
from kentino_expert.decisions.connect import open_log
from kentino_expert.errors import DecisionLogError
from kentino_expert.expert import Expert
from replica_harness import BATCH_70B, ROOT, rules_with_cliff, wait_until

pytest.importorskip("fastapi", reason="the service needs fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from kentino_expert.service.app import create_app  # noqa: E402

KNOWLEDGE = ROOT / "knowledge"
ADMIN = "admin-token-for-the-publish-tests"


def _publish(db: str, rules, *extra) -> CliRunner:
    return CliRunner().invoke(main, ["rules", "publish", "--db", db, "--rules", str(rules), "--knowledge",
                                     str(KNOWLEDGE), *extra])


def _digest(rules) -> str:
    expert = Expert(rules, KNOWLEDGE)
    try:
        return expert.ruleset.digest
    finally:
        expert.close()


def _active_digest(db: str) -> str | None:
    with open_log(db) as log:
        return published.active_digest(log)


# -- rules publish --------------------------------------------------------------------------------------

def test_publish_needs_a_postgresql_log(tmp_path):
    """On a SQLite log (or none) `rules publish` is a one-line error, exit 2, and writes nothing."""
    result = _publish(str(tmp_path / "log.db"), ROOT / "rules")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: rules publish needs a postgresql:// decision log")
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "log.db").exists()


def test_a_broken_rule_set_is_not_published(pg_target, tmp_path):
    """A rule set `rules check` refuses is refused by publish: its diagnostics (file:line:col), exit 2, and the
    published set stays as it was."""
    assert _publish(pg_target, ROOT / "rules").exit_code == 0
    before = _active_digest(pg_target)
    broken = rules_with_cliff(tmp_path, 60)
    flow = broken / "flow.yaml"
    flow.write_text(flow.read_text() + "\n  - id: broken-rule\n    heuristics: [H-FLOW-1]\n    priority: 999\n"
                    "    when: [no_such_fact > 3]\n    then: {recommend: {kind: frontier}}\n")
    result = _publish(pg_target, broken)
    assert result.exit_code == 2, result.output
    assert "flow.yaml:" in result.stdout and "error: rule set not published:" in result.stderr
    assert _active_digest(pg_target) == before


def test_publish_stores_the_files_and_the_digest_the_service_computes(pg_target, tmp_path):
    """The active set is the one published last, with the digest an Expert computes from those files and the
    files themselves; publishing it again changes nothing; an older set can be published again (a rollback)."""
    moved = rules_with_cliff(tmp_path, 60)
    first = _publish(pg_target, moved, "--by", "alice")
    assert first.exit_code == 0, first.output
    digest = _digest(moved)
    assert f"published rule set {digest}" in first.stdout and "password" not in first.stdout
    with open_log(pg_target) as log:
        found = published.active(log)
    assert found.digest == digest and found.published_by == "alice"
    assert dict(found.files) == published.read_files(moved, KNOWLEDGE)
    assert set(found.files) >= {"rules/parameters.yaml", "rules/flow.yaml", "knowledge/models.yaml"}
    again = _publish(pg_target, moved)
    assert again.exit_code == 0 and "already the published one" in again.stdout
    assert _publish(pg_target, ROOT / "rules").exit_code == 0 and _active_digest(pg_target) == _digest(ROOT / "rules")
    assert _publish(pg_target, moved).exit_code == 0 and _active_digest(pg_target) == digest


@pytest.mark.parametrize("name", ["../evil.yaml", "rules/../../evil.yaml", "/etc/passwd", "rules/.hidden",
                                  "other/x.yaml", "rules/", "rules/a/b.yaml", "rules/a\\b.yaml"])
def test_names_that_would_leave_the_directory_are_refused(name):
    """A published file is ROOT/NAME with a plain name: nothing a row says can be written outside its directory."""
    with pytest.raises(DecisionLogError, match="not a rules/ or knowledge/ file name"):
        published.check_file_name(name)


def test_a_row_written_by_hand_with_a_bad_name_is_refused_when_read(pg_target):
    """A replica reading an active set whose files name a path outside its directory refuses the whole set."""
    open_log(pg_target).close()
    with psycopg.connect(pg_target, autocommit=True) as conn:
        conn.execute("INSERT INTO rule_sets (digest, files, published_by) VALUES ('x', %s, 'mallory')",
                     [json.dumps({"rules/../../tmp/evil.yaml": "x"})])
        conn.execute("INSERT INTO rule_set_active (digest, activated_by) VALUES ('x', 'mallory')")
    with open_log(pg_target) as log, pytest.raises(DecisionLogError, match="not a rules/ or knowledge/ file"):
        published.active(log)


# -- a service that follows ---------------------------------------------------------------------------

def _client(db: str, instance: str = "test-replica:1") -> TestClient:
    app = create_app(rules_dir=str(ROOT / "rules"), knowledge_dir=str(KNOWLEDGE), db=db, instance=instance,
                     admin_token=ADMIN, read_token="", allowed_hosts=["localhost"])
    return TestClient(app, base_url="http://localhost")


def _ready(client) -> dict:
    response = client.get("/readyz")
    assert response.status_code == 200, response.text
    return response.json()


def test_a_service_serves_the_published_set_and_follows_new_ones(pg_target, tmp_path):
    """A service on a log with a published set serves it (not its --rules); a set published while it runs is
    served within a bounded time, and decisions record it with the instance label."""
    moved = rules_with_cliff(tmp_path, 60)
    assert _publish(pg_target, moved).exit_code == 0
    with _client(pg_target) as client:
        ready = _ready(client)
        assert (ready["digest"], ready["rule_source"], ready["published_digest"]) == (_digest(moved), "published",
                                                                                       _digest(moved))
        assert client.post("/v1/recommend", json=BATCH_70B).json()["recommendation"]["kind"] == "single-node-int4"
        assert _publish(pg_target, ROOT / "rules").exit_code == 0
        original = _digest(ROOT / "rules")
        wait_until(lambda: _ready(client)["digest"] == original, 60, "the new set served", interval=0.1)
        answer = client.post("/v1/recommend", json=BATCH_70B).json()
        assert answer["recommendation"]["kind"] == "single-node" and answer["ruleset"]["digest"] == original
    with open_log(pg_target) as log:
        row = log.get(answer["decision_id"])
    assert (row["digest"], row["instance"]) == (original, "test-replica:1")


def test_a_published_set_that_does_not_build_is_refused_and_said(pg_target, tmp_path):
    """A set made active by hand that does not build (it passed no check) is refused on NOTIFY: the service keeps
    its rules and /readyz names the refused digest and the error; the metrics count the refusal."""
    with _client(pg_target) as client:
        serving = _ready(client)["digest"]
        refusals = _refusals(client)
        files = published.read_files(ROOT / "rules", KNOWLEDGE)
        files["rules/flow.yaml"] = "rules: [this is not, a rule"
        with open_log(pg_target) as log:
            published.publish(log, published.PublishedSet("f" * 64, files), "by-hand")
        ready = wait_until(lambda: (body := _ready(client))["last_reload_error"] and body, 60, "the refusal said")
        assert ready["digest"] == serving and ready["published_digest"] == "f" * 64
        assert "ffffffffffffffff" in ready["last_reload_error"] and "flow.yaml" in ready["last_reload_error"]
        assert _refusals(client) == refusals + 1
        assert client.post("/v1/recommend", json=BATCH_70B).json()["ruleset"]["digest"] == serving


def _refusals(client) -> float:
    """kentino_reloads_total{result="refused",trigger="published"} as /metrics shows it (0 before the first)."""
    from prometheus_client.parser import text_string_to_metric_families
    text = client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN}"}).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "kentino_reloads_total" and sample.labels == {"result": "refused",
                                                                                "trigger": "published"})


def test_reload_on_a_following_service_reads_the_published_set(pg_target, tmp_path):
    """POST /v1/admin/reload on a service that serves a published set reads that set again, not its directories:
    nothing to do while it is served; a set that does not build is tried again and refused (409)."""
    moved = rules_with_cliff(tmp_path, 60)
    assert _publish(pg_target, moved).exit_code == 0
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with _client(pg_target) as client:
        response = client.post("/v1/admin/reload", headers=admin)
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["reloaded"], body["source"], body["digest"]) == (False, "published", _digest(moved))
        files = published.read_files(moved, KNOWLEDGE)
        files["rules/flow.yaml"] = "rules: [this is not, a rule"
        with open_log(pg_target) as log:
            published.publish(log, published.PublishedSet("e" * 64, files), "by-hand")
        wait_until(lambda: _ready(client)["last_reload_error"], 60, "the refusal said")
        refused = client.post("/v1/admin/reload", headers=admin)
        assert refused.status_code == 409 and refused.json()["serving_digest"] == _digest(moved)
        assert any(d["file"].endswith("flow.yaml") for d in refused.json()["diagnostics"]), refused.text


def test_reload_when_the_published_set_cannot_be_read_is_a_503(pg_target):
    """A reload on a PostgreSQL log that cannot be read (here: closed) is a 503 that says so, not a rule-set
    refusal; the rules served stay."""
    with _client(pg_target) as client:
        serving = _ready(client)["digest"]
        client.app.state.log.close()
        response = client.post("/v1/admin/reload", headers={"Authorization": f"Bearer {ADMIN}"})
    assert response.status_code == 503, response.text
    assert "published rule set cannot be read" in response.json()["detail"][0]["message"]
    assert response.json()["serving_digest"] == serving


def test_a_service_on_sqlite_serves_its_directories(tmp_path):
    """On SQLite there is nothing published: the service serves its --rules and says so."""
    with _client(str(tmp_path / "log.db")) as client:
        ready = _ready(client)
    assert (ready["rule_source"], ready["published_digest"], ready["instance"]) == ("local", None, "test-replica:1")


def test_published_directories_are_removed_when_the_service_stops(pg_target, tmp_path, monkeypatch):
    """The files of a published set are written under a private temporary directory that is gone once the
    service has stopped."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert _publish(pg_target, rules_with_cliff(tmp_path, 60)).exit_code == 0
    with _client(pg_target) as client:
        assert _ready(client)["rule_source"] == "published"
        written = list((tmp_path / "tmp").glob("kentino-published-*/*/rules/parameters.yaml"))
        assert len(written) == 1
    assert not list((tmp_path / "tmp").iterdir())
    shutil.rmtree(tmp_path / "tmp")


def test_the_stdio_mcp_server_serves_the_published_set(pg_target, tmp_path):
    """`kentino-expert mcp` on a PostgreSQL log with a published set answers with that set, not its own rules, and
    records its instance label and that digest (one rule set everywhere, MCP included)."""
    pytest.importorskip("mcp", reason="the MCP server needs the mcp package")
    import asyncio
    import os
    import sys

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    moved = rules_with_cliff(tmp_path, 60)
    assert _publish(pg_target, moved).exit_code == 0

    async def recommend() -> dict:
        params = StdioServerParameters(command=sys.executable, args=["-m", "kentino_expert.cli.service", "mcp"],
                                       env={**os.environ, "KENTINO_DB": pg_target, "KENTINO_INSTANCE": "mcp-stdio"})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return (await session.call_tool("recommend", BATCH_70B)).structured_content
    answer = asyncio.run(asyncio.wait_for(recommend(), timeout=120))
    assert (answer["ruleset"]["digest"], answer["recommendation"]["kind"]) == (_digest(moved), "single-node-int4")
    with open_log(pg_target) as log:
        row = log.get(answer["decision_id"])
    assert (row["digest"], row["instance"], row["source"]) == (_digest(moved), "mcp-stdio", "mcp")
