"""The decision log in PostgreSQL (psycopg 3, imported only when a postgresql:// URL is given), for several replicas."""
from __future__ import annotations

import threading
from urllib.parse import unquote

from .decisions import _INDEXES, _PG_SCHEMA, COLUMNS, DecisionLog, _reason
from .errors import DecisionLogError, LogUnavailable

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

    def __init__(self, url: str):
        self.url = url
        self._lock = threading.Lock()
        try:
            import psycopg
        except ImportError:
            raise DecisionLogError("a postgresql:// decision log needs psycopg 3: pip install 'psycopg[binary]'") from None
        self._psycopg = psycopg
        self._conn = None
        for attempt in range(2):  # two workers creating the table at once: the loser retries once
            try:
                if self._conn is None:
                    self._conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
                with self._conn.transaction():
                    self._conn.execute(_PG_SCHEMA)
                    for index in _INDEXES:
                        self._conn.execute(index)
                break
            except psycopg.errors.UniqueViolation:
                if attempt:
                    raise DecisionLogError(f"decision log {self._safe_url()}: cannot create the table") from None
            except Exception as exc:  # a malformed URL is a ValueError or worse, not a psycopg.Error
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                raise self._error("cannot open", exc) from None

    def _safe_url(self) -> str:
        """The URL with its password masked, whether given as user:password@ or as ?password=."""
        return _scrub(self.url, self.url)

    def _error(self, what: str, exc: Exception) -> DecisionLogError:
        return DecisionLogError(f"decision log {self._safe_url()}: {what}: {_scrub(_reason(exc), self.url)}")

    def _connection(self):
        if self._conn is None:
            raise LogUnavailable(f"decision log {self._safe_url()} is closed")
        if self._conn.closed or getattr(self._conn, "broken", False):  # the server restarted: reconnect once
            try:
                self._conn = self._psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            except self._psycopg.Error as exc:
                raise LogUnavailable(self._error("cannot reconnect", exc).message) from None
        return self._conn

    def _insert_many(self, rows: list[dict]) -> None:
        # the JSON columns go in as the text already written (cast by the server), not re-encoded
        placeholders = ", ".join("%s::jsonb" if c in ("facts", "answer") else "%s" for c in COLUMNS)
        values = [[row[c] for c in COLUMNS] for row in rows]
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction(), conn.cursor() as cursor:
                    cursor.executemany(f"INSERT INTO decisions ({', '.join(COLUMNS)}) VALUES ({placeholders})", values)
            except Exception as exc:  # the transaction block has rolled back whatever the error
                raise self._error("decision not recorded", exc) from None

    def _select(self, where: str, args, limit: int, newest_first: bool = False) -> list[dict]:
        order = "ORDER BY created_at DESC, decision_id DESC" if newest_first else ""
        sql = f"SELECT {', '.join(COLUMNS)} FROM decisions {where.format(p='%s')} {order} LIMIT %s"
        with self._lock:
            try:
                rows = self._connection().execute(sql, [*args, limit]).fetchall()
            except self._psycopg.Error as exc:
                raise self._error("cannot read", exc) from None
        return [self._row(r) for r in rows]

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
