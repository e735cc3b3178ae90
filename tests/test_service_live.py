"""A real uvicorn on 127.0.0.1: bounded load, SIGKILL mid-load (no acknowledged decision lost), SIGHUP reload."""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import sys
import threading
import time

import pytest

httpx = pytest.importorskip("httpx", reason="the live test drives the server with httpx")
pytest.importorskip("uvicorn", reason="the live test needs uvicorn")
pytest.importorskip("fastapi", reason="the live test needs fastapi")

from kentino_expert.paths import bundled  # noqa: E402
from live_server import start_serve, start_server, stop_server  # noqa: E402

if not hasattr(signal, "SIGKILL"):  # pragma: no cover
    pytest.skip("needs POSIX signals", allow_module_level=True)

THREADS = 4
MAX_REQUESTS_PER_THREAD = 250   # bounded in count ...
MAX_LOAD_SECONDS = 20           # ... and in time
KILL_AFTER_ACKS = 80
WORKLOADS = [
    {"task": "inference", "model": "llama-3.1-70b"},
    {"task": "inference", "model": "llama-3.1-405b", "latency": "interactive", "concurrency": 64},
    {"task": "full-finetune", "model": "llama-3.1-70b", "training_tokens": "300B", "deadline_days": 30},
    {"task": "batch-inference", "model": "qwen2.5-72b", "corpus_tokens": "50B", "deadline_days": 7},
    {"task": "inference", "model": "llama-3.1-70b", "tenancy": "multi", "qps": 150000},
    {"task": "qlora", "model": "llama-3.1-405b"},
]


def test_sigkill_under_load_loses_no_acknowledged_decision(tmp_path):
    """Every decision_id the server acknowledged before a SIGKILL is in the SQLite log, whole; no partial rows."""
    process, base = start_server(tmp_path)
    acked, errors, lock = [], [], threading.Lock()
    stop_at = time.monotonic() + MAX_LOAD_SECONDS

    def load(index: int):
        with httpx.Client(base_url=base, timeout=5) as client:
            for n in range(MAX_REQUESTS_PER_THREAD):
                if time.monotonic() > stop_at:
                    return
                facts = {**WORKLOADS[(index + n) % len(WORKLOADS)], "session_id": f"load-{index}", "turn": n}
                try:
                    response = client.post("/v1/recommend", json=facts)
                except httpx.HTTPError:
                    return  # the server is gone
                if response.status_code == 200:
                    with lock:
                        acked.append(response.json()["decision_id"])
                else:
                    with lock:
                        errors.append((response.status_code, response.text[:300]))

    threads = [threading.Thread(target=load, args=(i,), daemon=True) for i in range(THREADS)]
    try:
        for thread in threads:
            thread.start()
        while time.monotonic() < stop_at and len(acked) < KILL_AFTER_ACKS and any(t.is_alive() for t in threads):
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)  # mid-load: requests are in flight
        for thread in threads:
            thread.join(timeout=15)
    finally:
        stop_server(process)
    assert not errors, errors[:3]
    assert len(acked) >= 10, f"only {len(acked)} decisions were acknowledged before the kill"
    with sqlite3.connect(tmp_path / "live.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = db.execute("SELECT decision_id, created_at, source, facts, answer, kind, digest, engine, session_id, "
                          "turn FROM decisions").fetchall()
    stored = {row[0]: row for row in rows}
    lost = [d for d in acked if d not in stored]
    assert not lost, f"{len(lost)} acknowledged decision(s) missing from the log"
    for _, created_at, source, facts, answer, kind, digest, engine, session_id, turn in rows:
        assert created_at and source == "http" and engine and session_id.startswith("load-") and turn is not None
        answer = json.loads(answer)
        assert json.loads(facts)["task"] and answer["recommendation"]["kind"] == kind
        assert answer["ruleset"]["digest"] == digest and answer["trace"]


def test_sighup_reload_refuses_broken_rules(tmp_path):
    """SIGHUP reloads the rules; a broken copy is refused and the old rules keep answering."""
    rules = tmp_path / "rules"
    shutil.copytree(bundled("rules"), rules)
    process, base = start_server(tmp_path, KENTINO_RULES=str(rules))
    facts = {"task": "inference", "model": "llama-3.1-70b"}

    def ready():
        return httpx.get(f"{base}/readyz", timeout=5).json()

    def wait_for(predicate):
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            state = ready()
            if predicate(state):
                return state
            time.sleep(0.05)
        raise AssertionError(f"reload not observed: {ready()}")

    try:
        first = ready()
        flow = rules / "flow.yaml"
        good = flow.read_text()
        flow.write_text(good + "\n  - id: BROKEN rule\n    when: [\n")
        process.send_signal(signal.SIGHUP)
        refused = wait_for(lambda s: s["last_reload_error"])
        assert refused["generation"] == first["generation"] and refused["digest"] == first["digest"]
        answer = httpx.post(f"{base}/v1/recommend", json=facts, timeout=10)
        assert answer.status_code == 200 and answer.json()["ruleset"]["digest"] == first["digest"]
        flow.write_text(good + "\n")
        process.send_signal(signal.SIGHUP)
        reloaded = wait_for(lambda s: s["generation"] > first["generation"])
        assert reloaded["digest"] != first["digest"] and reloaded["last_reload_error"] is None
        after = httpx.post(f"{base}/v1/recommend", json=facts, timeout=10).json()
        assert after["ruleset"]["digest"] == reloaded["digest"]
    finally:
        stop_server(process)


ADMIN_TOKEN = "live-admin-token"


def _serve_workers(tmp_path, workers: int, rules):
    """`kentino-expert serve --workers N` on a free port, with an admin token; returns (process, base URL)."""
    process, port = start_serve(tmp_path, "--workers", str(workers), "--rules", str(rules), "--db",
                                str(tmp_path / "reload.db"), env={"KENTINO_ADMIN_TOKEN": ADMIN_TOKEN})
    return process, f"http://127.0.0.1:{port}"


def _decider(answer: dict) -> str:
    return next(step["rule"] for step in answer["trace"] if step["concluded"].get("recommended_kind"))


def _rule_sets_deciding_differently(tmp_path, facts):
    """(served rules dir, its parameters.yaml, the edited text, {digest: (deciding rule, recommendation)})."""
    from kentino_expert.expert import Expert
    old_rules, new_rules = tmp_path / "old", tmp_path / "rules"
    shutil.copytree(bundled("rules"), old_rules)
    shutil.copytree(bundled("rules"), new_rules)
    params = new_rules / "parameters.yaml"
    edited = params.read_text().replace("hyperscale_qps:\n    value: 100000", "hyperscale_qps:\n    value: 200000")
    assert edited != params.read_text(), "the hyperscale_qps parameter moved: update this test"
    expected = {}
    for directory in (old_rules, None):
        if directory is None:
            params.write_text(edited)
            directory = new_rules
        expert = Expert(directory)
        answer = expert.recommend(facts).model_dump(mode="json")
        expected[answer["ruleset"]["digest"]] = (_decider(answer), answer["recommendation"])
        expert.close()
    params.write_text(old_rules.joinpath("parameters.yaml").read_text())
    assert len({rule for rule, _ in expected.values()}) == 2, "the edit must change the deciding rule"
    return new_rules, params, edited, expected


def test_reload_under_load_drops_nothing_and_mixes_no_versions(tmp_path):
    """A reload mid-load (two workers): every request answered, each wholly by the old or the new rules."""
    facts = {"task": "inference", "model": "llama-3.1-70b", "tenancy": "multi", "qps": 150000}
    new_rules, params, edited, expected = _rule_sets_deciding_differently(tmp_path, facts)
    process, base = _serve_workers(tmp_path, 2, new_rules)
    answers, failures, stop = [], [], threading.Event()

    def client():
        with httpx.Client(base_url=base, timeout=30) as http:
            # until stopped: a reload first tries the new rules in a sandbox, so the load must outlast it
            for _ in range(MAX_REQUESTS_PER_THREAD * 8):
                if stop.is_set():
                    return
                try:
                    response = http.post("/v1/recommend", json=facts)
                except httpx.HTTPError as exc:
                    failures.append(repr(exc))
                    continue
                (answers if response.status_code == 200 else failures).append(
                    response.json() if response.status_code == 200 else response.text)

    try:
        threads = [threading.Thread(target=client) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        params.write_text(edited)
        reload = httpx.post(f"{base}/v1/admin/reload", timeout=30, headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
        assert reload.status_code == 200, reload.text
        # the other worker picks the reload up on its next request, and builds the new rules in a thread of its
        # own (a sandboxed trial load first): on a busy machine that takes seconds, so the load goes on until an
        # answer comes from the new rules, or for MAX_LOAD_SECONDS at most (then the assertion below fails)
        new_digest = reload.json()["digest"]
        deadline = time.monotonic() + MAX_LOAD_SECONDS
        while time.monotonic() < deadline and not any(a["ruleset"]["digest"] == new_digest for a in answers[-50:]):
            time.sleep(0.1)
        time.sleep(0.5)
        stop.set()
        for thread in threads:
            thread.join(timeout=MAX_LOAD_SECONDS)
        assert not failures, failures[:3]
        seen = {}
        for answer in answers:
            digest = answer["ruleset"]["digest"]
            assert digest in expected, f"a digest no rule set on disk has: {digest}"
            rule, recommendation = expected[digest]
            assert _decider(answer) == rule and answer["recommendation"] == recommendation
            seen[digest] = seen.get(digest, 0) + 1
        assert len(seen) == 2, f"the load did not straddle the reload: {seen}"
        with sqlite3.connect(tmp_path / "reload.db") as db:
            logged = dict(db.execute("SELECT decision_id, digest FROM decisions").fetchall())
        assert all(logged[a["decision_id"]] == a["ruleset"]["digest"] for a in answers)
    finally:
        stop_server(process)


def _worker_pids(base: str, connections: int = 16) -> set:
    pids = set()
    for _ in range(connections):
        with httpx.Client(timeout=10) as client:  # a new connection each time
            pids.add(client.get(f"{base}/readyz").json()["worker_pid"])
    return pids


def _alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().split()[2] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_REUSEPORT workers are Linux-only")
def test_workers_share_connections_reload_on_sighup_and_stop_together(tmp_path):
    """`serve --workers 2`: new connections reach both workers, SIGHUP reloads both, SIGTERM stops both."""
    rules = tmp_path / "rules"
    shutil.copytree(bundled("rules"), rules)
    process, base = _serve_workers(tmp_path, 2, rules)
    try:
        deadline, pids = time.monotonic() + 30, set()
        while len(pids) < 2 and time.monotonic() < deadline:  # the second worker may still be starting
            pids |= _worker_pids(base, 4)
        assert len(pids) == 2 and process.pid not in pids
        assert _worker_pids(base) == pids  # 16 new connections: the kernel spreads them over both
        digest = httpx.get(f"{base}/readyz").json()["digest"]
        params = rules / "parameters.yaml"
        params.write_text(params.read_text().replace("hyperscale_qps:\n    value: 100000",
                                                     "hyperscale_qps:\n    value: 200000"))
        process.send_signal(signal.SIGHUP)
        deadline, digests = time.monotonic() + 20, {}
        while time.monotonic() < deadline:
            for _ in range(8):
                state = httpx.Client(timeout=10).get(f"{base}/readyz").json()
                digests[state["worker_pid"]] = state["digest"]
            if len(digests) == 2 and digest not in digests.values():
                break
            time.sleep(0.1)
        assert len(digests) == 2 and digest not in digests.values(), digests
    finally:
        stop_server(process)
    time.sleep(0.5)
    assert not [pid for pid in pids if _alive(pid)]
