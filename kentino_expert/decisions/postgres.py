"""The decision log in PostgreSQL (psycopg 3 and psycopg_pool, imported only when a postgresql:// URL is given).

Two connection pools: writes (the group commit's batches, pruning, the readiness probe) and reads
(listings, lookups). A listing never holds a connection a record needs, so reads never block writes.
Every connection is checked when it is taken; one the server dropped is replaced by the pool. Once
the server is found unreachable, a write or read fails at once (LogUnavailable) instead of waiting for
a connection, so a replica answers 503 quickly and its load balancer takes it out; the pool keeps
reconnecting in the background and the first connection it gets ends the outage.
"""
from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from datetime import UTC
from urllib.parse import unquote

from ..errors import DecisionLogError, LogUnavailable
from .log import DecisionLog, reason_of
from .schema import COLUMNS, migrate_postgres
from .watchdog import Watchdog

WRITERS = 3  # write connections at most, per process: the group commit's one, a prune batch, the probe
READERS = 2  # read connections at most, per process (opened on first use)
WRITE_WAIT = 5.0  # seconds a write waits for a connection while the server answers
READ_WAIT = 10.0  # seconds a read waits for a connection (all of them busy with other reads)
PROBE_WAIT = 1.0  # /readyz: under HAProxy's 2 s check timeout, so a lost log is a 503, not a timeout
DOWN_WAIT = 0.05  # while the server is known unreachable: only a connection the pool already has
RETAKE_WAIT = 0.5  # after a dropped connection: a new one comes in milliseconds if the server answers
RECONNECT_SECONDS = 5.0  # a pool's reconnection attempts back off (1, 2 s ...) for this long, then start over
# how long the server may spend on one statement before it cancels it: a write or read that waits on a lock
# (VACUUM FULL, ALTER TABLE, a DBA's LOCK TABLE) or a stalled server fails then instead of holding the request
# and every decision queued behind it in the group commit for as long as the lock is held
WRITE_STATEMENT_SECONDS = 10.0
READ_STATEMENT_SECONDS = 30.0
# past a connection's statement limit, how long its work may go without an answer before the log shuts its socket:
# the server cancels a statement at the limit and says so at once, so silence this long after it means no server
# is answering (a frozen process keeps its socket open and TCP cannot tell it from a busy one)
SILENCE_MARGIN_SECONDS = 5.0
PROBE_LOCK_SECONDS = 0.5  # /readyz: how long the probe waits for the table's write lock (within PROBE_WAIT)
# libpq's settings of every connection the log opens, unless its URL sets them: a connection whose peer is gone
# without a word (a NAT or firewall that drops idle flows, a host that lost power) is found dead by TCP
# keepalives, and sent data left unacknowledged fails after tcp_user_timeout, instead of waiting on the kernel's
# retransmissions for a quarter of an hour with a decision (or the rule-set listener) inside
CONNECTION_DEFAULTS = {"connect_timeout": 10, "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
                       "keepalives_count": 3, "tcp_user_timeout": 30_000}


def connection_settings(url: str) -> dict:
    """CONNECTION_DEFAULTS without what the URL sets itself (its own choice wins: psycopg's keyword arguments
    would override it)."""
    try:
        from psycopg.conninfo import conninfo_to_dict
        given = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - a URL psycopg cannot read fails at connect, with the log's own message
        given = {}
    return {name: value for name, value in CONNECTION_DEFAULTS.items() if name not in given}


def _url_passwords(url: str) -> list[str]:
    """The passwords a postgresql:// URL carries, as written and percent-decoded (libpq decodes
    parameter names too, so `p%61ssword=` is one)."""
    _, _, tail = url.partition("://")
    before_query, _, query = tail.partition("?")
    found = []
    if "@" in before_query:
        creds = before_query.rpartition("@")[0]
        if ":" in creds:
            found.append(creds.split(":", 1)[1])
    for param in query.split("&") if query else ():
        name, eq, value = param.partition("=")
        if eq and unquote(name).strip().lower() == "password":
            found.append(value)
    return sorted({v for raw in found for v in (raw, unquote(raw)) if v}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """`text` (a URL or a libpq message, which may quote the URL) with every password masked."""
    for secret in _url_passwords(url):
        text = text.replace(secret, "***")
    return text


def _modules():
    """(psycopg, psycopg_pool), or the DecisionLogError that says what to install."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise DecisionLogError("a postgresql:// decision log needs psycopg 3 and psycopg_pool: "
                               "pip install 'kentino-expert[postgres]'") from None
    return psycopg, psycopg_pool


class _Pool:
    """One psycopg_pool.ConnectionPool with the log's waits: normal, or only-what-is-ready while the
    server is known unreachable (a connection taken, or a statement run, says whether it is)."""

    def __init__(self, log: PostgresDecisionLog, name: str, size: int, wait: float, configure, min_size: int):
        self._log, self._wait = log, wait
        self._psycopg = log.psycopg
        self.unreachable = False
        pool_class = log.psycopg_pool.ConnectionPool
        self.size = size
        self.pool = pool_class(log.url, name=name, min_size=min_size, max_size=size,
                               kwargs={"autocommit": True, **connection_settings(log.url)}, configure=configure,
                               timeout=wait, reconnect_timeout=RECONNECT_SECONDS, num_workers=1, open=True)

    def _take(self, what: str, wait: float) -> tuple:
        """(a connection that answers, its watchdog token): each one taken is checked (a round trip) under its
        deadline; one the server dropped is given back (the pool replaces it at once) and another is taken,
        waiting at most RETAKE_WAIT."""
        for attempt in range(self.size + 1):
            timeout = DOWN_WAIT if self.unreachable else wait if attempt == 0 else min(wait, RETAKE_WAIT)
            try:
                conn = self.pool.getconn(timeout=timeout)
            except self._log.psycopg_pool.PoolClosed:
                raise LogUnavailable(f"decision log {self._log.safe_url()} is closed") from None
            except self._log.psycopg_pool.PoolTimeout:
                self.unreachable = True
                raise LogUnavailable(f"decision log {self._log.safe_url()}: {what}: no connection to the server "
                                     f"within {timeout:g} s") from None
            token = self._log.watchdog.arm(conn, _deadline_of(conn))
            try:
                self.pool.check_connection(conn)
                return conn, token
            except self._psycopg.Error:
                silent = self._log.watchdog.disarm(token)
                self.pool.putconn(conn)
                if silent:  # the server took the connection's socket but never answered: another would wait too
                    self.unreachable = True
                    raise self._silent(what, conn) from None
        self.unreachable = True
        raise LogUnavailable(f"decision log {self._log.safe_url()}: {what}: every connection was lost")

    @contextmanager
    def connection(self, what: str = "cannot read", wait: float | None = None):
        """A connection for the block; LogUnavailable when none comes, DecisionLogError for what the
        statements raise (LogUnavailable when the connection was lost)."""
        conn, token = self._take(what, wait or self._wait)
        try:
            yield conn
            self.unreachable = False
        except DecisionLogError:
            raise
        except Exception as exc:  # the transaction block has rolled back whatever the error
            if self._log.watchdog.disarm(token):
                self.unreachable = True
                raise self._silent(what, conn) from None
            lost = conn.broken or isinstance(exc, self._psycopg.OperationalError)
            self.unreachable = self.unreachable or conn.broken
            error = self._log.error(what, exc)
            raise (LogUnavailable(error.message) if lost else error) from None
        finally:
            self._log.watchdog.disarm(token)
            self.pool.putconn(conn)

    def _silent(self, what: str, conn) -> LogUnavailable:
        return LogUnavailable(f"decision log {self._log.safe_url()}: {what}: the server did not answer within "
                              f"{_deadline_of(conn):g} s")

    def close(self) -> None:
        self.pool.close(timeout=5)


_LIMITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # connection -> its statement limit, seconds


def _bound_statements(conn, seconds: float) -> None:
    """Let the server cancel a statement after `seconds`, unless the URL, role or database already set a limit
    (the operator's own choice wins); the limit in force is kept for the connection's watchdog deadline."""
    given = int(conn.execute("SELECT setting FROM pg_settings WHERE name = 'statement_timeout'").fetchone()[0])
    if given == 0:
        conn.execute(f"SET statement_timeout = {int(seconds * 1000)}")
    _LIMITS[conn] = given / 1000 if given else seconds


def _deadline_of(conn) -> float:
    """How long a connection's work may go without an answer: its statement limit and the margin."""
    return _LIMITS.get(conn, READ_STATEMENT_SECONDS) + SILENCE_MARGIN_SECONDS


def _writer_session(conn) -> None:
    _bound_statements(conn, WRITE_STATEMENT_SECONDS)


def _reader_session(conn) -> None:
    _bound_statements(conn, READ_STATEMENT_SECONDS)
    conn.execute("SET default_transaction_read_only = on")  # a reader never writes, whatever it is asked


class PostgresDecisionLog(DecisionLog):
    """The log in a PostgreSQL table; each record is committed (with the others of its group) before it returns."""

    _P = "%s"
    _T = "%s::timestamptz"
    _JSON_AS_TEXT = False

    def __init__(self, url: str):
        self.url = url
        self._lock = threading.Lock()  # closing
        self.psycopg, self.psycopg_pool = _modules()
        self._writers = self._readers = None
        self.watchdog = Watchdog()
        try:  # a connection of its own: a server that cannot be reached, or a bad URL, fails here at once
            with self.psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
                migrate_postgres(conn)  # under an advisory lock: replicas opening at once migrate once
        except Exception as exc:  # a malformed URL is a ValueError or worse, not a psycopg.Error
            if isinstance(exc, DecisionLogError):
                raise DecisionLogError(f"decision log {self.safe_url()}: {exc.message}") from None
            raise self.error("cannot open", exc) from None
        self._writers = _Pool(self, "kentino-log-write", WRITERS, WRITE_WAIT, _writer_session, min_size=1)
        self._readers = _Pool(self, "kentino-log-read", READERS, READ_WAIT, _reader_session, min_size=0)

    def safe_url(self) -> str:
        """The URL with its password masked, whether given as user:password@ or as ?password=."""
        return scrub(self.url, self.url)

    def error(self, what: str, exc: Exception) -> DecisionLogError:
        return DecisionLogError(f"decision log {self.safe_url()}: {what}: {scrub(reason_of(exc), self.url)}")

    @staticmethod
    def _time_text(value) -> str:
        """A TIMESTAMPTZ as the log has always written it: ISO-8601 UTC with microseconds."""
        return value.astimezone(UTC).isoformat(timespec="microseconds")

    def writer(self, what: str, wait: float | None = None):
        """A write connection (autocommit; open a transaction for several statements) for a `with` block."""
        return self._pool("_writers").connection(what, wait)

    def reader(self, what: str = "cannot read"):
        """A read-only connection for a `with` block."""
        return self._pool("_readers").connection(what)

    def _pool(self, which: str) -> _Pool:
        pool = getattr(self, which)
        if pool is None:
            raise LogUnavailable(f"decision log {self.safe_url()} is closed")
        return pool

    def _insert_many(self, rows: list[dict]) -> None:
        # the JSON columns go in as the text already written (cast by the server), not re-encoded
        casts = {"facts": "%s::jsonb", "answer": "%s::jsonb", "created_at": "%s::timestamptz"}
        placeholders = ", ".join(casts.get(c, "%s") for c in COLUMNS)
        values = [[row.get(c) for c in COLUMNS] for row in rows]  # status, summary, instance: may be absent
        with self.writer("decision not recorded") as conn, conn.transaction(), conn.cursor() as cursor:
            cursor.executemany(f"INSERT INTO decisions ({', '.join(COLUMNS)}) VALUES ({placeholders})", values)

    def _write(self, sql: str, args) -> int:
        with self.writer("cannot write") as conn, conn.transaction(), conn.cursor() as cursor:
            cursor.execute(sql, args)
            return cursor.rowcount

    def _read(self, sql: str, args) -> list[tuple]:
        with self.reader("cannot read") as conn:
            return conn.execute(sql, args).fetchall()

    def _probe_write(self) -> None:
        """A write could start now: the server answers, is not read-only, and the table's write lock (what an
        INSERT takes) is free: a table locked by VACUUM FULL or ALTER TABLE would hold every record."""
        with self.writer("not writable", wait=PROBE_WAIT) as conn, conn.transaction():
            row = conn.execute("SELECT current_setting('transaction_read_only')").fetchone()
            if row and row[0] == "on":
                raise DecisionLogError(f"decision log {self.safe_url()}: the database is read-only")
            conn.execute(f"SET LOCAL lock_timeout = {int(PROBE_LOCK_SECONDS * 1000)}")
            conn.execute("LOCK TABLE decisions IN ROW EXCLUSIVE MODE")

    def close(self) -> None:
        """Close both pools; later calls raise LogUnavailable('... is closed')."""
        with self._lock:
            pools, self._writers, self._readers = (self._writers, self._readers), None, None
        for pool in pools:
            if pool is not None:
                pool.close()
        self.watchdog.close()
