"""The replicated deployment of deploy/: HAProxy on deploy/haproxy.cfg in front of two `serve` replicas sharing
one PostgreSQL log. A replica killed under load loses no acknowledged decision, fails only the requests in
flight and is back after a restart; a replica cut off from its log is drained (by the /readyz check, or under
load by the 503s it answers) and comes back; a drained rolling restart fails nothing; the proxy keeps admin paths,
/metrics and unknown Hosts out; a rule set published to the log reaches every replica, and the decisions through
the proxy then carry its digest and the replica's instance label.

Figures (requests, failures, lost decisions, latencies, drain times) are printed and written as JSON to each
test's tmp dir. Latencies and drain times are measured, never asserted: every wait has a hard deadline only.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("httpx", reason="the replica tests drive the proxy with httpx")

import replica_harness as harness  # noqa: E402
from replica_load import PUBLIC_HOST, Load, latency_ms  # noqa: E402

PG_URL = os.environ.get("KENTINO_TEST_PG_URL")
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes


def _requirements() -> str:
    """The HAProxy binary, or a skip naming what is missing."""
    if not PG_URL:
        pytest.skip("replicas not tested: set KENTINO_TEST_PG_URL=postgresql://user@127.0.0.1/db (.ci/run does)")
    pytest.importorskip("psycopg", reason="the replicas' shared log needs psycopg 3 (pip install 'psycopg[binary]')")
    binary = harness.haproxy_binary()
    if binary is None:
        pytest.skip("replicas not tested: haproxy is not installed (apt-get install haproxy; .ci/run does)")
    return binary


@pytest.fixture
def deploy(tmp_path):
    """A function that starts a Deployment on a database of its own; everything stopped and dropped afterwards."""
    binary = _requirements()
    socket_dir = tmp_path
    if len(str(tmp_path / "haproxy.sock")) > SOCKET_PATH_MAX:
        socket_dir = Path(tempfile.mkdtemp(prefix="kx-"))
    started = []
    with harness.fresh_database(PG_URL) as db_url:
        def start(**options) -> harness.Deployment:
            deployment = harness.Deployment(binary, db_url, tmp_path, socket_dir, **options)
            started.append(deployment)
            deployment.start()
            return deployment
        try:
            yield start
        finally:
            for deployment in started:
                deployment.stop()
            if socket_dir != tmp_path:
                shutil.rmtree(socket_dir, ignore_errors=True)


def _report(tmp_path: Path, name: str, figures: dict) -> None:
    print(f"\n{name}: {json.dumps(figures, indent=2)}")
    (tmp_path / f"{name}.json").write_text(json.dumps(figures, indent=2) + "\n")


def _audit(load: Load, db_url: str) -> dict:
    """What the log holds against what the clients were told: lost and unacknowledged decisions, and
    the (session_id, turn) pairs recorded twice (a POST replayed by the proxy)."""
    rows = harness.logged_decisions(db_url)
    logged = {decision_id for decision_id, _, _ in rows}
    acknowledged = {r.decision_id for r in load.requests if r.acknowledged}
    turns = [(session, turn) for _, session, turn in rows if session and session.startswith(load.prefix)]
    return {"lost": sorted(acknowledged - logged), "unacknowledged": len(logged - acknowledged),
            "replayed": len(turns) - len(set(turns)), "logged": len(logged), "acknowledged": len(acknowledged)}


def _outcome(load: Load, audit: dict) -> dict:
    failures = [r for r in load.requests if not r.acknowledged]
    return {"requests": len(load.requests), "acknowledged": audit["acknowledged"], "failed": len(failures),
            "decisions_lost": len(audit["lost"]), "logged_but_unacknowledged": audit["unacknowledged"],
            "replayed_posts": audit["replayed"],
            "load_seconds": round(max(r.end for r in load.requests) - min(r.start for r in load.requests), 2),
            "failures": [f"{r.status}: {(r.error or '')[:100]}" for r in failures[:5]]}


def _back_in_service(deployment: harness.Deployment, replica: harness.Replica) -> float:
    """Wait until HAProxy has `replica` UP and has sent it 50 more requests; the time it was seen UP."""
    proxy = deployment.proxy
    up_at = proxy.wait_status(replica.name, "UP", 15)
    sessions_at_up = int(proxy.servers()[replica.name]["stot"])
    harness.wait_until(lambda: int(proxy.servers()[replica.name]["stot"]) >= sessions_at_up + 50, 15,
                       f"50 requests to {replica.name} after it came back")
    return up_at


def _kill_and_restart(deployment: harness.Deployment, load: Load) -> dict:
    """SIGKILL replica1 under load, wait for DOWN and for 100 answers from replica2 alone, restart replica1 and
    wait until it is UP and serving again. The moments of each step, and the pids /readyz shows through the proxy."""
    proxy, (victim, survivor) = deployment.proxy, deployment.replicas
    harness.wait_until(lambda: load.acknowledged_after(0) >= 150, 15, "150 decisions before the kill")
    t = {"kill_from": time.monotonic()}
    victim.kill(signal.SIGKILL)
    t["kill_to"] = victim.wait_exit()  # SIGKILL is delivered asynchronously: the kill lasts until the process is gone
    t["down_at"] = proxy.wait_status(victim.name, "DOWN", 15)
    harness.wait_until(lambda: load.acknowledged_after(t["down_at"]) >= 100, 15, "100 decisions on one replica")
    t["restart_at"] = time.monotonic()
    victim.start()
    pids = {victim.wait_ready()["worker_pid"], survivor.readyz()["worker_pid"]}
    t["ready_at"] = time.monotonic()
    t["up_at"] = _back_in_service(deployment, victim)
    t["pids_wanted"], t["pids_seen"] = pids, deployment.proxied_pids(pids)
    return t


def test_killed_replica_loses_no_acknowledged_decision(deploy, tmp_path):
    """SIGKILL of a replica under load through HAProxy: every acknowledged decision is in PostgreSQL, only requests
    in flight at the kill fail, the replica is drained, and after a restart it is UP and serving again."""
    deployment = deploy()
    load = Load(deployment.proxy.base_url, f"kill-{uuid.uuid4().hex[:8]}", threads=8, seconds=20)
    load.start()
    try:
        t = _kill_and_restart(deployment, load)
    finally:
        load.stop()
    requests, audit = load.requests, _audit(load, deployment.db_url)
    failures = [r for r in requests if not r.acknowledged]
    alone = [r for r in requests if t["down_at"] <= r.start and r.end <= t["restart_at"]]
    figures = {**_outcome(load, audit),
               "in_flight_at_kill": sum(r.in_flight(t["kill_from"], t["kill_to"]) for r in requests),
               "latency_before_kill": latency_ms([r for r in requests if r.end < t["kill_from"]]),
               "latency_kill_to_down": latency_ms([r for r in requests if t["kill_from"] <= r.start < t["down_at"]]),
               "latency_one_replica": latency_ms(alone),
               "latency_after_back_up": latency_ms([r for r in requests if r.start >= t["up_at"]]),
               "seconds_kill_to_gone": round(t["kill_to"] - t["kill_from"], 4),
               "seconds_kill_to_down": round(t["down_at"] - t["kill_from"], 3),
               "seconds_restart_to_ready": round(t["ready_at"] - t["restart_at"], 3),
               "seconds_restart_to_up": round(t["up_at"] - t["restart_at"], 3),
               "haproxy": deployment.proxy.transitions("replica1")}
    _report(tmp_path, "replica-kill", figures)
    assert not audit["lost"], f"acknowledged decisions missing from the log: {audit['lost'][:5]}"
    assert all(r.in_flight(t["kill_from"], t["kill_to"]) for r in failures), "a request not in flight failed"
    assert audit["replayed"] == 0, "the proxy sent a POST twice"
    assert audit["unacknowledged"] <= len(failures), "decisions were logged that no request failed or acknowledged"
    assert len(alone) >= 100 and all(r.acknowledged for r in alone), "the survivor did not carry the load alone"
    assert t["pids_wanted"] <= t["pids_seen"], f"/readyz through the proxy reached only {t['pids_seen']}"


def test_replica_cut_off_from_its_log_is_drained_by_readyz(deploy, tmp_path):
    """With no traffic to observe, only the /readyz check can see that a replica lost its log: cut off from
    PostgreSQL, the replica is marked DOWN for the check's 503, and UP again for its 200 once the link is back."""
    deployment = deploy(cuttable=True)
    proxy, replica = deployment.proxy, deployment.replicas[0]
    cut_at = time.monotonic()
    deployment.link.cut()
    down_at = proxy.wait_status(replica.name, "DOWN", 15)
    mend_at = time.monotonic()
    deployment.link.mend()
    up_at = proxy.wait_status(replica.name, "UP", 15)
    transitions = proxy.transitions(replica.name)
    _report(tmp_path, "replica-log-cut-idle", {"seconds_cut_to_down": round(down_at - cut_at, 3),
                                               "seconds_mend_to_up": round(up_at - mend_at, 3), "haproxy": transitions})
    assert len(transitions) == 2, transitions
    assert transitions[0].startswith("is DOWN, reason: Layer7 wrong status, code: 503"), transitions[0]
    assert transitions[1].startswith("is UP, reason: Layer7 check passed, code: 200"), transitions[1]


def _cut_and_mend(deployment: harness.Deployment, load: Load) -> dict:
    """Cut replica1 off from PostgreSQL under load until HAProxy has it DOWN and replica2 has answered 100
    requests alone, then mend the link and wait until replica1 is UP and serving again."""
    proxy, victim = deployment.proxy, deployment.replicas[0]
    harness.wait_until(lambda: load.acknowledged_after(0) >= 150, 15, "150 decisions before the cut")
    t = {"cut_at": time.monotonic()}
    deployment.link.cut()
    t["down_at"] = proxy.wait_status(victim.name, "DOWN", 15)
    harness.wait_until(lambda: load.acknowledged_after(t["down_at"]) >= 100, 15, "100 decisions on one replica")
    t["mend_at"] = time.monotonic()
    deployment.link.mend()
    t["up_at"] = _back_in_service(deployment, victim)
    return t


def test_replica_cut_off_from_its_log_under_load_fails_only_until_drained(deploy, tmp_path):
    """Under load, a replica that cannot write its log answers 503 (no decision given) until HAProxy takes it out;
    nothing acknowledged is lost, no POST is replayed, and it is UP and serving again once the link is back."""
    deployment = deploy(cuttable=True)
    load = Load(deployment.proxy.base_url, f"cut-{uuid.uuid4().hex[:8]}", threads=8, seconds=20)
    load.start()
    try:
        t = _cut_and_mend(deployment, load)
    finally:
        load.stop()
    requests, audit = load.requests, _audit(load, deployment.db_url)
    failures = [r for r in requests if not r.acknowledged]
    figures = {**_outcome(load, audit),
               "in_flight_from_cut_to_down": sum(r.in_flight(t["cut_at"], t["down_at"]) for r in requests),
               "latency_before_cut": latency_ms([r for r in requests if r.end < t["cut_at"]]),
               "latency_cut_to_down": latency_ms([r for r in requests if t["cut_at"] <= r.start < t["down_at"]]),
               "latency_one_replica": latency_ms([r for r in requests if t["down_at"] <= r.start < t["mend_at"]]),
               "seconds_cut_to_down": round(t["down_at"] - t["cut_at"], 3),
               "seconds_mend_to_up": round(t["up_at"] - t["mend_at"], 3),
               "haproxy": deployment.proxy.transitions("replica1")}
    _report(tmp_path, "replica-log-cut-load", figures)
    assert not audit["lost"] and audit["replayed"] == 0, audit
    assert all(r.status == 503 and r.in_flight(t["cut_at"], t["down_at"]) for r in failures), figures["failures"]
    assert audit["unacknowledged"] <= len(failures), "decisions were logged that no request failed or acknowledged"


def test_drained_rolling_restart_fails_nothing(deploy, tmp_path):
    """A replica put in maintenance on HAProxy's socket, stopped with SIGTERM and restarted under load: no request
    fails, none is lost, and it serves again once set ready."""
    deployment = deploy()
    proxy, victim = deployment.proxy, deployment.replicas[0]
    load = Load(proxy.base_url, f"roll-{uuid.uuid4().hex[:8]}", threads=8, seconds=20)
    load.start()
    try:
        harness.wait_until(lambda: load.acknowledged_after(0) >= 100, 15, "100 decisions before the restart")
        drain_at = time.monotonic()
        proxy.command(f"set server {harness.BACKEND}/{victim.name} state maint")
        harness.wait_until(lambda: proxy.servers()[victim.name]["scur"] == "0", 15, f"{victim.name} idle")
        victim.kill(signal.SIGTERM)
        victim.wait_exit()
        victim.start()
        victim.wait_ready()
        proxy.command(f"set server {harness.BACKEND}/{victim.name} state ready")
        up_at = _back_in_service(deployment, victim)
    finally:
        load.stop()
    requests, audit = load.requests, _audit(load, deployment.db_url)
    figures = {**_outcome(load, audit), "latency_before_drain": latency_ms([r for r in requests if r.end < drain_at]),
               "latency_during_restart": latency_ms([r for r in requests if drain_at <= r.start < up_at]),
               "seconds_drain_to_up": round(up_at - drain_at, 3)}
    _report(tmp_path, "replica-rolling-restart", figures)
    assert figures["failed"] == 0, f"requests failed during a drained restart: {figures['failures']}"
    assert not audit["lost"] and audit["unacknowledged"] == 0 and audit["replayed"] == 0, audit


def test_proxy_refuses_admin_paths_and_unknown_hosts(deploy):
    """Reload and /metrics are not reachable through the proxy, even with the admin token a replica accepts directly
    and even percent-encoded (HAProxy's own 403), and the replicas' Host allowlist still applies behind it: the
    public name is answered, another name is a 400."""
    import httpx
    deployment = deploy()
    admin = {"Authorization": f"Bearer {deployment.tokens['KENTINO_ADMIN_TOKEN']}"}
    replica = deployment.replicas[0]
    direct = httpx.post(f"http://127.0.0.1:{replica.port}/v1/admin/reload", headers={**admin, "Host": "localhost"},
                        timeout=60)
    assert direct.status_code == 200, direct.text
    with httpx.Client(base_url=deployment.proxy.base_url, timeout=10) as client:
        public = {"Host": PUBLIC_HOST}
        for path in ("/v1/admin/reload", "/v1/%61dmin/reload", "/v1/admin%2Freload"):
            refused = client.post(path, headers={**public, **admin})
            assert refused.status_code == 403 and "<h1>403 Forbidden</h1>" in refused.text, (path, refused.text)
        for path in ("/metrics", "/%6detrics"):
            refused = client.get(path, headers={**public, **admin})
            assert refused.status_code == 403 and "<h1>403 Forbidden</h1>" in refused.text, (path, refused.text)
        assert client.get("/readyz", headers=public).status_code == 200
        refused = client.get("/readyz", headers={"Host": "evil.example"})
        assert refused.status_code == 400 and "Host" in refused.text


def test_proxy_terminates_tls_and_redirects_plain_http(deploy, tmp_path):
    """With KENTINO_TLS_CERT, HAProxy answers HTTPS with that certificate (a decision through it is logged) and
    answers plain HTTP with a 308 (which keeps method and body) to the HTTPS URL."""
    import ssl

    import httpx
    pem = harness.self_signed_pem(tmp_path)
    if pem is None:
        pytest.skip("openssl is not installed: no certificate to test TLS with")
    deployment = deploy(tls_pem=pem)
    trust = ssl.create_default_context(cafile=str(tmp_path / "tls-cert.pem"))
    public = {"Host": PUBLIC_HOST}
    with httpx.Client(base_url=deployment.proxy.tls_url, verify=trust, headers=public, timeout=10) as client:
        answer = client.post("/v1/recommend", json={"task": "inference", "model": "llama-3.1-70b"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["decision_id"] in {row[0] for row in harness.logged_decisions(deployment.db_url)}
    plain = httpx.post(f"{deployment.proxy.base_url}/v1/recommend", json={"task": "inference"},
                       headers={"Host": PUBLIC_HOST}, timeout=10)
    assert plain.status_code == 308 and plain.headers["location"] == f"https://{PUBLIC_HOST}/v1/recommend"


def _publish(db_url: str, rules: Path) -> str:
    """`kentino-expert rules publish` as an operator runs it; the digest it published."""
    result = subprocess.run([sys.executable, "-m", "kentino_expert", "rules", "publish", "--db", db_url, "--rules",
                             str(rules), "--knowledge", str(harness.ROOT / "knowledge")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("published rule set ", 1)[1].split()[0]


def _seconds_to_every_replica(replicas, digest: str, since: float) -> list[float]:
    """Seconds from `since` until each replica's own /readyz shows `digest` (all polled in turn every 20 ms, hard
    60 s): the first time each was seen serving it."""
    seen: dict[str, float] = {}

    def every_one_serves() -> bool:
        for replica in replicas:
            if replica.name not in seen and (replica.readyz() or {}).get("digest") == digest:
                seen[replica.name] = time.monotonic() - since
        return len(seen) == len(replicas)
    harness.wait_until(every_one_serves, 60, f"every replica serving {digest[:16]}", interval=0.02)
    return [seen[replica.name] for replica in replicas]


def test_a_published_rule_set_reaches_every_replica(deploy, tmp_path):
    """Replicas serving their own directories switch, each within a hard deadline, to every rule set `rules publish`
    stores in their shared log (a moved cliff, the original, the moved one again ...); decisions through HAProxy
    then carry the published digest and answer, and each row names its replica's instance and that digest."""
    deployment = deploy()
    moved = harness.rules_with_cliff(tmp_path, 60)
    first = [replica.readyz() for replica in deployment.replicas]
    assert {(r["rule_source"], r["published_digest"]) for r in first} == {("local", None)}
    seconds = []  # per publish: each replica's time to serve the set
    for rules in (moved, harness.ROOT / "rules", moved, harness.ROOT / "rules", moved):
        digest = _publish(deployment.db_url, rules)
        seconds.append(_seconds_to_every_replica(deployment.replicas, digest, time.monotonic()))
    ready = [replica.readyz() for replica in deployment.replicas]
    assert {(r["digest"], r["rule_source"], r["published_digest"]) for r in ready} == {(digest, "published", digest)}
    import httpx
    import psycopg
    with httpx.Client(base_url=deployment.proxy.base_url, headers={"Host": PUBLIC_HOST}, timeout=10) as client:
        answers = [client.post("/v1/recommend", json=harness.BATCH_70B).json() for _ in range(20)]
    assert {(a["ruleset"]["digest"], a["recommendation"]["kind"]) for a in answers} == {(digest, "single-node-int4")}
    with psycopg.connect(deployment.db_url) as conn:
        rows = conn.execute("SELECT digest, instance FROM decisions WHERE decision_id = ANY(%s)",
                            [[a["decision_id"] for a in answers]]).fetchall()
    assert len(rows) == 20 and {d for d, _ in rows} == {digest}
    assert {i for _, i in rows} == {r["instance"] for r in ready} and len({r["instance"] for r in ready}) == 2
    every = [max(each) for each in seconds]  # a publish has reached every replica when the last one serves it
    _report(tmp_path, "replica-publish", {"publishes": 5, "replicas": 2, "seconds_from_publish_to_every_replica": {
        "median": round(statistics.median(every), 3), "max": round(max(every), 3),
        "each_replica": [[round(s, 3) for s in each] for each in seconds]}})


def _side_by_side(requests, old: str, new: str) -> float:
    """Seconds during which both rule sets answered: from the first answer by `new` to the last by `old` (0 when
    every `old` answer came before every `new` one)."""
    first_new = min((r.end for r in requests if r.digest == new), default=None)
    last_old = max((r.end for r in requests if r.digest == old), default=None)
    return 0.0 if first_new is None or last_old is None else max(0.0, last_old - first_new)


def test_a_poisoned_publish_leaves_every_answer_on_one_rule_set(deploy, tmp_path):
    """The attack of 2026-12-05: after a publish that failed to build, a restarted replica served its local rules
    while the other kept the published set. Under load through HAProxy: a poisoned set offered for trial is refused
    by both replicas and not activated; one activated without a trial is refused by the running replica and, after a
    restart, the restarted one serves the earlier published set: every answer carries the same digest. A good
    publish then switches both with (almost) no time of both sets answering side by side."""
    from kentino_expert.decisions import published, replicas
    from kentino_expert.decisions.connect import open_log
    deployment = deploy()
    good = _publish(deployment.db_url, harness.ROOT / "rules")
    _seconds_to_every_replica(deployment.replicas, good, time.monotonic())
    files = published.read_files(harness.ROOT / "rules", harness.ROOT / "knowledge")
    files["rules/flow.yaml"] = "rules: [this is not, a rule"
    load = Load(deployment.proxy.base_url, f"poison-{uuid.uuid4().hex[:8]}", threads=4, seconds=90)
    load.start()
    try:
        harness.wait_until(lambda: load.acknowledged_after(0) >= 50, 30, "50 decisions before the poison")
        with open_log(deployment.db_url) as log:
            offered = replicas.publish_to_replicas(log, published.PublishedSet("a" * 64, files), "mallory", 60)
            published.publish(log, published.PublishedSet("b" * 64, files), "by-hand")  # no trial
        victim = deployment.replicas[0]
        harness.wait_until(lambda: (victim.readyz() or {}).get("last_reload_error"), 30, "the refusal said")
        victim.stop()
        restart = time.monotonic()
        victim.start()
        ready = victim.wait_ready()
        ready_seconds = time.monotonic() - restart
        _back_in_service(deployment, victim)
        poisoned_done = time.monotonic()
        moved = harness.rules_with_cliff(tmp_path, 60)
        switched_at = time.monotonic()
        new = _publish(deployment.db_url, moved)
        switch = _seconds_to_every_replica(deployment.replicas, new, switched_at)
        settled = switched_at + max(switch)
        harness.wait_until(lambda: sum(r.start > settled for r in load.snapshot()) >= 50, 30, "50 answers after it")
    finally:
        load.stop()
    answered = [r for r in load.requests if r.acknowledged]
    before = [r for r in answered if r.end < switched_at]
    figures = {"offered_for_trial": list(offered.lines), "refused": offered.refused,
               "restarted_replica": {k: ready[k] for k in ("rule_source", "digest", "published_digest")},
               "seconds_restart_to_ready_with_an_unbuildable_set_active": round(ready_seconds, 3),
               "answers_before_the_good_publish": len(before),
               "digests_before_the_good_publish": sorted({r.digest[:16] for r in before}),
               "seconds_publish_to_every_replica": [round(s, 3) for s in switch],
               "seconds_both_sets_answered_side_by_side": round(_side_by_side(answered, good, new), 3)}
    _report(tmp_path, "replica-poisoned-publish", figures)
    assert offered.refused == "2 of 2 replicas did not build it" and not offered.changed
    assert (ready["rule_source"], ready["digest"], ready["published_digest"]) == ("published-earlier", good, "b" * 64)
    assert {r.digest for r in before} == {good} and len([r for r in before if r.start > poisoned_done - 5]) > 0
    assert {r.digest for r in answered if r.start > settled} == {new}
