"""Replicas on one PostgreSQL log serve one rule set: `rules publish` has every replica alive build a set before it
activates it, and activates nothing one of them refused; a replica that cannot build the active set serves the
newest earlier published set it can (never its own directories) and says so in /readyz and /metrics; one that
can build no published set does not start (KENTINO_TEST_PG_URL)."""
from __future__ import annotations

import psycopg
import pytest
from click.testing import CliRunner

from kentino_expert.cli.main import main
from kentino_expert.decisions import published, replicas
from kentino_expert.decisions.connect import open_log
from kentino_expert.errors import RuleFileError
from kentino_expert.expert import Expert
from replica_harness import BATCH_70B, ROOT, rules_with_cliff, wait_until

pytest.importorskip("fastapi", reason="the service needs fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from kentino_expert.service.app import create_app  # noqa: E402

KNOWLEDGE = ROOT / "knowledge"
ADMIN = "admin-token-for-the-one-rule-set-tests"


def _client(db: str, instance: str) -> TestClient:
    app = create_app(rules_dir=str(ROOT / "rules"), knowledge_dir=str(KNOWLEDGE), db=db, instance=instance,
                     admin_token=ADMIN, read_token="", allowed_hosts=["localhost"])
    return TestClient(app, base_url="http://localhost")


def _digest(rules) -> str:
    expert = Expert(rules, KNOWLEDGE)
    try:
        return expert.ruleset.digest
    finally:
        expert.close()


def _set(rules, digest=None, broken=False) -> published.PublishedSet:
    files = published.read_files(rules, KNOWLEDGE)
    if broken:  # what passed no check: a syntax error the replicas meet when they build it
        files["rules/flow.yaml"] = "rules: [this is not, a rule"
    return published.PublishedSet(digest or _digest(rules), files)


def _wait_alive(db: str, count: int) -> list[str]:
    with open_log(db) as log:
        return wait_until(lambda: len(alive := replicas.live_replicas(log)) == count and alive, 30,
                          f"{count} replicas alive")


def _active(db: str) -> str | None:
    with open_log(db) as log:
        return published.active_digest(log)


def test_a_set_every_replica_builds_is_activated_with_their_answers(pg_target, tmp_path):
    """With two replicas alive, `rules publish` waits for both to build the set, prints each answer, activates it,
    and both serve it."""
    moved = rules_with_cliff(tmp_path, 60)
    with _client(pg_target, "one:1") as first, _client(pg_target, "two:1") as second:
        names = _wait_alive(pg_target, 2)
        result = CliRunner().invoke(main, ["rules", "publish", "--db", pg_target, "--rules", str(moved),
                                           "--knowledge", str(KNOWLEDGE), "--wait", "60"])
        assert result.exit_code == 0, result.output
        for name in names:
            assert f"replica {name}: built it" in result.stdout
        assert "all 2 replicas built it and switch to it now" in result.stdout
        digest = _digest(moved)
        assert _active(pg_target) == digest
        for client in (first, second):
            wait_until(lambda c=client: c.get("/readyz").json()["digest"] == digest, 30, "the new set served")


def test_a_set_a_replica_refuses_is_not_activated_and_nobody_switches(pg_target, tmp_path):
    """A poisoned set (it builds nowhere): every replica answers `refused` with the reason, the set is not
    activated, `rules publish` exits 2 naming the refusals, and every replica still serves the same set."""
    with open_log(pg_target) as log:
        published.publish(log, _set(ROOT / "rules"), "first")
    good = _active(pg_target)
    with _client(pg_target, "one:1") as first, _client(pg_target, "two:1") as second:
        _wait_alive(pg_target, 2)
        with open_log(pg_target) as log:
            outcome = replicas.publish_to_replicas(log, _set(ROOT / "rules", "b" * 64, broken=True), "mallory", 60)
        assert outcome.refused == "2 of 2 replicas did not build it" and not outcome.changed
        assert all("refused:" in line and "flow.yaml" in line for line in outcome.lines), outcome.lines
        assert _active(pg_target) == good
        answers = [c.post("/v1/recommend", json=BATCH_70B).json()["ruleset"]["digest"] for c in (first, second) * 5]
        assert set(answers) == {good}


def test_publish_exits_2_when_one_replica_refuses(pg_target, tmp_path):
    """One replica of two cannot build the set (here its builds of that digest fail): publish prints which one and
    why, exits 2 with one line, and leaves the active set as it was."""
    moved = rules_with_cliff(tmp_path, 60)
    poisoned = _digest(moved)
    with _client(pg_target, "one:1"), _client(pg_target, "two:1") as second:
        names = _wait_alive(pg_target, 2)
        source = second.app.state.holder.published
        real = source.factory

        def refusing(found):
            if found.digest == poisoned:
                raise RuleFileError([])  # as a trial that timed out under load would
            return real(found)
        source.factory = refusing
        result = CliRunner().invoke(main, ["rules", "publish", "--db", pg_target, "--rules", str(moved),
                                           "--knowledge", str(KNOWLEDGE), "--wait", "60"])
    assert result.exit_code == 2, result.output
    refuser = next(name for name in names if name.startswith("two:1/"))
    assert f"replica {refuser}: refused" in result.stdout
    assert result.stderr.startswith(f"error: rule set {poisoned[:16]} not activated: 1 of 2 replicas did not build it")
    assert len(result.stderr.strip().splitlines()) == 1 and _active(pg_target) is None


def test_with_no_replica_alive_publish_activates_at_once(pg_target, tmp_path):
    """No replica running: nothing to wait for; the set is active and each replica builds it when it starts."""
    result = CliRunner().invoke(main, ["rules", "publish", "--db", pg_target, "--rules", str(ROOT / "rules"),
                                       "--knowledge", str(KNOWLEDGE)])
    assert result.exit_code == 0, result.output
    assert "no replica is running; each builds it when it starts" in result.stdout
    assert _active(pg_target) == _digest(ROOT / "rules")


def test_a_replica_that_cannot_build_the_active_set_serves_the_earlier_one(pg_target, tmp_path):
    """The attack of 2026-12-05: a replica restarting while the active set cannot be built served its own rules.
    Now it serves the newest earlier published set it can build, says so in /readyz and /metrics, and answers
    with the same digest as a replica that refused the set while running."""
    moved = rules_with_cliff(tmp_path, 60)
    with open_log(pg_target) as log:
        published.publish(log, _set(moved), "first")
    good = _digest(moved)
    with _client(pg_target, "running:1") as running:
        with open_log(pg_target) as log:  # activated without a trial, as `--wait 0` or an old publisher does
            published.publish(log, _set(ROOT / "rules", "c" * 64, broken=True), "by-hand")
        wait_until(lambda: running.get("/readyz").json()["last_reload_error"], 30, "the running replica refuses")
        with _client(pg_target, "restarted:1") as restarted:
            ready = restarted.get("/readyz").json()
            assert (ready["digest"], ready["rule_source"], ready["published_digest"]) == (good, "published-earlier",
                                                                                          "c" * 64)
            assert ready["behind_published"] and "cccccccccccccccc" in ready["last_reload_error"]
            metrics = restarted.get("/metrics", headers={"Authorization": f"Bearer {ADMIN}"}).text
            assert 'kentino_rule_set_behind{instance="restarted:1"} 1.0' in metrics
            assert 'source="published-earlier"' in metrics
            digests = {c.post("/v1/recommend", json=BATCH_70B).json()["ruleset"]["digest"]
                       for c in (running, restarted)}
            assert digests == {good}
    with psycopg.connect(pg_target) as conn:
        refusals = conn.execute("SELECT replica, result FROM rule_set_acks WHERE digest = %s", ["c" * 64]).fetchall()
    assert {result for _, result in refusals} == {"refused"} and len(refusals) == 2


def test_a_replica_that_can_build_no_published_set_does_not_start(pg_target):
    """Never its own directories: with only unbuildable sets published, the service refuses to start (E207)."""
    with open_log(pg_target) as log:
        published.publish(log, _set(ROOT / "rules", "d" * 64, broken=True), "by-hand")
    with pytest.raises(RuleFileError, match="serves no published set, and never its own directories"):
        _client(pg_target, "lonely:1")


def test_an_old_log_keeps_its_activation_as_history(pg_target):
    """A version 3 log's active set becomes the first activation of version 4 (the earlier set to fall back to)."""
    with open_log(pg_target) as log:
        published.publish(log, _set(ROOT / "rules"), "first")
        digest = published.active_digest(log)
    with psycopg.connect(pg_target, autocommit=True) as conn:  # back to version 3, as an older release left it
        for table in ("rule_set_activations", "rule_set_trials", "rule_set_acks", "replicas"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DELETE FROM decisions_schema_version WHERE version = 4")
        conn.execute("INSERT INTO decisions_schema_version (version) VALUES (3)")
    with open_log(pg_target) as log:
        assert published.earlier(log, "x" * 64) == [digest]
