"""The durable decision log: every recommendation served, with its facts, answer and rule-set digest.

This is the interface both stores share (sqlite.py, postgres.py; connect.py opens the one a target
names). `record` commits before it returns, so a caller that acknowledges a decision only after
`record` never acknowledges one the log lost.
Every failure to open or write the log is a DecisionLogError, never a silent loss. Reads go through
their own connections (readers.py), so a listing never holds the write connection; listings read
columns only, a page at a time, newest first, with an opaque cursor to the next page.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .. import fastjson
from ..errors import DecisionLogError, InputError, KentinoError, UnreadableRow
from .groupcommit import GroupCommit
from .meta import check_meta, check_no_nul, check_session_id, decode_cursor, encode_cursor, normalise_time, utc_now
from .schema import LIST_COLUMNS, ROW_COLUMNS

_COMMITTER_LOCK = threading.Lock()  # two first records at once must not make two group committers
SOURCES = ("http", "mcp", "cli")
MAX_PAGE = 1000  # rows in one page read from the log
MAX_HTTP_PAGE = 200  # rows in one page of GET /v1/decisions (summaries: the stored answers are not read)
PRUNE_BATCH = 1000  # rows deleted per transaction: records wait at most one batch


@dataclass(frozen=True)
class DecisionPage:
    """One page of a listing: summaries newest first, and the cursor to the next page (None on the last)."""
    decisions: tuple[dict, ...]
    next_cursor: str | None


def default_instance() -> str:
    """The instance label of a process that was given none: $KENTINO_INSTANCE, else the host's name."""
    return os.environ.get("KENTINO_INSTANCE") or socket.gethostname() or "localhost"


def _plain_facts(facts):
    if hasattr(facts, "known"):
        return facts.known()
    return facts


def _json(value, field: str) -> str:
    """`value` as JSON text; the NUL character is refused (JSONB cannot hold it) on every backend alike."""
    try:
        text = fastjson.dumps(value)
    except (TypeError, ValueError) as exc:
        raise DecisionLogError(f"cannot record a decision whose data is not JSON: {exc}") from None
    if "\\u0000" in text:  # rare: only then walk the value (the escape may also be a quoted backslash)
        check_no_nul(value, field)
    return text


def _text_or_none(value) -> str | None:
    return value if isinstance(value, str) else None



def stored_id(decision_id) -> str:
    """The id as the log stores it (uuid4().hex): a UUID in any of its written forms becomes its 32 lower-case hex
    digits; anything else is looked up as given (and is not found)."""
    text = str(decision_id)
    try:
        return uuid.UUID(text).hex
    except ValueError:
        return text

class DecisionLog:
    """Base of the SQLite and PostgreSQL logs; open one with connect.open_log().

    A store provides _insert_many(rows), _read(sql, args), _write(sql, args) -> rows changed,
    _probe_write(), the placeholders _P (a value) and _T (a time), and _time_text(value).
    """

    url: str
    _P = "?"
    _T = "?"
    _JSON_AS_TEXT = True  # the JSON columns come back as text to parse (SQLite), not as values (PostgreSQL)
    # who answered, recorded in every row (`serve` sets its --instance; default: default_instance())
    instance: str | None = None
    # told each committed row and the seconds its commit took (the service's metrics); its failure never
    # fails a decision
    on_record: Callable[[dict, float], None] | None = None
    on_batch: Callable[[int], None] | None = None  # told the size of each group-commit batch

    # -- writing -------------------------------------------------------------------------------
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
               "facts": _json(_plain_facts(facts), "facts"), "answer": _json(dump, "answer"), "kind": kind,
               "digest": digest, "engine": engine, "status": _text_or_none(dump.get("status")),
               "summary": _text_or_none((dump["recommendation"] or {}).get("summary")),
               "instance": self.instance or default_instance()}
        started = time.perf_counter()
        self._group_commit().commit(row)
        if self.on_record is not None:
            try:
                self.on_record(row, time.perf_counter() - started)
            except Exception:  # noqa: BLE001 - an observer's bug must not unsay a committed decision
                logging.getLogger(__name__).exception("decision observer failed")
        return row["decision_id"]

    def _group_commit(self) -> GroupCommit:
        committer = getattr(self, "_committer", None)
        if committer is None:  # created lazily (subclasses need not call a base __init__), once
            with _COMMITTER_LOCK:
                committer = getattr(self, "_committer", None)
                if committer is None:
                    committer = self._committer = GroupCommit(self._insert_many, on_batch=self._batch_done)
        return committer

    def _batch_done(self, rows: int) -> None:
        if self.on_batch is not None:
            try:
                self.on_batch(rows)
            except Exception:  # noqa: BLE001 - an observer's bug must not fail a commit
                logging.getLogger(__name__).exception("batch observer failed")

    def prune(self, before: str, dry_run: bool = False, batch: int = PRUNE_BATCH) -> int:
        """Delete the decisions created strictly before `before` (an ISO-8601 time in the past), `batch` rows
        per transaction; return how many were deleted (with dry_run: how many would be)."""
        cutoff = normalise_time(before)
        if cutoff > utc_now():
            raise DecisionLogError(f"'{before}' is in the future: prune deletes only decisions older than a past time")
        t, p = self._T, self._P
        if dry_run:
            return self._read(f"SELECT count(*) FROM decisions WHERE created_at < {t}", [cutoff])[0][0]
        removed = 0
        while True:
            count = self._write(f"DELETE FROM decisions WHERE decision_id IN (SELECT decision_id FROM decisions "
                                f"WHERE created_at < {t} ORDER BY created_at LIMIT {p})", [cutoff, batch])
            removed += count
            if count < batch:
                return removed

    # -- reading -------------------------------------------------------------------------------
    def get(self, decision_id: str) -> dict | None:
        """The whole decision with this id (facts and answer included), or None. An id is the UUID's 32 hex
        digits; the same UUID written with dashes, braces or capitals (as a spreadsheet or a ticket quotes it)
        finds the same decision."""
        rows = self._read(f"SELECT {', '.join(ROW_COLUMNS)} FROM decisions WHERE decision_id = {self._P}",
                          [stored_id(decision_id)])
        return self._decoded(ROW_COLUMNS, rows[0]) if rows else None

    def page(self, since: str | None = None, kind: str | None = None, limit: int = 100, cursor: str | None = None,
             with_facts: bool = False, session_id: str | None = None) -> DecisionPage:
        """Up to `limit` (1..MAX_PAGE) summaries newest first, from the columns (never the stored answer),
        optionally since an ISO-8601 time, of one kind, of one conversation, after a cursor, with the facts.
        (No index serves `session_id`: it filters the newest-first scan, which `since` bounds.)"""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise InputError(f"must be between 1 and {MAX_PAGE}", field="limit")
        t, p = self._T, self._P
        clauses, args = [], []
        if since:
            clauses.append(f"created_at >= {t}")
            args.append(normalise_time(since, clamp=True))
        if kind:
            clauses.append(f"kind = {p}")
            args.append(str(kind))
        if session_id is not None:
            clauses.append(f"session_id = {p}")
            args.append(check_session_id(session_id))
        if cursor is not None:  # strictly after the last row shown: (created_at, decision_id) below the cursor's
            at, last_id = decode_cursor(cursor)
            clauses.append(f"created_at <= {t} AND (created_at < {t} OR decision_id < {p})")
            args += [at, at, last_id]
        columns = LIST_COLUMNS + (("facts",) if with_facts else ())
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._read(f"SELECT {', '.join(columns)} FROM decisions {where} "
                          f"ORDER BY created_at DESC, decision_id DESC LIMIT {p}", [*args, limit + 1])
        summaries = tuple(self._decoded(columns, row) for row in rows[:limit])
        more = len(rows) > limit
        last = summaries[-1] if summaries else None
        return DecisionPage(summaries, encode_cursor(last["created_at"], last["decision_id"]) if more else None)

    def iter_decisions(self, since: str | None = None, kind: str | None = None, limit: int = 100,
                       with_facts: bool = False) -> Iterator[dict]:
        """Up to `limit` summaries newest first, read a page at a time (memory stays one page)."""
        cursor, left = None, limit
        while left > 0:
            page = self.page(since=since, kind=kind, limit=min(left, MAX_PAGE), cursor=cursor, with_facts=with_facts)
            yield from page.decisions
            left -= len(page.decisions)
            cursor = page.next_cursor
            if cursor is None:
                return

    def list(self, since: str | None = None, kind: str | None = None, limit: int = 100) -> list[dict]:
        """Up to `limit` summaries newest first (see `page` for one page with its cursor)."""
        return list(self.iter_decisions(since=since, kind=kind, limit=limit))

    def safe_url(self) -> str:
        """The log's target as it may be printed (the PostgreSQL log masks its password)."""
        return self.url

    def writable(self) -> bool:
        """True when a write transaction can be opened now (used by /readyz)."""
        try:
            self._probe_write()
            return True
        except (DecisionLogError, KentinoError):
            return False

    def close(self) -> None:
        """Close the connections; later calls raise DecisionLogError('... is closed')."""
        with self._lock:
            conn, self._conn = getattr(self, "_conn", None), None
            if conn is not None:
                conn.close()
        readers = getattr(self, "_readers", None)
        if readers is not None:
            readers.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _decoded(self, columns, values) -> dict:
        """A row as a dict: the time as ISO-8601 UTC text, JSON columns as Python values (parsed here only where
        the store keeps them as text: PostgreSQL's driver has already parsed JSONB, and a JSON string it gave
        is a value, not JSON to parse again)."""
        row = dict(zip(columns, values, strict=True))
        row["created_at"] = self._time_text(row["created_at"])
        for key in ("facts", "answer"):
            if self._JSON_AS_TEXT and isinstance(row.get(key), (str, bytes)):
                try:
                    row[key] = json.loads(row[key])
                except (ValueError, RecursionError):  # a row another program wrote
                    name = str(row["decision_id"])[:100]
                    raise UnreadableRow(f"decision log {self.safe_url()}: decision '{name}': its {key} is not JSON",
                                        f"decision '{name}': its stored {key} is not JSON", name=key) from None
        return row

    @staticmethod
    def _time_text(value) -> str:
        return value


def reason_of(exc: Exception) -> str:
    """A driver error as one line; an error that is not the driver's own is named by its type."""
    text = " ".join(str(exc).split())
    if isinstance(exc, (sqlite3.Error, DecisionLogError)) or type(exc).__module__.startswith("psycopg"):
        return text
    return f"{type(exc).__name__}: {text}"
