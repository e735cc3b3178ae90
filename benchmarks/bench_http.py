"""The HTTP part of the benchmark: a real uvicorn on loopback under a bounded load that stops by itself."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from .workloads import CHAT, FINAL, unique_chat, unique_final


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
        self._wait_for_workers(workers)

    def _wait_for_workers(self, workers: int, seconds: float = 60) -> None:
        """Until every worker answers /readyz: connections opened earlier would all go to the first one."""
        deadline, seen = time.time() + seconds, set()
        while time.time() < deadline:
            try:
                with httpx.Client(timeout=1) as client:  # a new connection each time
                    response = client.get(self.url + "/readyz")
                if response.status_code == 200:
                    seen.add(response.json().get("worker_pid"))
                    if len(seen) >= workers:
                        return
                    continue
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{len(seen)} of {workers} workers became ready in {seconds:g} s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _request_bytes(port: int, facts: dict) -> bytes:
    body = json.dumps(facts).encode()
    head = (f"POST /v1/recommend HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


async def _exchange(reader, writer, request: bytes) -> int:
    """Send one request on a kept-alive connection and read the whole response; return its status."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return status


async def _load(port: int, clients: int, requests: int, facts_for, max_seconds: float):
    latencies, errors, issued = [], [0], [0]
    deadline = time.perf_counter() + max_seconds

    async def client():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while issued[0] < requests and time.perf_counter() < deadline:
                index = issued[0]
                issued[0] += 1
                request = _request_bytes(port, facts_for(index))
                start = time.perf_counter()
                try:
                    status = await _exchange(reader, writer, request)
                except (OSError, asyncio.IncompleteReadError):
                    errors[0] += 1
                    return
                latencies.append((time.perf_counter() - start) * 1000)
                errors[0] += status != 200
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, errors[0], time.perf_counter() - start


def load(port: int, clients: int, requests: int, facts_for, max_seconds: float = 120) -> dict:
    """`clients` kept-alive connections send `requests` POSTs in all, then stop (or at `max_seconds`).

    One asyncio thread with raw HTTP/1.1 keeps the load generator's own CPU small (a thread per
    client with an HTTP library took as much CPU as the server on a two-core machine).
    """
    latencies, errors, wall = asyncio.run(_load(port, clients, requests, facts_for, max_seconds))
    latencies.sort()
    return {"clients": clients, "requests": len(latencies), "errors": errors, "rps": len(latencies) / wall,
            "p50_ms": statistics.median(latencies) if latencies else float("nan"),
            "p99_ms": latencies[max(0, int(len(latencies) * 0.99) - 1)] if latencies else float("nan")}


def final_facts(index: int) -> dict:
    """Every fact known: no questions, status final."""
    return FINAL


def chat_facts(index: int) -> dict:
    """A conversation's first turn, the same each time (its what-if probes hit the cache)."""
    return CHAT


FACT_MIXES = {"final": final_facts, "final-unique": unique_final, "chat": chat_facts, "chat-unique": unique_chat}


def http_section(quick: bool = False) -> list[dict]:
    """Requests/s and latency for each mix of facts, at 1, 16 and 64 clients, with 1 and 2 workers."""
    rows = []
    for workers in (1, 2):
        server = Server(workers)
        try:
            for clients in (1, 16, 64):
                for name, facts_for in FACT_MIXES.items():
                    count = (100 if quick else 2000) // (4 if name == "chat-unique" else 1)
                    row = load(server.port, clients, count, facts_for)
                    rows.append({"workers": workers, "facts": name, **row,
                                 "server_rss_mb": _rss_mb(server.process.pid)})
                    print(f"  {rows[-1]}", file=sys.stderr, flush=True)
        finally:
            server.stop()
    return rows


def server_memory(requests: int) -> list[dict]:
    """Server RSS as a one-worker server answers `requests` decisions with new facts each (caches churn)."""
    server, rows, done = Server(1), [], 0
    try:
        for mark in (requests // 10, requests // 2, requests):
            load(server.port, 16, mark - done, unique_final, max_seconds=3600)
            done = mark
            rows.append({"requests": done, "server_rss_mb": _rss_mb(server.process.pid)})
            print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    finally:
        server.stop()
    return rows
