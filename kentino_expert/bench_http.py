"""The HTTP part of the benchmark: a real uvicorn on loopback under a bounded load that stops by itself."""
from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

FINAL = {"task": "inference", "model": "llama-3.1-70b", "concurrency": 48, "context_tokens": 8192,
         "latency": "production", "tenancy": "single", "qps": 20, "tokens_per_s": 1000}
CHAT = {"task": "inference", "model": "llama-3.1-70b"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (the uvicorn workers)."""
    total = 0.0
    pids = [pid] + [int(p) for p in _children(pid)]
    for each in pids:
        try:
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


class Server:
    """`kentino-expert serve` in a subprocess, with a fresh SQLite decision log."""

    def __init__(self, workers: int):
        self.dir = tempfile.mkdtemp(prefix="kentino-bench-")
        self.port = _free_port()
        env = dict(os.environ, KENTINO_DB=str(Path(self.dir) / "decisions.db"))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kentino_expert", "serve", "--port", str(self.port), "--workers", str(workers),
             "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the server did not become ready in 60 s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def load(url: str, clients: int, requests: int, facts: dict, max_seconds: float = 120) -> dict:
    """`clients` threads send `requests` POSTs in all (or stop at `max_seconds`)."""
    latencies, errors, lock = [], [0], threading.Lock()
    remaining = [requests]
    deadline = time.perf_counter() + max_seconds

    def client():
        with httpx.Client(base_url=url, timeout=30) as http:
            while time.perf_counter() < deadline:
                with lock:
                    if remaining[0] <= 0:
                        return
                    remaining[0] -= 1
                start = time.perf_counter()
                response = http.post("/v1/recommend", json=facts)
                elapsed = (time.perf_counter() - start) * 1000
                with lock:
                    latencies.append(elapsed)
                    errors[0] += response.status_code != 200

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    latencies.sort()
    return {"clients": clients, "requests": len(latencies), "errors": errors[0], "rps": len(latencies) / wall,
            "p50_ms": statistics.median(latencies), "p99_ms": latencies[int(len(latencies) * 0.99) - 1]}


def http_section(quick: bool = False) -> list[dict]:
    rows = []
    for workers in (1, 2):
        server = Server(workers)
        try:
            for clients in (1, 16, 64):
                for name, facts in (("final", FINAL), ("chat", CHAT)):
                    row = load(server.url, clients, 100 if quick else 1000, facts)
                    rows.append({"workers": workers, "facts": name, **row, "server_rss_mb": _rss_mb(server.process.pid)})
        finally:
            server.stop()
    return rows
