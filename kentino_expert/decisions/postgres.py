"""The decision log in PostgreSQL (psycopg 3, imported only when a postgresql:// URL is given), for several replicas.

One write connection (records group-commit through it) and a few read connections, so a listing
never waits behind a write, nor a write behind a listing.
"""
from __future__ import annotations

import threading
from datetime import UTC
from urllib.parse import unquote

from ..errors import DecisionLogError, LogUnavailable
from .log import DecisionLog, reason_of
from .readers import ReaderPool
from .schema import COLUMNS, migrate_postgres

READERS = 2  # read connections at most, per process (opened on first use)


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


def _scrub(text: str, url: str) -> str:
    """`text` (a URL or a libpq message, which may quote the URL) with every password masked."""
    for secret in _url_passwords(url):
        text = text.replace(secret, "***")
    return text


class PostgresDecisionLog(DecisionLog):
    """The log in a PostgreSQL table (psycopg 3); each record is its own committed transaction."""

    _P = "%s"
    _T = "%s::timestamptz"

    def __init__(self, url: str):
        self.url = url
        self._lock = threading.Lock()
        try:
            import psycopg
        except ImportError:
            raise DecisionLogError("a postgresql:// decision log needs psycopg 3: "
                                   "pip install 'psycopg[binary]'") from None
        self._psycopg = psycopg
        self._conn = None
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
            migrate_postgres(self._conn)  # under an advisory lock: replicas opening at once migrate once
        except Exception as exc:  # a malformed URL is a ValueError or worse, not a psycopg.Error
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if isinstance(exc, DecisionLogError):
                raise DecisionLogError(f"decision log {self._safe_url()}: {exc.message}") from None
            raise self._error("cannot open", exc) from None
        self._readers = ReaderPool(self._open_reader, self._safe_url(), size=READERS, usable=self._usable)

    def _open_reader(self):
        conn = self._psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        conn.execute("SET default_transaction_read_only = on")  # a reader never writes, whatever it is asked
        return conn

    @staticmethod
    def _alive(conn) -> bool:
        return not conn.closed and not getattr(conn, "broken", False)

    def _usable(self, conn) -> bool:
        """A reader to reuse: alive and outside any transaction (one left open would pin an old snapshot)."""
        return self._alive(conn) and conn.info.transaction_status == self._psycopg.pq.TransactionStatus.IDLE

    def _safe_url(self) -> str:
        """The URL with its password masked, whether given as user:password@ or as ?password=."""
        return _scrub(self.url, self.url)

    def _error(self, what: str, exc: Exception) -> DecisionLogError:
        return DecisionLogError(f"decision log {self._safe_url()}: {what}: {_scrub(reason_of(exc), self.url)}")

    def _connection(self):
        if self._conn is None:
            raise LogUnavailable(f"decision log {self._safe_url()} is closed")
        if not self._alive(self._conn):  # the server restarted: reconnect once
            try:
                self._conn = self._psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            except self._psycopg.Error as exc:
                raise LogUnavailable(self._error("cannot reconnect", exc).message) from None
        return self._conn

    @staticmethod
    def _time_text(value) -> str:
        """A TIMESTAMPTZ as the log has always written it: ISO-8601 UTC with microseconds."""
        return value.astimezone(UTC).isoformat(timespec="microseconds")

    def _insert_many(self, rows: list[dict]) -> None:
        # the JSON columns go in as the text already written (cast by the server), not re-encoded
        casts = {"facts": "%s::jsonb", "answer": "%s::jsonb", "created_at": "%s::timestamptz"}
        placeholders = ", ".join(casts.get(c, "%s") for c in COLUMNS)
        values = [[row.get(c) for c in COLUMNS] for row in rows]  # status, summary: may be absent
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction(), conn.cursor() as cursor:
                    cursor.executemany(f"INSERT INTO decisions ({', '.join(COLUMNS)}) VALUES ({placeholders})", values)
            except Exception as exc:  # the transaction block has rolled back whatever the error
                raise self._error("decision not recorded", exc) from None

    def _write(self, sql: str, args) -> int:
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction(), conn.cursor() as cursor:
                    cursor.execute(sql, args)
                    return cursor.rowcount
            except Exception as exc:
                raise self._error("cannot write", exc) from None

    def _read(self, sql: str, args) -> list[tuple]:
        try:
            with self._readers.connection() as conn:
                return conn.execute(sql, args).fetchall()
        except self._psycopg.Error as exc:
            raise self._error("cannot read", exc) from None

    def _probe_write(self) -> None:
        with self._lock:
            try:
                row = self._connection().execute("SELECT current_setting('transaction_read_only')").fetchone()
            except DecisionLogError:
                raise
            except Exception as exc:
                raise self._error("not reachable", exc) from None
        if row and row[0] == "on":
            raise DecisionLogError(f"decision log {self._safe_url()}: the database is read-only")
