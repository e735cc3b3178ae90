"""Decision-log write latency beside reads: record() alone, then while other threads list 1,000 decisions
over and over (the finding of issue 12: 2.9 ms alone, 547 ms during a listing, one connection behind one lock).

`python -m benchmarks.log_latency postgresql://user@host/db [--records 300] [--readers 2]` (or a SQLite path)
makes a scratch schema (PostgreSQL) or file, fills it with 5,000 decisions (each with a full answer), prints
median, p90, p99 and max of record() in both phases, and how many listings ran, then drops the scratch data.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from kentino_expert.decisions.connect import open_log

FACTS = {"task": "inference", "model": "llama-3.1-70b", "concurrency": 48, "context_tokens": 8192}


def real_answer() -> dict:
    """A full answer of the bundled rules (about 10 KB of JSON): what each logged row holds."""
    from kentino_expert.expert import Expert
    expert = Expert()
    try:
        return expert.recommend(FACTS).model_dump(mode="json")
    finally:
        expert.close()


@contextmanager
def scratch_target(target: str):
    """A log target nobody else uses: a new PostgreSQL schema (dropped after) or a file in a temporary directory."""
    if "://" not in target:
        with tempfile.TemporaryDirectory() as directory:
            yield str(Path(directory) / "bench.db")
        return
    import psycopg
    schema = f"kentino_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{target}{'&' if '?' in target else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _timed_records(log, answer: dict, count: int) -> list[float]:
    seconds = []
    for _ in range(count):
        start = time.perf_counter()
        log.record(FACTS, answer, "http")
        seconds.append(time.perf_counter() - start)
    return seconds


def _summary(seconds: list[float]) -> dict:
    ordered = sorted(seconds)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return {"records": len(seconds), "median_ms": round(statistics.median(ordered) * 1000, 2),
            "p90_ms": round(pick(0.90), 2), "p99_ms": round(pick(0.99), 2), "max_ms": round(ordered[-1] * 1000, 2)}


def measure(target: str, records: int, readers: int) -> dict:
    answer = real_answer()
    facts_text, answer_text = json.dumps(FACTS), json.dumps(answer)
    with scratch_target(target) as scratch:
        log = open_log(scratch)
        try:
            for _ in range(50):  # 5,000 full rows to list, in batches of 100
                log._insert_many([{"decision_id": uuid.uuid4().hex, "created_at": "2025-01-01T00:00:00.000000+00:00",
                                   "source": "cli", "facts": facts_text, "answer": answer_text,
                                   "kind": "single-node", "digest": "d" * 64, "engine": "bench", "status": "final",
                                   "summary": "s"} for _ in range(100)])
            _timed_records(log, answer, 20)  # warm the connections
            alone = _timed_records(log, answer, records)
            stop, listings = threading.Event(), [0]

            def list_again():
                while not stop.is_set():
                    assert len(log.list(limit=1000)) == 1000
                    listings[0] += 1
            threads = [threading.Thread(target=list_again, daemon=True) for _ in range(readers)]
            for thread in threads:
                thread.start()
            time.sleep(0.2)
            during = _timed_records(log, answer, records)
            stop.set()
            for thread in threads:
                thread.join(60)
        finally:
            log.close()
    return {"alone": _summary(alone), "during_listings": {**_summary(during), "listings_of_1000": listings[0],
                                                          "listing_threads": readers}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", help="postgresql:// URL or SQLite path")
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--readers", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(measure(args.target, args.records, args.readers), indent=2))


if __name__ == "__main__":
    main()
