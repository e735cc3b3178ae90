"""The durable decision log: every recommendation served, with its facts, answer and rule-set digest.

SQLite (WAL, synchronous=FULL) by default: the path from KENTINO_DB, else ./kentino-decisions.db.
A postgresql:// URL uses psycopg 3 (imported only then). `record` commits before it returns, so a
caller that acknowledges a decision only after `record` never acknowledges one the log lost.
Every failure to open or write the log is a DecisionLogError, never a silent loss.
"""
from __future__ import annotations

import json
import logging
import os
import random
import sqlite3
import threading
import time
import uuid
from pathlib import Path

from . import fastjson
from .errors import DecisionLogError, EngineError, KentinoError, LogUnavailable
from .decision_meta import check_meta, normalise_time, utc_now
from .groupcommit import GroupCommit

DEFAULT_PATH = "kentino-decisions.db"
_COMMITTER_LOCK = threading.Lock()  # two first records at once must not make two group committers
SOURCES = ("http", "mcp", "cli")
COLUMNS = ("decision_id", "created_at", "session_id", "turn", "source", "facts", "answer", "kind", "digest",
           "engine")
_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    decision_id TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL,
    session_id  TEXT NULL,
    turn        INTEGER NULL,
    source      TEXT NOT NULL CHECK (source IN ('http', 'mcp', 'cli')),
    facts       JSON NOT NULL,
    answer      JSON NOT NULL,
    kind        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    engine      TEXT NOT NULL
)"""
_PG_SCHEMA = _SQLITE_SCHEMA.replace("JSON NOT NULL", "JSONB NOT NULL")
_INDEXES = ("CREATE INDEX IF NOT EXISTS decisions_created_at ON decisions (created_at)",
            "CREATE INDEX IF NOT EXISTS decisions_kind ON decisions (kind)")


def sqlite_path(url_or_path: str) -> str | None:
    """The file a SQLite log target names (a path or sqlite:///path), or None for another scheme."""
    text = os.fspath(url_or_path)
    if "://" not in text:
        return text
    scheme, rest = text.split("://", 1)
    return (rest or DEFAULT_PATH) if scheme.lower() == "sqlite" else None


def _plain_facts(facts):
    if hasattr(facts, "known"):
        return facts.known()
    return facts


def _json(value) -> str:
    try:
        return fastjson.dumps(value)
    except (TypeError, ValueError) as exc:
        raise DecisionLogError(f"cannot record a decision whose data is not JSON: {exc}") from None


class DecisionLog:
    """Base of the SQLite and PostgreSQL logs; use DecisionLog.open()."""

    url: str

    @staticmethod
    def open(url_or_path: str | os.PathLike | None = None) -> "DecisionLog":
        """Open (and create) the log: a SQLite path or sqlite:/// URL, or a postgresql:// URL."""
        target = url_or_path if url_or_path not in (None, "") else os.environ.get("KENTINO_DB") or DEFAULT_PATH
        text = os.fspath(target)
        scheme = text.split("://", 1)[0].lower() if "://" in text else ""
        if scheme in ("postgresql", "postgres"):
            from .decisions_pg import PostgresDecisionLog  # imports this module: loaded on demand
            return PostgresDecisionLog(text)
        if scheme == "sqlite":
            return SqliteDecisionLog(sqlite_path(text))  # sqlite:///abs/path.db
        if scheme:
            raise DecisionLogError(f"unsupported decision log URL '{text}': use a file path, sqlite:///path "
                                   "or postgresql://user@host/db")
        return SqliteDecisionLog(text)

    # -- the interface -------------------------------------------------------------------------
    def record(self, facts, answer, source: str, session_id: str | None = None, turn: int | None = None) -> str:
        """Write one decision in one committed transaction; return its id."""
        if source not in SOURCES:
            raise DecisionLogError(f"source must be one of {', '.join(SOURCES)}, not '{source}'")
        dump = answer.model_dump(mode="json") if hasattr(answer, "model_dump") else dict(answer)
        try:
            kind = dump["recommendation"]["kind"]
            digest, engine = dump["ruleset"]["digest"], dump["ruleset"]["engine"]
        except (KeyError, TypeError):
            raise DecisionLogError("cannot record an answer without recommendation.kind and ruleset.digest") from None
        session_id, turn = check_meta(session_id, turn)
        row = {"decision_id": uuid.uuid4().hex, "created_at": utc_now(),
               "session_id": session_id, "turn": turn, "source": source,
               "facts": _json(_plain_facts(facts)), "answer": _json(dump), "kind": kind, "digest": digest,
               "engine": engine}
        self._group_commit().commit(row)
        return row["decision_id"]

    def _group_commit(self) -> GroupCommit:
        committer = getattr(self, "_committer", None)
        if committer is None:  # created lazily (subclasses need not call a base __init__), once
            with _COMMITTER_LOCK:
                committer = getattr(self, "_committer", None)
                if committer is None:
                    committer = self._committer = GroupCommit(self._insert_many)
        return committer

    def get(self, decision_id: str) -> dict | None:
        """The decision with this id, or None."""
        rows = self._select("WHERE decision_id = {p}", [str(decision_id)], limit=1)
        return rows[0] if rows else None

    def list(self, since: str | None = None, kind: str | None = None, limit: int = 100) -> list[dict]:
        """Decisions newest first, optionally since an ISO-8601 time and of one kind."""
        clauses, args = [], []
        if since:
            clauses.append("created_at >= {p}")
            args.append(normalise_time(since))
        if kind:
            clauses.append("kind = {p}")
            args.append(kind)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        return self._select(where, args, limit=max(1, min(int(limit), 100_000)), newest_first=True)

    def writable(self) -> bool:
        """True when a write transaction can be opened now (used by /readyz)."""
        try:
            self._probe_write()
            return True
        except (DecisionLogError, KentinoError):
            return False

    def close(self) -> None:
        """Close the connection; later calls raise DecisionLogError('... is closed')."""
        with self._lock:
            conn, self._conn = getattr(self, "_conn", None), None
            if conn is not None:
                conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def _row(values) -> dict:
        row = dict(zip(COLUMNS, values))
        for key in ("facts", "answer"):
            if isinstance(row[key], (str, bytes)):
                row[key] = json.loads(row[key])
        return row


def _reason(exc: Exception) -> str:
    """A driver error as one line; an error that is not the driver's own is named by its type."""
    text = " ".join(str(exc).split())
    if isinstance(exc, (sqlite3.Error, DecisionLogError)) or type(exc).__module__.startswith("psycopg"):
        return text
    return f"{type(exc).__name__}: {text}"


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SqliteDecisionLog(DecisionLog):
    """The log in one SQLite file (WAL journal, synchronous=FULL: a commit survives power loss)."""

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
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise DecisionLogError(f"decision log {self.path}: cannot use WAL journal mode (got {mode})")
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute(_SQLITE_SCHEMA)
            for index in _INDEXES:
                self._conn.execute(index)
        except (sqlite3.Error, DecisionLogError) as exc:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if isinstance(exc, DecisionLogError):
                raise
            raise DecisionLogError(f"decision log {self.path}: cannot open for writing: {exc}") from None

    def _connection(self):
        if self._conn is None:
            raise LogUnavailable(f"decision log {self.path} is closed")
        return self._conn

    busy_seconds = 30.0  # how long a write waits for another process's write lock before it fails

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

    def _insert_many(self, rows: list[dict]) -> None:
        with self._lock:
            conn = self._connection()
            try:
                self._begin_immediate(conn)
            except sqlite3.Error as exc:  # locked past busy_seconds: no row of the batch could go in
                raise LogUnavailable(f"decision log {self.path}: decision not recorded: {_reason(exc)}") from None
            try:
                conn.executemany(f"INSERT INTO decisions ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                                 [[row[c] for c in COLUMNS] for row in rows])
                conn.execute("COMMIT")
            except BaseException as exc:  # not only sqlite3.Error: binding 2**70 or '\ud800' raises before SQLite
                self._rollback(conn)
                if not isinstance(exc, Exception):
                    raise
                raise DecisionLogError(f"decision log {self.path}: decision not recorded: {_reason(exc)}") from None

    def _select(self, where: str, args, limit: int, newest_first: bool = False) -> list[dict]:
        order = "ORDER BY created_at DESC, decision_id DESC" if newest_first else ""
        sql = f"SELECT {', '.join(COLUMNS)} FROM decisions {where.format(p='?')} {order} LIMIT ?"
        with self._lock:
            try:
                rows = self._connection().execute(sql, [*args, limit]).fetchall()
            except sqlite3.Error as exc:
                raise DecisionLogError(f"decision log {self.path}: cannot read: {exc}") from None
        return [self._row(r) for r in rows]

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
                raise DecisionLogError(f"decision log {self.path}: not writable: {_reason(exc)}") from None


# -- deciding and replaying --------------------------------------------------------------------

def decide(expert, log: DecisionLog | None, facts, source: str, session_id=None, turn=None) -> dict:
    """Recommend, rank the open questions, explain the kinds not chosen, record; return the response.

    The decision is committed to `log` (when one is given) before this returns; the response is
    {decision_id, status, questions, why_not, **answer}.
    """
    session_id, turn = check_meta(session_id, turn)  # before the work: a bad turn is refused, not evaluated
    raw, logged, body = evaluate_checked(expert, facts)
    decision_id = log.record(raw, logged, source, session_id=session_id, turn=turn) if log is not None else None
    return respond(decision_id, body)


def evaluate_checked(expert, facts, logger=None) -> tuple[dict, dict, dict]:
    """evaluate_decision(), with the arithmetic failing on extreme (but valid) facts an EngineError.

    Such facts are the caller's to change, so they get a message, not a crash; `logger` (default:
    this module's) keeps the traceback for whoever maintains the rules.
    """
    try:
        return evaluate_decision(expert, facts)
    except KentinoError:
        raise
    except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:
        (logger or logging.getLogger(__name__)).warning("facts that cannot be evaluated: %r", facts, exc_info=True)
        raise EngineError(f"{type(exc).__name__}: {exc}") from None


def evaluate_decision(expert, facts) -> tuple[dict, dict, dict]:
    """(facts as given, the answer to log, the response body without its id): all of deciding but the write."""
    from .facts import Workload, validate_facts
    from .questions import rank_questions
    from .whynot import why_not_from
    workload = facts if isinstance(facts, Workload) else validate_facts(facts)
    answer, firings, final = expert.recommend_traced(workload)
    questions = rank_questions(expert, workload, answer.recommendation.kind)
    not_chosen = why_not_from(expert, firings, final)
    logged = answer.model_dump(mode="json")  # once: the log and the response share it
    raw = facts.known() if isinstance(facts, Workload) else dict(facts)
    status = "provisional" if questions else "final"
    body = {"status": status, "questions": questions, "why_not": not_chosen,
            **{k: v for k, v in logged.items() if k != "status"}}
    return raw, logged, body


def respond(decision_id: str | None, body: dict) -> dict:
    """The response: the decision id first, then the body."""
    return {"decision_id": decision_id, **body}


_COMPARED = ("kind", "nodes", "gpus_per_node", "gpu", "precision", "replicas", "interconnect", "parallelism")


def replay(expert, decision: dict) -> dict:
    """Re-evaluate a stored decision's facts with the current rules; report what changed and digest drift."""
    old = decision.get("answer") or {}
    old_rec = old.get("recommendation") or {}
    old_digest = decision.get("digest") or (old.get("ruleset") or {}).get("digest")
    report = {"decision_id": decision.get("decision_id"), "old_digest": old_digest,
              "new_digest": expert.ruleset.digest, "digest_changed": old_digest != expert.ruleset.digest}
    try:
        answer = expert.recommend(decision.get("facts") or {})
    except KentinoError as exc:
        report.update(unchanged=False, error=str(exc), changes={}, rules_changed=[], warnings_changed=[])
        return report
    new = answer.model_dump(mode="json")
    new_rec = new["recommendation"]
    changes = {key: {"old": old_rec.get(key), "new": new_rec.get(key)}
               for key in _COMPARED if old_rec.get(key) != new_rec.get(key)}
    if old.get("status") != new["status"]:
        changes["status"] = {"old": old.get("status"), "new": new["status"]}
    old_rules = [step["rule"] for step in old.get("trace", [])]
    new_rules = [step["rule"] for step in new["trace"]]
    rules_changed = ([{"rule": r, "old": True, "new": False, "change": "no longer fires"}
                      for r in old_rules if r not in new_rules]
                     + [{"rule": r, "old": False, "new": True, "change": "now fires"}
                        for r in new_rules if r not in old_rules])
    old_warnings = sorted(w["code"] for w in old.get("warnings", []))
    new_warnings = sorted(w["code"] for w in new["warnings"])
    warnings_changed = sorted(set(old_warnings) ^ set(new_warnings))
    report.update(unchanged=not changes and not rules_changed and not warnings_changed, changes=changes,
                  rules_changed=rules_changed, warnings_changed=warnings_changed, new_answer=new)
    return report
