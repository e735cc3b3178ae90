"""A real server (`kentino-expert serve`) told to reload a hostile rule set, by POST /v1/admin/reload and by
SIGHUP with two workers: refused in bounded time, /healthz answering throughout, the old rules serving,
/readyz showing the error. A set too slow for the sandbox's limit is stopped there, not in the server."""
from __future__ import annotations

import shutil
import signal
import sys
import threading
import time

import pytest

httpx = pytest.importorskip("httpx", reason="the live test drives the server with httpx")
pytest.importorskip("uvicorn", reason="the live test needs uvicorn")

import hostile_rules as hostile  # noqa: E402
from benchmarks.benchgen import generated_rules_dir  # noqa: E402
from kentino_expert.lang.limits import MAX_RULES  # noqa: E402

# generated rules on top of the bundled ones, under the bound a rule set may hold (more is E209 at once): their
# trial in the sandbox answers every rule's example, seconds on any machine
SLOW_RULES = MAX_RULES - 100
from kentino_expert.paths import bundled  # noqa: E402
from live_server import start_serve, stop_server  # noqa: E402

if not hasattr(signal, "SIGHUP"):  # pragma: no cover
    pytest.skip("needs POSIX signals", allow_module_level=True)

CHAT = {"task": "inference", "model": "llama-3.1-70b"}
REFUSAL_SECONDS = 60  # a hard bound on a refused reload (it never returned before)
ADMIN_TOKEN = "hostile-admin"  # HTTP reload is off without one
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


def _serve(tmp_path, rules, workers=1, **env):
    process, port = start_serve(tmp_path, "--workers", str(workers), "--rules", str(rules), "--db",
                                str(tmp_path / "live.db"), env={"KENTINO_ADMIN_TOKEN": ADMIN_TOKEN, **env})
    return process, f"http://127.0.0.1:{port}"


def _swap_in(served, new_set_dir):
    shutil.rmtree(served)
    shutil.copytree(new_set_dir, served)


def _still_serving(base, digest):
    answer = httpx.post(f"{base}/v1/recommend", json=CHAT, timeout=30)
    assert answer.status_code == 200 and answer.json()["ruleset"]["digest"] == digest


def _attacks(root):
    """(attack set, text its refusal holds) for each attack of the issue."""
    return [(hostile.or_chain(root), "an `or` of 500 alternatives"), (hostile.always_true(root, 65), "65 alternatives"),
            (hostile.overflow(root), "E206")]


def test_http_reload_of_each_attack_is_refused_in_bounded_time(tmp_path):
    """POST /v1/admin/reload with each attack: 409 naming it, /healthz up, the old digest answering."""
    served = tmp_path / "rules"
    shutil.copytree(bundled("rules"), served)
    process, base = _serve(tmp_path, served)
    try:
        digest = httpx.get(f"{base}/readyz").json()["digest"]
        for attack, refusal in _attacks(tmp_path / "attacks"):
            _swap_in(served, attack.directory)
            refused = httpx.post(f"{base}/v1/admin/reload", headers=ADMIN, timeout=REFUSAL_SECONDS)
            assert refused.status_code == 409 and refusal in refused.json()["error"]
            [diagnostic] = refused.json()["diagnostics"]
            assert diagnostic["file"] == f"rules/{hostile.FILE}" and diagnostic["line"] > 0
            assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
            ready = httpx.get(f"{base}/readyz", timeout=5).json()
            assert ready["digest"] == digest and refusal in ready["last_reload_error"]
            _still_serving(base, digest)
    finally:
        stop_server(process)


def test_a_set_slower_than_the_sandbox_limit_is_stopped_while_the_server_answers(tmp_path):
    """A rule set just under the bound of rules (E209) takes far longer than a 2 s sandbox limit: the reload is a
    409 (E207) after ~2 s, and
    /healthz and /v1/recommend answer while the trial runs."""
    served = tmp_path / "rules"
    shutil.copytree(bundled("rules"), served)
    slow = generated_rules_dir(tmp_path / "slow", SLOW_RULES)
    process, base = _serve(tmp_path, served, KENTINO_SANDBOX_SECONDS="2")
    try:
        digest = httpx.get(f"{base}/readyz").json()["digest"]
        _swap_in(served, slow)
        result = {}
        reload = threading.Thread(target=lambda: result.update(
            response=httpx.post(f"{base}/v1/admin/reload", headers=ADMIN, timeout=REFUSAL_SECONDS)))
        reload.start()
        answered = 0
        while reload.is_alive():
            assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
            _still_serving(base, digest)
            answered += 1
            time.sleep(0.2)
        reload.join()
        assert answered > 0
        refused = result["response"]
        assert refused.status_code == 409
        [diagnostic] = refused.json()["diagnostics"]
        assert diagnostic["code"] == "E207" and "did not finish within 2 s" in diagnostic["message"]
        assert "E207" in httpx.get(f"{base}/readyz").json()["last_reload_error"]
        _still_serving(base, digest)
    finally:
        stop_server(process)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_REUSEPORT workers are Linux-only")
def test_sighup_with_two_workers_refuses_each_attack_in_both(tmp_path):
    """`serve --workers 2`, the rules edited into each attack in turn, SIGHUP: both workers refuse (their
    /readyz shows the error), both keep answering with the old rules."""
    served = tmp_path / "rules"
    shutil.copytree(bundled("rules"), served)
    process, base = _serve(tmp_path, served, workers=2)
    try:
        deadline, pids = time.monotonic() + 60, set()
        while len(pids) < 2 and time.monotonic() < deadline:  # SIGHUP only once both workers serve
            with httpx.Client(timeout=10) as client:
                pids.add(client.get(f"{base}/readyz").json()["worker_pid"])
        assert len(pids) == 2
        digest = httpx.get(f"{base}/readyz").json()["digest"]
        for attack, refusal in _attacks(tmp_path / "attacks"):
            _swap_in(served, attack.directory)
            process.send_signal(signal.SIGHUP)
            states = _both_workers(base, lambda state, refusal=refusal: refusal in (state["last_reload_error"] or ""))
            assert all(state["digest"] == digest and state["generation"] == 1 for state in states.values())
            for _ in range(4):
                _still_serving(base, digest)
    finally:
        stop_server(process)


def _both_workers(base, predicate) -> dict:
    """worker pid -> /readyz of each of the two workers, once both meet `predicate` (or the time is up)."""
    deadline, states = time.monotonic() + REFUSAL_SECONDS, {}
    while time.monotonic() < deadline:
        with httpx.Client(timeout=10) as client:  # a new connection each time: both workers are reached
            state = client.get(f"{base}/readyz").json()
        states[state["worker_pid"]] = state
        if len(states) == 2 and all(predicate(s) for s in states.values()):
            return states
        time.sleep(0.1)
    raise AssertionError(f"both workers did not refuse: {states}")


def _sandbox_children(parent_pid: int) -> list[int]:
    """The pids of live `kentino_expert.sandbox` processes started by `parent_pid` (read from /proc)."""
    import os
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as handle:
                parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"kentino_expert.sandbox" in command and parent == parent_pid:
            found.append(int(entry))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_fifo_and_a_stuck_reload_leave_the_server_reloadable_and_stoppable(tmp_path):
    """The attack of 2026-12-05: a FIFO in the served directory hung the reload for good, every later reload and
    SIGHUP with it, and SIGTERM no longer stopped the process. Now: a FIFO is refused at once (HTTP and SIGHUP); a
    reload that cannot finish (a slow set, a long sandbox limit) is given up after KENTINO_RELOAD_SECONDS, said
    in /readyz, while /healthz answers; SIGTERM then stops the server promptly, its sandbox child with it."""
    import os
    served = tmp_path / "rules"
    shutil.copytree(bundled("rules"), served)
    process, base = _serve(tmp_path, served, KENTINO_SANDBOX_SECONDS="120", KENTINO_RELOAD_SECONDS="4")
    try:
        digest = httpx.get(f"{base}/readyz").json()["digest"]
        (served / "advice.yaml").unlink()
        os.mkfifo(served / "advice.yaml")
        start = time.monotonic()
        refused = httpx.post(f"{base}/v1/admin/reload", headers=ADMIN, timeout=REFUSAL_SECONDS)
        assert refused.status_code == 409 and "FIFO" in refused.json()["error"]
        assert time.monotonic() - start < 10
        process.send_signal(signal.SIGHUP)
        time.sleep(1)
        _still_serving(base, digest)
        _swap_in(served, generated_rules_dir(tmp_path / "slow", SLOW_RULES))
        start = time.monotonic()
        given_up = httpx.post(f"{base}/v1/admin/reload", headers=ADMIN, timeout=REFUSAL_SECONDS)
        assert given_up.status_code == 409 and "reload given up after 4 s" in given_up.json()["error"]
        assert time.monotonic() - start < 15
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
        assert "given up" in httpx.get(f"{base}/readyz", timeout=5).json()["last_reload_error"]
        _still_serving(base, digest)
        children = _sandbox_children(process.pid)
        assert children, "the given-up trial's sandbox child should still be running"
        process.terminate()
        start = time.monotonic()
        process.wait(timeout=20)
        assert time.monotonic() - start < 15
        deadline = time.monotonic() + 10  # killed as the server exits; init reaps it
        while any(os.path.exists(f"/proc/{pid}") for pid in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in children if os.path.exists(f"/proc/{pid}")], "a sandbox child outlived the server"
    finally:
        stop_server(process)
