"""The PostgreSQL log's connection pools (psycopg_pool) on the real server (KENTINO_TEST_PG_URL): a write proceeds
while every read connection is busy in the server, a connection the server dropped is replaced, a log cut off
from its server fails at once and comes back by itself, and the group commit still batches."""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from kentino_expert.decisions import postgres
from kentino_expert.decisions.connect import open_log
from kentino_expert.errors import DecisionLogError, LogUnavailable
from replica_harness import CuttableLink, url_via, wait_until

ANSWER = {"status": "final", "recommendation": {"kind": "single-node", "summary": "Buy one node."},
          "ruleset": {"digest": "d" * 64, "engine": "test"}}
LOCK_KEY = 734_001  # an advisory lock the test holds to keep reads waiting in the server


@pytest.fixture
def pg_log(pg_target):
    """A PostgreSQL log in a schema of its own."""
    log = open_log(pg_target)
    yield log
    log.close()


def _in_thread(work) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = work()
        except Exception as exc:  # noqa: BLE001 - reported by the test
            outcome["error"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_a_record_completes_while_every_read_runs_in_the_server(pg_log, pg_target):
    """With each read connection inside a statement the server keeps waiting (on an advisory lock the test holds),
    record() still commits: reads and writes use separate pools. The reads finish once the lock is released."""
    import psycopg
    with psycopg.connect(pg_target, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
        reads = [_in_thread(lambda: pg_log._read("SELECT pg_advisory_lock_shared(%s)", [LOCK_KEY]))
                 for _ in range(postgres.READERS)]
        wait_until(lambda: holder.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                          "AND NOT granted").fetchone()[0] == postgres.READERS, 20,
                   "every read waiting in the server")
        write, outcome = _in_thread(lambda: pg_log.record({"task": "inference"}, ANSWER, "http"))
        write.join(30)
        assert not write.is_alive() and "error" not in outcome, outcome
        assert all(thread.is_alive() for thread, _ in reads), "a read finished while the lock was held"
        holder.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])
    for thread, result in reads:
        thread.join(30)
        assert not thread.is_alive() and "error" not in result, result
    assert pg_log.get(outcome["value"])["kind"] == "single-node"


def test_connections_the_server_dropped_are_replaced(pg_log, pg_target):
    """After the server terminates every connection of the log, the next record and read succeed on new ones."""
    import psycopg
    pg_log.record({"task": "inference"}, ANSWER, "http")
    pg_log.list()
    with psycopg.connect(pg_target, autocommit=True) as admin:
        killed = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                               "AND application_name = ''").fetchone()[0]
    assert killed >= 2
    decision_id = pg_log.record({"task": "inference"}, ANSWER, "http")
    assert pg_log.get(decision_id) is not None and pg_log.writable()


def _log_through_link(pg_target: str):
    """(a CuttableLink to the test server, a log opened through it)."""
    from urllib.parse import urlsplit
    parts = urlsplit(pg_target)
    link = CuttableLink((parts.hostname, parts.port or 5432))
    link.mend()
    return link, open_log(url_via(pg_target, link.port))


def test_a_log_cut_off_from_its_server_fails_at_once_and_comes_back(pg_target):
    """Through a link that is then cut, writes fail (LogUnavailable after the first, which finds the connection
    lost) within a second each and readiness says no; once the link is mended the pool reconnects by itself."""
    link, log = _log_through_link(pg_target)
    try:
        log.record({"task": "inference"}, ANSWER, "http")
        link.cut()
        with pytest.raises(DecisionLogError):
            log.record({"task": "inference"}, ANSWER, "http")
        started = time.monotonic()
        with pytest.raises(LogUnavailable):
            log.record({"task": "inference"}, ANSWER, "http")
        failed_in = time.monotonic() - started
        assert not log.writable()
        link.mend()
        wait_until(log.writable, 30, "the log writable again after the link is mended", interval=0.2)
        assert log.get(log.record({"task": "inference"}, ANSWER, "http")) is not None
    finally:
        log.close()
        link.cut()
    assert failed_in < 5, f"a write to an unreachable log took {failed_in:.1f} s"  # a hang, not a timing target


def test_concurrent_records_still_share_transactions(pg_log):
    """Sixteen threads recording at once commit every row, in fewer transactions than rows (the group commit)."""
    start = threading.Barrier(16)
    ids: list[str] = []

    def record_some():
        start.wait()
        for _ in range(10):
            ids.append(pg_log.record({"task": "inference"}, ANSWER, "http", session_id=uuid.uuid4().hex))
    threads = [threading.Thread(target=record_some) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    committer = pg_log._group_commit()
    assert len(set(ids)) == 160 and len(pg_log.list(limit=200)) == 160
    assert committer.rows == 160 and committer.batches < 160


def test_a_locked_table_fails_records_and_readiness_instead_of_holding_them(pg_target, monkeypatch):
    """While another session holds the table's ACCESS EXCLUSIVE lock (VACUUM FULL, ALTER TABLE), readiness says
    no and a record fails with DecisionLogError once the statement limit passes, instead of waiting for the lock."""
    import psycopg
    monkeypatch.setattr(postgres, "WRITE_STATEMENT_SECONDS", 0.5, raising=False)
    log = open_log(pg_target)
    try:
        assert log.writable()
        with psycopg.connect(pg_target) as locker:
            locker.execute("LOCK TABLE decisions IN ACCESS EXCLUSIVE MODE")  # held until this transaction ends
            assert not log.writable()
            write, outcome = _in_thread(lambda: log.record({"task": "inference"}, ANSWER, "http"))
            write.join(60)
            finished = not write.is_alive()
            locker.rollback()
        write.join(60)
        assert finished, "a record waited for the table lock instead of failing"
        assert isinstance(outcome.get("error"), DecisionLogError), outcome
        assert "statement timeout" in str(outcome["error"])
        assert log.writable() and log.get(log.record({"task": "inference"}, ANSWER, "http")) is not None
    finally:
        log.close()


def test_a_statement_limit_the_url_sets_is_kept(pg_target):
    """A statement_timeout the operator put in the URL's options is the one the log's connections use."""
    log = open_log(pg_target.replace("options=", "options=-cstatement_timeout%3D1234%20"))
    try:
        with log.writer("test") as conn:
            assert conn.execute("SHOW statement_timeout").fetchone()[0] == "1234ms"
        with log.reader() as conn:
            assert conn.execute("SHOW statement_timeout").fetchone()[0] == "1234ms"
    finally:
        log.close()


def test_connections_find_a_silent_peer_dead_unless_the_url_says_otherwise(pg_target):
    """Every connection of the log has TCP keepalives and a limit on unacknowledged data, so a peer dropped
    without a word (a NAT's idle timeout) fails a request instead of holding it; a setting the URL gives wins."""
    log = open_log(f"{pg_target}&keepalives_idle=7")
    try:
        for take in (lambda: log.writer("test"), log.reader):
            with take() as conn:
                given = conn.info.get_parameters()
                assert (given["keepalives"], given["tcp_user_timeout"], given["keepalives_idle"]) == ("1", "30000", "7")
    finally:
        log.close()


def test_the_listener_reads_the_active_set_again_without_a_notification(pg_target):
    """A LISTEN connection that hears nothing (a NAT dropped it silently) does not leave a replica on an old rule
    set for good: the active set is read again after each quiet interval, not only on NOTIFY."""
    from kentino_expert.decisions.replicas import Listener
    log = open_log(pg_target)
    calls = []
    listener = Listener(log, "quiet-replica", lambda: calls.append(time.monotonic()), lambda: (None, "none", ""),
                        recheck_seconds=0.2).start()
    try:
        wait_until(lambda: len(calls) >= 3, 30, "two reads after the first, with no NOTIFY sent")
    finally:
        listener.stop()
        log.close()


def test_a_server_that_stops_answering_fails_a_record_instead_of_holding_it(pg_target, monkeypatch):
    """A server that keeps its connections open but answers nothing (a frozen process) fails a record with
    LogUnavailable once the statement limit and the silence margin pass, instead of holding it, and readiness
    says no at once after."""
    monkeypatch.setattr(postgres, "WRITE_STATEMENT_SECONDS", 1.0)
    monkeypatch.setattr(postgres, "SILENCE_MARGIN_SECONDS", 1.0)
    link, log = _log_through_link(pg_target)
    try:
        log.record({"task": "inference"}, ANSWER, "http")
        link.freeze()
        write, outcome = _in_thread(lambda: log.record({"task": "inference"}, ANSWER, "http"))
        write.join(60)
        held = write.is_alive()
        ready = None if held else log.writable()
    finally:
        link.cut()
        log.close()
    assert not held, "a record to a server that never answers was held"
    assert isinstance(outcome.get("error"), LogUnavailable), outcome
    assert "the server did not answer within 2 s" in str(outcome["error"])
    assert not ready
