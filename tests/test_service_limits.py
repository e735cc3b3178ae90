"""A real `kentino-expert serve` under hostile connections: oversized heads (431), trickled heads and bodies
(408, closed), log readers beside decisions, a slow decision beside /healthz, and the workers' reload marker."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx", reason="the live tests drive the server with httpx")
uvicorn = pytest.importorskip("uvicorn", reason="the live tests need uvicorn")

from kentino_expert.answer.cache import AnswerCache  # noqa: E402
from kentino_expert.decisions.connect import open_log  # noqa: E402
from kentino_expert.expert import Expert  # noqa: E402
from kentino_expert.service.app import create_app  # noqa: E402
from kentino_expert.service.http_limits import HttpLimits, server_config  # noqa: E402
from live_server import start_serve, stop_server  # noqa: E402
from ports import free_port  # noqa: E402

CHAT = {"task": "inference", "model": "llama-3.1-70b"}
ATTACK_SECONDS = 30  # the hard limit on any one attack; the server's own timeouts here are 1 s


def _rss_mb(pid: int) -> float:
    total = 0.0
    for each in [pid] + _children(pid):
        with suppress(OSError, StopIteration):
            total += next(int(line.split()[1]) for line in Path(f"/proc/{each}/status").read_text().splitlines()
                          if line.startswith("VmRSS:")) / 1024
    return total


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@contextmanager
def serving(tmp_path, *options, env=None, workers: int = 1):
    """`kentino-expert serve` on a free port with 1 s read timeouts; yields (process, port)."""
    process, port = start_serve(tmp_path, "--db", str(tmp_path / "limits.db"), "--workers", str(workers),
                                "--header-timeout", "1", "--body-timeout", "1", *options, env=env)
    try:
        yield process, port
    finally:
        stop_server(process)


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=ATTACK_SECONDS)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _reply(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or the hard attack limit)."""
    chunks, deadline = [], time.monotonic() + ATTACK_SECONDS
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _trickle(port: int, start: bytes, byte: bytes) -> tuple[bytes, float]:
    """Send `start`, then one `byte` every 0.2 s until the server answers or closes; (reply, seconds)."""
    sock, began = _connect(port), time.monotonic()
    with sock:
        sock.sendall(start)
        sock.settimeout(0.2)
        while time.monotonic() - began < ATTACK_SECONDS:
            try:
                first = sock.recv(65536)
            except TimeoutError:
                try:
                    sock.sendall(byte)
                except OSError:  # closed by the server between two bytes
                    return b"", time.monotonic() - began
                continue
            except ConnectionResetError:
                return b"", time.monotonic() - began
            sock.settimeout(ATTACK_SECONDS)
            return first + (_reply(sock) if first else b""), time.monotonic() - began
    raise AssertionError(f"a trickling connection was still open after {ATTACK_SECONDS} s")


MALFORMED = [  # a Content-Length that is no number, a chunk size that is no hex number, no request line
    b"POST /v1/recommend HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    b"Content-Length: abc\r\n\r\n{}",
    b"POST /v1/recommend HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    b"GARBAGE\r\n\r\n",
]


def test_malformed_framing_is_the_api_json_400(tmp_path):
    """A request httptools cannot parse gets a 400 with the API's {detail: [{field, message}]} body, and the
    connection is closed."""
    with serving(tmp_path) as (_, port):
        for request_bytes in MALFORMED:
            with _connect(port) as sock:
                sock.sendall(request_bytes)
                reply = _reply(sock)
            head, _, body = reply.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 400 ") and b"content-type: application/json" in head.lower(), reply
            assert json.loads(body)["detail"][0]["field"] == "request"


def test_oversized_heads_are_431_and_memory_stays_flat(tmp_path):
    """A 100 KB header and 150 header fields are 431; a client pushing a 50 MB header is cut off early."""
    with serving(tmp_path) as (process, port):
        with _connect(port) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n")
            reply = _reply(sock)
        assert reply.startswith(b"HTTP/1.1 431 ") and b'"field":"headers"' in reply
        with _connect(port) as sock:
            fields = b"".join(b"X-F%d: 1\r\n" % n for n in range(150))
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + fields + b"\r\n")
            assert _reply(sock).startswith(b"HTTP/1.1 431 ")
        before, sent = _rss_mb(process.pid), 0
        with _connect(port) as sock:
            try:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ")
                while sent < 50 * 2**20:
                    sock.sendall(b"a" * 65536)
                    sent += 65536
            except OSError:  # the server closed the connection under the client's feet
                pass
        assert sent < 50 * 2**20, "the server read a 50 MB header to its end"
        assert _rss_mb(process.pid) - before < 40
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200


def test_trickled_head_body_and_idle_connections_are_closed(tmp_path):
    """A head or a body sent a byte at a time is answered 408 and closed; a silent connection is closed."""
    with serving(tmp_path) as (_, port):
        reply, _ = _trickle(port, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ", b"a")
        assert reply.startswith(b"HTTP/1.1 408 ") and b'"field":"headers"' in reply
        head = (b"POST /v1/recommend HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100000\r\n\r\n{")
        reply, _ = _trickle(port, head, b" ")
        assert reply.startswith(b"HTTP/1.1 408 ") and b'"field":"body"' in reply
        with _connect(port) as sock:
            assert _reply(sock) == b""
        assert httpx.post(f"http://127.0.0.1:{port}/v1/recommend", json=CHAT, timeout=30).status_code == 200


def test_many_trickling_connections_do_not_stop_the_service(tmp_path):
    """Forty connections trickling heads are all closed, and a decision made meanwhile is answered."""
    with serving(tmp_path) as (_, port):
        results = []
        threads = [threading.Thread(target=lambda: results.append(_trickle(port, b"GET / HTTP/1.1\r\nHost: x", b"x")))
                   for _ in range(40)]
        for thread in threads:
            thread.start()
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/recommend", json=CHAT, timeout=ATTACK_SECONDS)
        for thread in threads:
            thread.join(ATTACK_SECONDS + 5)
        assert answer.status_code == 200 and len(results) == 40


def test_decisions_complete_while_readers_hammer_the_log(tmp_path):
    """With 40 clients looping over GET /v1/decisions at its largest page, decisions are still answered and logged."""
    with serving(tmp_path, env={"KENTINO_READ_TOKEN": "reader"}) as (_, port):
        base, token = f"http://127.0.0.1:{port}", {"authorization": "Bearer reader"}
        with httpx.Client(base_url=base, timeout=ATTACK_SECONDS) as client:
            for n in range(300):
                client.post("/v1/recommend", json={**CHAT, "concurrency": 1000 + n}).raise_for_status()
        stop, reads = threading.Event(), []

        def reader():
            with httpx.Client(base_url=base, timeout=120, headers=token) as client:
                while not stop.is_set():
                    reads.append(client.get("/v1/decisions", params={"limit": 200}).status_code)

        threads = [threading.Thread(target=reader) for _ in range(40)]
        for thread in threads:
            thread.start()
        try:
            while len(reads) < 40:  # the readers are all running
                time.sleep(0.05)
            with httpx.Client(base_url=base, timeout=ATTACK_SECONDS) as client:
                answers = [client.post("/v1/recommend", json={**CHAT, "session_id": "beside-readers", "turn": n})
                           for n in range(5)]
        finally:
            stop.set()
            for thread in threads:
                thread.join(120)
        assert [a.status_code for a in answers] == [200] * 5 and set(reads) == {200}
        listed = httpx.get(f"{base}/v1/decisions", params={"limit": 5}, headers=token, timeout=30).json()
        assert {d["session_id"] for d in listed["decisions"]} == {"beside-readers"}


class _BlockingCache(AnswerCache):
    """An answer cache whose lookups wait until released: a decision that takes as long as the test likes."""

    def __init__(self):
        super().__init__()
        self.entered, self.release = threading.Event(), threading.Event()

    def get(self, facts, evaluate):
        self.entered.set()
        self.release.wait(ATTACK_SECONDS * 2)
        return super().get(facts, evaluate)


def test_a_slow_decision_does_not_hold_the_event_loop(tmp_path):
    """While one decision is stuck, /healthz and /readyz answer and another connection is served."""
    expert = Expert()
    expert.answer_cache = cache = _BlockingCache()
    port = free_port()
    app = create_app(expert_factory=lambda: expert, log=open_log(tmp_path / "slow.db"))
    server = uvicorn.Server(server_config(app, HttpLimits(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        slow = {}
        decider = threading.Thread(target=lambda: slow.update(
            response=httpx.post(f"http://127.0.0.1:{port}/v1/recommend", json=CHAT, timeout=ATTACK_SECONDS * 3)))
        decider.start()
        assert cache.entered.wait(ATTACK_SECONDS), "the decision never started"
        try:  # the hard limit: on the event loop, the stuck decision would hold these for a minute
            health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
            ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10)
        finally:
            cache.release.set()
        decider.join(ATTACK_SECONDS)
        assert health.status_code == 200 and ready.json()["ready"]
        assert slow["response"].status_code == 200 and slow["response"].json()["decision_id"]
    finally:
        cache.release.set()
        server.should_exit = True
        thread.join(30)


@pytest.mark.parametrize("options, message", [
    (["--host", "0.0.0.0"], "is not a loopback address"),
    (["--allowed-host", "http://api.example.com"], "not a host name")])
def test_serve_refuses_a_missing_or_bad_host_allowlist(tmp_path, options, message):
    """A non-loopback bind needs --allowed-host; a URL is not a host name: one line, exit 2, nothing served."""
    result = subprocess.run([sys.executable, "-m", "kentino_expert", "serve", "--port", str(free_port()),
                             "--db", str(tmp_path / "x.db"), *options], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.db").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_REUSEPORT workers are Linux-only")
def test_workers_enforce_limits_and_a_killed_supervisor_leaves_nothing(tmp_path):
    """`serve --workers 2` answers 431 from every worker; after SIGKILL of the supervisor the workers exit
    and nothing is left in the temporary directory."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with serving(tmp_path, env={"TMPDIR": str(scratch)}, workers=2) as (process, port):
        pids = set()
        for _ in range(8):
            with httpx.Client(timeout=10) as client:  # a new connection each time: the kernel spreads them
                pids.add(client.get(f"http://127.0.0.1:{port}/readyz").json()["worker_pid"])
            with _connect(port) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n")
                assert _reply(sock).startswith(b"HTTP/1.1 431 ")
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        deadline = time.monotonic() + ATTACK_SECONDS
        while any(Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
                  for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert list(scratch.iterdir()) == []


def test_a_worker_builds_its_app_before_it_takes_connections(monkeypatch):
    """A (re)starting worker of `serve --workers N` builds its app before its socket listens: a socket listening
    first took its share of new connections and held them unanswered while the rules were built (a replacement
    worker stalled requests up to 3.8 s after another was killed, and a proxy's health check timed out on it)."""
    from kentino_expert.service import workers

    events = []

    class Socket:
        def listen(self, backlog):
            events.append("listen")

    class Server:
        def __init__(self, config):
            self.config = config

        def run(self, sockets):
            events.append("serve" if self.config.loaded else "serve, the app not built")

    def load(config):
        events.append("build the app")
        config.loaded = True

    monkeypatch.setattr(workers, "_die_with_parent", lambda: None)
    monkeypatch.setattr(workers.signal, "signal", lambda *args: None)
    monkeypatch.setattr(workers, "_socket", lambda host, port: Socket())
    monkeypatch.setattr(workers.uvicorn, "Server", Server)
    monkeypatch.setattr(workers.uvicorn.Config, "load", load)
    workers._worker("127.0.0.1", 0, "warning", os.getppid(), workers.DEFAULTS)
    assert events == ["build the app", "listen", "serve"]


def test_the_supervisor_says_when_a_dead_workers_queue_is_reset(tmp_path):
    """With net.ipv4.tcp_migrate_req at 0 the kernel resets the connections a dead worker had queued (measured: 1-3
    failed requests per killed worker behind HAProxy): the supervisor's start says so and names the fix, which
    deploy/sysctl.d/60-kentino-expert.conf applies; at 1, or where the setting does not exist, it says nothing."""
    from kentino_expert.service.workers import MIGRATE_ADVICE, queue_migration_off

    setting = tmp_path / "tcp_migrate_req"
    setting.write_text("0\n")
    assert queue_migration_off(setting) and "tcp_migrate_req" in MIGRATE_ADVICE
    setting.write_text("1\n")
    assert not queue_migration_off(setting) and not queue_migration_off(tmp_path / "missing")
    shipped = Path(__file__).resolve().parent.parent / "deploy" / "sysctl.d" / "60-kentino-expert.conf"
    assert "net.ipv4.tcp_migrate_req = 1" in shipped.read_text().splitlines()
