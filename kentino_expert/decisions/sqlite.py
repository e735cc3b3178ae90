"""The decision log in one SQLite file: WAL journal, synchronous=FULL, one write connection and a few readers.

In WAL mode readers see the last commit without taking the write lock, so a listing on a reader
connection neither waits for the writer nor makes a record wait.
"""
from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from pathlib import Path

from ..errors import DecisionLogError, LogUnavailable
from .log import DecisionLog, reason_of
from .readers import ReaderPool
from .schema import COLUMNS, SCHEMA_VERSION, V1_COLUMNS, migrate_sqlite, sqlite_version

READERS = 2  # read connections at most (a listing is short: one page)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SqliteDecisionLog(DecisionLog):
    """The log in one SQLite file (WAL journal, synchronous=FULL: a commit survives power loss)."""

    busy_seconds = 30.0  # how long a write waits for another process's write lock before it fails

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.url = str(self.path)
        self._lock = threading.Lock()
        try:
            parent_ok = self.path.parent.is_dir()
        except OSError:
            parent_ok = False
        if not parent_ok:
            raise DecisionLogError(f"decision log {self.path}: directory {self.path.parent} does not exist "
                                   "or cannot be reached")
        self._conn = None
        try:
            self._conn = sqlite3.connect(str(self.path), timeout=30, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA busy_timeout = 30000")
            _retry_locked(lambda: self._set_up(self._conn))
        except (sqlite3.Error, DecisionLogError) as exc:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            reason = exc.message if isinstance(exc, DecisionLogError) else f"cannot open for writing: {exc}"
            raise DecisionLogError(f"decision log {self.path}: {reason}") from None
        # a reader left inside a transaction would keep reading its old snapshot: closed, not reused
        self._readers = ReaderPool(self._open_reader, str(self.path), size=READERS,
                                   usable=lambda conn: not conn.in_transaction)

    @staticmethod
    def _set_up(conn) -> None:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise DecisionLogError(f"cannot use WAL journal mode (got {mode})")
        conn.execute("PRAGMA synchronous = FULL")
        migrate_sqlite(conn)

    def _open_reader(self):
        conn = sqlite3.connect(str(self.path), timeout=5, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA query_only = ON")  # a reader never writes, whatever it is asked
        return conn

    def _connection(self):
        if self._conn is None:
            raise LogUnavailable(f"decision log {self.path} is closed")
        return self._conn

    def _begin_immediate(self, conn) -> None:
        """BEGIN IMMEDIATE, retried every ~0.5 ms while another process holds the write lock.

        SQLite's own busy handler sleeps 1, 2, 5, 10 ... 100 ms between tries: measured with two
        workers, p99 latency went to 110-440 ms although a commit takes about a millisecond.
        """
        deadline = time.monotonic() + self.busy_seconds
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(random.uniform(0.0002, 0.0008))
        finally:
            conn.execute("PRAGMA busy_timeout = 30000")

    @staticmethod
    def _rollback(conn) -> None:
        """End a transaction a failed write left open: left open, it holds the write lock and every
        later BEGIN fails with 'cannot start a transaction within a transaction'."""
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def _in_write_transaction(self, work, what: str):
        """`work(conn)` inside BEGIN IMMEDIATE ... COMMIT on the write connection; rolled back on any error."""
        with self._lock:
            conn = self._connection()
            try:
                self._begin_immediate(conn)
            except sqlite3.Error as exc:  # locked past busy_seconds: nothing could be written
                raise LogUnavailable(f"decision log {self.path}: {what}: {reason_of(exc)}") from None
            try:
                result = work(conn)
                conn.execute("COMMIT")
                return result
            except BaseException as exc:  # not only sqlite3.Error: binding 2**70 or '\ud800' raises before SQLite
                self._rollback(conn)
                if not isinstance(exc, Exception):
                    raise
                raise DecisionLogError(f"decision log {self.path}: {what}: {reason_of(exc)}") from None

    def _insert_many(self, rows: list[dict]) -> None:
        sql = f"INSERT INTO decisions ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
        values = [[row.get(c) for c in COLUMNS] for row in rows]  # status, summary: may be absent
        self._in_write_transaction(lambda conn: conn.executemany(sql, values), "decision not recorded")

    def _write(self, sql: str, args) -> int:
        return self._in_write_transaction(lambda conn: conn.execute(sql, args).rowcount, "cannot write")

    def reader(self):
        """A read connection (WAL: it sees the last commit and takes no write lock) for a `with` block."""
        return self._readers.connection()

    def _read(self, sql: str, args) -> list[tuple]:
        try:
            with self._readers.connection() as conn:
                return conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise DecisionLogError(f"decision log {self.path}: cannot read: {exc}") from None

    def _probe_write(self) -> None:
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            except BaseException as exc:
                self._rollback(conn)
                if not isinstance(exc, Exception):
                    raise
                raise DecisionLogError(f"decision log {self.path}: not writable: {reason_of(exc)}") from None


class NotMigrated(DecisionLogError):
    """A log at an older schema version that cannot be written, so cannot be migrated to be read."""


class ReadOnlySqliteLog(SqliteDecisionLog):
    """A log in a file this process cannot write (a read-only mount or directory, an auditor's copy): read by
    read-only connections, never migrated; a write is a DecisionLogError that says so."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.url = str(self.path)
        self._lock = threading.Lock()
        self._conn = None
        self._readers = ReaderPool(self._open_reader, self.url, size=READERS,
                                   usable=lambda conn: not conn.in_transaction)
        try:
            with self._readers.connection() as conn:
                recorded = conn.execute("PRAGMA user_version").fetchone()[0]
                columns = {row[1] for row in conn.execute("PRAGMA table_info(decisions)")}
            found = sqlite_version(recorded, columns)
        except (sqlite3.Error, DecisionLogError) as exc:
            self.close()
            reason = exc.message if isinstance(exc, DecisionLogError) else f"cannot read: {exc}"
            raise DecisionLogError(f"decision log {self.path}: {reason}") from None
        if found != SCHEMA_VERSION:
            self.close()
            raise NotMigrated(f"decision log {self.path}: its schema version {found} must be migrated to "
                              f"{SCHEMA_VERSION} before it is read")

    def _open_reader(self):
        # without a -wal file no connection has the log open: read as immutable, which needs no -shm beside it
        immutable = "" if Path(f"{self.path}-wal").exists() else "&immutable=1"
        return sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro{immutable}", uri=True, timeout=5,
                               isolation_level=None, check_same_thread=False)

    def _connection(self):
        raise DecisionLogError(f"decision log {self.path} is opened read-only (it cannot be written): "
                               "nothing is written to it")


def open_unwritable(path: str | os.PathLike, error: DecisionLogError) -> SqliteDecisionLog:
    """The log at `path` opened read-only, after opening it to write failed with `error` (raised again when
    the file cannot be read either; a log that must be migrated first says so)."""
    try:
        return ReadOnlySqliteLog(path)
    except NotMigrated as second:  # with why it could not be written (a read-only file, or a full disk)
        why = error.message.removeprefix(f"decision log {path}: ")
        raise NotMigrated(f"{second.message}, but it could not be opened to write ({why}): read a writable copy "
                          "of it") from None
    except DecisionLogError:
        raise error from None


def not_a_log(path: str | os.PathLike) -> str | None:
    """Why the existing file `path` is no Kentino decision log (no SQLite database, no `decisions` table of
    the log's shape), or None when it is one; read-only, so a foreign database is left as it was.

    Opening a log (SqliteDecisionLog) writes: WAL mode, the schema, migrations. A read command checks
    here first. Without a -wal file no connection has the database open and it is read as immutable,
    which creates no -wal or -shm beside it (a read-only connection to a WAL database would)."""
    path = Path(path).resolve()
    immutable = "" if Path(f"{path}-wal").exists() else "&immutable=1"
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro{immutable}", uri=True, timeout=5)
    except sqlite3.Error as exc:
        return f"cannot read: {exc}"
    try:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(decisions)")}
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_NOTADB" or "not a database" in str(exc):
            return "not a Kentino decision log (not an SQLite database)"
        return f"cannot read: {exc}"
    finally:
        conn.close()
    if not columns:
        return "not a Kentino decision log (no 'decisions' table)"
    missing = [c for c in V1_COLUMNS if c not in columns]
    if missing:
        return f"not a Kentino decision log (its 'decisions' table has no {', '.join(missing)})"
    return None


def _retry_locked(step, seconds: float = 30.0) -> None:
    """Run `step`, again while SQLite says "database is locked" (for up to `seconds`).

    Several processes opening one log at once (replicas starting, a migration) meet a lock that
    SQLite refuses at once instead of waiting on its busy timeout: the switch to WAL mode and a
    read lock that would have to be upgraded while another writer waits (deadlock avoidance).
    """
    deadline = time.monotonic() + seconds
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
