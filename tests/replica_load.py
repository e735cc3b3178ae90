"""A bounded load for the replica tests: client threads POSTing /v1/recommend through the proxy, each request's
start, end and outcome recorded, and the latency figures of any slice of them."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import httpx

PUBLIC_HOST = "expert.test"  # the name clients use; the replicas allow it besides localhost (the checks' Host)
WORKLOADS = [
    {"task": "inference", "model": "llama-3.1-70b"},
    {"task": "inference", "model": "llama-3.1-405b", "latency": "interactive", "concurrency": 64},
    {"task": "full-finetune", "model": "llama-3.1-70b", "training_tokens": "300B", "deadline_days": 30},
    {"task": "batch-inference", "model": "qwen2.5-72b", "corpus_tokens": "50B", "deadline_days": 7},
    {"task": "inference", "model": "llama-3.1-70b", "tenancy": "multi", "qps": 150000},
    {"task": "qlora", "model": "llama-3.1-405b"},
]


@dataclass(frozen=True)
class Request:
    """One POST /v1/recommend of the load: when it started and ended, and what came back."""

    start: float
    end: float
    status: int | None
    decision_id: str | None
    error: str | None
    digest: str | None = None  # the rule set that answered

    @property
    def acknowledged(self) -> bool:
        return self.status == 200 and self.decision_id is not None

    def in_flight(self, since: float, until: float) -> bool:
        """Started before `until` and not finished before `since`: it overlapped [since, until]."""
        return self.start <= until and self.end >= since


class Load:
    """`threads` clients POSTing /v1/recommend through the proxy, each at most `per_thread` requests and no
    later than `seconds` after start; stop() ends it earlier. Each client keeps one keep-alive connection."""

    def __init__(self, base_url: str, session_prefix: str, threads: int = 8, per_thread: int = 2000,
                 seconds: float = 20.0):
        self.base_url, self.prefix = base_url, session_prefix
        self.threads_wanted, self.per_thread, self.seconds = threads, per_thread, seconds
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.deadline = 0.0

    def start(self) -> None:
        self.deadline = time.monotonic() + self.seconds
        self._threads = [threading.Thread(target=self._client, args=(i,), daemon=True)
                         for i in range(self.threads_wanted)]
        for thread in self._threads:
            thread.start()

    def _client(self, index: int) -> None:
        with httpx.Client(base_url=self.base_url, headers={"Host": PUBLIC_HOST}, timeout=15) as client:
            for turn in range(self.per_thread):
                if self._stop.is_set() or time.monotonic() > self.deadline:
                    return
                facts = {**WORKLOADS[(index + turn) % len(WORKLOADS)], "session_id": f"{self.prefix}-{index}",
                         "turn": turn}
                self._record(self._post(client, facts))

    @staticmethod
    def _post(client: httpx.Client, facts: dict) -> Request:
        start = time.monotonic()
        try:
            response = client.post("/v1/recommend", json=facts)
        except httpx.HTTPError as exc:
            return Request(start, time.monotonic(), None, None, f"{type(exc).__name__}: {exc}")
        end = time.monotonic()
        if response.status_code == 200:
            body = response.json()
            return Request(start, end, 200, body.get("decision_id"), None, (body.get("ruleset") or {}).get("digest"))
        return Request(start, end, response.status_code, None, response.text[:200])

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def snapshot(self) -> list[Request]:
        with self._lock:
            return list(self.requests)

    def acknowledged_after(self, moment: float) -> int:
        return sum(1 for r in self.snapshot() if r.acknowledged and r.start >= moment)

    def running(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def stop(self, seconds: float = 30) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=seconds)
        assert not self.running(), "a load client did not finish within its timeout"


def percentile(values: list[float], fraction: float) -> float | None:
    """The nearest-rank percentile of `values` (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * fraction // 1))
    return ordered[int(rank) - 1]


def latency_ms(requests: list[Request]) -> dict:
    """Count, p50 and p99 of the requests' latencies in milliseconds."""
    seconds = [r.end - r.start for r in requests]
    p50, p99 = percentile(seconds, 0.50), percentile(seconds, 0.99)
    return {"requests": len(seconds), "p50_ms": None if p50 is None else round(p50 * 1000, 1),
            "p99_ms": None if p99 is None else round(p99 * 1000, 1)}
