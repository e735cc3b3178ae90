"""Group commit of the decision log: concurrent rows share transactions, and errors reach the right callers."""
from __future__ import annotations

import threading
import time

import pytest

from kentino_expert.decisions.connect import open_log
from kentino_expert.decisions.groupcommit import GroupCommit
from kentino_expert.errors import DecisionLogError


def _run_concurrently(count: int, target) -> list:
    results = [None] * count
    start = threading.Barrier(count)

    def worker(index):
        start.wait()
        try:
            results[index] = ("ok", target(index))
        except DecisionLogError as exc:
            results[index] = ("error", str(exc))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def test_concurrent_rows_share_transactions():
    """Rows queued while a slow transaction runs are committed together in the next one."""
    committed = []

    def slow_write(rows):
        time.sleep(0.05)
        committed.append(list(rows))

    group = GroupCommit(slow_write)
    results = _run_concurrently(12, lambda i: group.commit(i))
    assert all(r == ("ok", None) for r in results)
    assert sorted(row for batch in committed for row in batch) == list(range(12))
    assert len(committed) < 12  # with one row per transaction this would be 12
    assert group.rows == 12 and group.batches == len(committed)


@pytest.mark.parametrize("error, shown", [
    (DecisionLogError("row 3 does not fit"), "row 3 does not fit"),
    # not only the log's own error: whatever a batch raises, its rows are retried one by one
    (OverflowError("Python int too large to convert to SQLite INTEGER"), "OverflowError"),
])
def test_a_bad_row_fails_alone(error, shown):
    """A batch that fails is retried row by row: only the caller of the bad row gets the error."""
    committed = []

    def write(rows):
        time.sleep(0.02)
        if 3 in rows:
            raise error
        committed.extend(rows)

    group = GroupCommit(write)
    results = _run_concurrently(8, lambda i: group.commit(i))
    assert results[3][0] == "error" and shown in results[3][1]
    assert all(results[i] == ("ok", None) for i in range(8) if i != 3)
    assert sorted(committed) == [0, 1, 2, 4, 5, 6, 7]


def test_an_unexpected_failure_acknowledges_nothing():
    """A bug in the writer becomes a DecisionLogError for every caller of the batch, never a silent ack."""
    def broken(rows):
        raise RuntimeError("disk on fire")

    group = GroupCommit(broken)
    with pytest.raises(DecisionLogError, match="disk on fire"):
        group.commit("row")


def test_sqlite_log_under_threads_keeps_every_acknowledged_id(tmp_path):
    """32 threads recording at once into SQLite: every id returned is stored, each exactly once."""
    log = open_log(tmp_path / "decisions.db")
    answer = {"recommendation": {"kind": "single-node"}, "ruleset": {"digest": "d" * 64, "engine": "test"}}
    results = _run_concurrently(32, lambda i: log.record({"task": "inference", "n": i}, answer, "http"))
    ids = [value for status, value in results if status == "ok"]
    assert len(ids) == 32
    assert {row["decision_id"] for row in log.list(limit=100)} == set(ids)
    assert log._committer.rows == 32
    log.close()


def test_sqlite_write_waits_for_another_process_lock(tmp_path):
    """A record made while another connection holds the write lock waits for it, then commits; past the limit it
    fails cleanly."""
    import sqlite3
    log = open_log(tmp_path / "decisions.db")
    answer = {"recommendation": {"kind": "single-node"}, "ruleset": {"digest": "d" * 64, "engine": "test"}}
    other = sqlite3.connect(tmp_path / "decisions.db", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # what a second worker process holds while it commits
    release = threading.Timer(0.05, lambda: other.execute("COMMIT"))
    release.start()
    started = time.monotonic()
    decision_id = log.record({"task": "inference"}, answer, "http")
    assert time.monotonic() - started >= 0.04 and log.get(decision_id) is not None
    release.join()
    other.execute("BEGIN IMMEDIATE")
    log.busy_seconds = 0.05
    with pytest.raises(DecisionLogError, match="locked"):
        log.record({"task": "inference"}, answer, "http")
    other.execute("ROLLBACK")
    assert len(log.list(limit=10)) == 1
    other.close()
    log.close()





def test_sqlite_bad_row_among_concurrent_rows_fails_alone(tmp_path):
    """Through the real SQLite log: an unbindable turn fails its own caller; the rest commit, the log stays writable."""
    log = open_log(tmp_path / "decisions.db")
    template = {"created_at": "2025-01-01T00:00:00+00:00", "session_id": "s", "source": "http", "facts": "{}",
                "answer": "{}", "kind": "single-node", "digest": "d", "engine": "e"}

    def commit(i):
        return log._group_commit().commit({**template, "decision_id": f"id{i}", "turn": 2**70 if i == 5 else i})

    results = _run_concurrently(16, commit)
    assert results[5][0] == "error" and "not recorded" in results[5][1]
    assert all(results[i] == ("ok", None) for i in range(16) if i != 5)
    assert len(log.list(limit=100)) == 15 and log.writable()
    log.close()


def test_an_unavailable_log_fails_the_batch_without_retrying_each_row():
    """A log locked past its wait (or closed, or unreachable) fails the whole batch once: retrying each
    row alone would make every caller wait the timeout again, once per row."""
    from kentino_expert.errors import LogUnavailable
    calls = []

    def write(rows):
        calls.append(len(rows))
        time.sleep(0.02)
        raise LogUnavailable("decision log x: database is locked")

    group = GroupCommit(write)
    results = _run_concurrently(8, lambda i: group.commit(i))
    assert all(r[0] == "error" and "database is locked" in r[1] for r in results), results
    assert len(calls) == group.batches and sum(calls) == 8  # one write per batch, none per row
