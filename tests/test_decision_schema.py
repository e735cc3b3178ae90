"""The decision log's schema version and migrations, on SQLite and the real PostgreSQL server (KENTINO_TEST_PG_URL)."""
from __future__ import annotations

import json
import sqlite3
import threading

import pytest

from kentino_expert.decisions.connect import open_log, sqlite_path
from kentino_expert.decisions.schema import SCHEMA_VERSION
from kentino_expert.errors import DecisionLogError, InputError

# The table as version 1 created it (kentino_expert/decisions.py before schema versions), copied here as
# the fixture every migration test starts from.
V1_SQLITE = """
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
V1_PG = V1_SQLITE.replace("JSON NOT NULL", "JSONB NOT NULL")
V1_INDEXES = ("CREATE INDEX IF NOT EXISTS decisions_created_at ON decisions (created_at)",
              "CREATE INDEX IF NOT EXISTS decisions_kind ON decisions (kind)")


def _answer(kind: str, status: str, summary: str) -> dict:
    return {"status": status, "recommendation": {"kind": kind, "summary": summary},
            "ruleset": {"digest": "d" * 64, "engine": "test"}, "trace": [{"rule": "r1"}]}


V1_ROWS = [  # (id, created_at as v1 wrote it, session, turn, kind, status, summary)
    ("a" * 32, "2025-01-31T12:00:00.000001+00:00", "chat-1", 2**31 - 1, "single-node", "final", "Buy one node."),
    ("b" * 32, "2025-02-01T08:30:00.500000+00:00", None, None, "multi-node-ib", "provisional", "Buy a cluster."),
    ("c" * 32, "2025-02-01T08:30:00.500000+00:00", "chat-1", 0, "frontier", "final", "Rent, do not buy."),
]


class Raw:
    """A plain driver connection to a log target, for what the log itself would never do."""

    def __init__(self, target: str):
        self.sqlite = sqlite_path(target) is not None
        if self.sqlite:
            self.conn = sqlite3.connect(sqlite_path(target), isolation_level=None)
        else:
            import psycopg
            self.conn = psycopg.connect(target, autocommit=True)

    def run(self, sql: str, args=()):
        cursor = self.conn.execute(sql if self.sqlite else sql.replace("?", "%s"), list(args))
        return cursor.fetchall() if cursor.description else None

    def close(self):
        self.conn.close()


def _create_v1(target: str) -> None:
    raw = Raw(target)
    try:
        for statement in (V1_SQLITE if raw.sqlite else V1_PG, *V1_INDEXES):
            raw.run(statement)
        for decision_id, created, session, turn, kind, status, summary in V1_ROWS:
            raw.run("INSERT INTO decisions VALUES (?, ?, ?, ?, 'http', ?, ?, ?, ?, 'test')",
                    [decision_id, created, session, turn, json.dumps({"task": "inference"}),
                     json.dumps(_answer(kind, status, summary)), kind, "d" * 64])
    finally:
        raw.close()


def _version(raw: Raw) -> int:
    if raw.sqlite:
        return raw.run("PRAGMA user_version")[0][0]
    return raw.run("SELECT max(version) FROM decisions_schema_version")[0][0]


def _column_types(raw: Raw) -> dict:
    if raw.sqlite:
        return {row[1]: row[2] for row in raw.run("PRAGMA table_info(decisions)")}
    return dict(raw.run("SELECT column_name, data_type FROM information_schema.columns "
                        "WHERE table_name = 'decisions' AND table_schema = current_schema()"))


def _indexes(raw: Raw) -> set:
    if raw.sqlite:
        return {r[0] for r in raw.run("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'decisions' "
                                      "AND name NOT LIKE 'sqlite_%'")}
    return {r[0] for r in raw.run("SELECT indexname FROM pg_indexes WHERE tablename = 'decisions' "
                                  "AND schemaname = current_schema() AND indexname <> 'decisions_pkey'")}


def test_a_version_1_table_is_migrated_with_its_rows(log_target):
    """A table as version 1 left it opens at the current version: every row survives, status and summary are
    filled from the stored answers, PostgreSQL's turn is BIGINT and created_at TIMESTAMPTZ."""
    _create_v1(log_target)
    with open_log(log_target) as log:
        for decision_id, created, session, turn, kind, status, summary in V1_ROWS:
            row = log.get(decision_id)
            assert (row["created_at"], row["session_id"], row["turn"], row["kind"]) == (created, session, turn, kind)
            assert row["answer"] == _answer(kind, status, summary) and row["facts"] == {"task": "inference"}
        listed = log.list()
        assert [(r["decision_id"], r["status"], r["summary"]) for r in listed] == [
            ("c" * 32, "final", "Rent, do not buy."), ("b" * 32, "provisional", "Buy a cluster."),
            ("a" * 32, "final", "Buy one node.")]
        big = log.record({"task": "inference"}, _answer("single-node", "final", "s"), "http", turn=3_000_000_000)
        assert log.get(big)["turn"] == 3_000_000_000
    raw = Raw(log_target)
    try:
        assert _version(raw) == SCHEMA_VERSION
        types = _column_types(raw)
        assert {"status", "summary"} <= set(types)
        if not raw.sqlite:
            assert types["turn"] == "bigint" and types["created_at"] == "timestamp with time zone"
        assert _indexes(raw) == {"decisions_created_id", "decisions_kind_created_id"}
    finally:
        raw.close()


def test_a_new_log_starts_at_the_current_version(log_target):
    """A log created now records the current schema version and has the new columns from the start."""
    open_log(log_target).close()
    raw = Raw(log_target)
    try:
        assert _version(raw) == SCHEMA_VERSION and {"status", "summary"} <= set(_column_types(raw))
    finally:
        raw.close()


def test_replicas_opening_an_old_log_at_once_migrate_it_once(log_target):
    """Four logs opened at the same moment on a version 1 table all open; the table is migrated once
    (one version row on PostgreSQL) and reopening changes nothing."""
    _create_v1(log_target)
    start, opened, errors = threading.Barrier(4), [], []

    def open_one():
        start.wait()
        try:
            opened.append(open_log(log_target))
        except Exception as exc:  # noqa: BLE001 - any failure is what the test reports
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and len(opened) == 4, errors
    for log in opened:
        log.close()
    with open_log(log_target) as again:
        assert len(again.list()) == len(V1_ROWS)
    raw = Raw(log_target)
    try:
        if not raw.sqlite:
            assert raw.run("SELECT count(*) FROM decisions_schema_version")[0][0] == 1
        assert _version(raw) == SCHEMA_VERSION
    finally:
        raw.close()


def test_a_newer_schema_is_refused(log_target):
    """A log migrated by a newer kentino-expert is refused with a message naming both versions, not written to."""
    open_log(log_target).close()
    raw = Raw(log_target)
    try:
        raw.run(f"PRAGMA user_version = {SCHEMA_VERSION + 1}" if raw.sqlite
                else f"INSERT INTO decisions_schema_version (version) VALUES ({SCHEMA_VERSION + 1})")
    finally:
        raw.close()
    with pytest.raises(DecisionLogError, match=f"schema version {SCHEMA_VERSION + 1}, newer .*upgrade"):
        open_log(log_target)


@pytest.mark.parametrize("turn", [2**31, 3_000_000_000, 2**63 - 1])
def test_wide_turns_round_trip(log_target, turn):
    """Turns past 32 bits, up to 2**63-1, are stored and read back on both backends."""
    with open_log(log_target) as log:
        decision_id = log.record({"task": "inference"}, _answer("single-node", "final", "s"), "http", "s", turn)
        assert log.get(decision_id)["turn"] == turn and log.list()[0]["turn"] == turn


def test_times_read_back_as_iso_utc_text(log_target):
    """created_at reads back, on both backends, as ISO-8601 UTC with microseconds, the time record() took."""
    with open_log(log_target) as log:
        log._insert_many([{"decision_id": "t" * 32, "created_at": "2025-03-01T00:00:00.000007+00:00",
                           "source": "cli", "facts": "{}", "answer": "{}", "kind": "k", "digest": "d", "engine": "e"}])
        assert log.get("t" * 32)["created_at"] == "2025-03-01T00:00:00.000007+00:00"
        assert log.list(since="2025-03-01")[0]["created_at"] == "2025-03-01T00:00:00.000007+00:00"


@pytest.mark.parametrize("facts, field", [({"task": "inference", "note": "a\x00b"}, "facts"),
                                          ({"task": "inference", "x\x00": 1}, "facts"),
                                          ({"task": "inference", "deep": [{"v": ["\x00"]}]}, "facts")])
def test_nul_in_facts_is_an_input_error_on_both_backends(log_target, facts, field):
    """A NUL character (which PostgreSQL's JSONB refuses) is an InputError naming the facts, on both backends;
    nothing is written and the log stays writable; a quoted backslash-u0000 (not a NUL) is stored."""
    with open_log(log_target) as log:
        with pytest.raises(InputError) as info:
            log.record(facts, _answer("single-node", "final", "s"), "http")
        assert info.value.field == field and "NUL" in str(info.value)
        assert log.list() == [] and log.writable()
        literal = {"task": "inference", "note": "\\u0000"}
        assert log.get(log.record(literal, _answer("single-node", "final", "s"), "http"))["facts"] == literal


# The table as version 2 created it (before `instance` and the published rule sets), for the v2 -> v3 migration.
V2_SQLITE = V1_SQLITE.replace("    engine      TEXT NOT NULL\n", "    engine      TEXT NOT NULL,\n"
                              "    status      TEXT NULL,\n    summary     TEXT NULL\n")
V2_PG = (V2_SQLITE.replace("JSON NOT NULL", "JSONB NOT NULL").replace("created_at  TEXT", "created_at  TIMESTAMPTZ")
         .replace("turn        INTEGER", "turn        BIGINT"))
V2_INDEXES = ("CREATE INDEX decisions_created_id ON decisions (created_at, decision_id)",
              "CREATE INDEX decisions_kind_created_id ON decisions (kind, created_at, decision_id)")


def _create_v2(target: str) -> None:
    raw = Raw(target)
    try:
        for statement in (V2_SQLITE if raw.sqlite else V2_PG, *V2_INDEXES):
            raw.run(statement)
        if raw.sqlite:
            raw.run("PRAGMA user_version = 2")
        else:
            raw.run("CREATE TABLE decisions_schema_version (version INTEGER NOT NULL, "
                    "migrated_at TIMESTAMPTZ NOT NULL DEFAULT now())")
            raw.run("INSERT INTO decisions_schema_version (version) VALUES (2)")
        for decision_id, created, session, turn, kind, status, summary in V1_ROWS:
            raw.run("INSERT INTO decisions VALUES (?, ?, ?, ?, 'http', ?, ?, ?, ?, 'test', ?, ?)",
                    [decision_id, created, session, turn, json.dumps({"task": "inference"}),
                     json.dumps(_answer(kind, status, summary)), kind, "d" * 64, status, summary])
    finally:
        raw.close()


def _tables(raw: Raw) -> set:
    if raw.sqlite:
        return {r[0] for r in raw.run("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return {r[0] for r in raw.run("SELECT table_name FROM information_schema.tables "
                                  "WHERE table_schema = current_schema()")}


def test_a_version_2_log_gains_the_instance_column(log_target):
    """A version 2 log opens at the current version: its rows keep their columns and have no instance (NULL: recorded
    before instances were); a new decision records the log's instance; PostgreSQL gains the published rule-set tables
    and those of the replicas (version 4)."""
    _create_v2(log_target)
    with open_log(log_target) as log:
        old = log.get("a" * 32)
        assert (old["instance"], old["digest"], old["kind"]) == (None, "d" * 64, "single-node")
        assert [r["status"] for r in log.list()] == ["final", "provisional", "final"]
        log.instance = "replica-7:8001"
        new = log.record({"task": "inference"}, _answer("frontier", "final", "s"), "http")
        assert log.get(new)["instance"] == "replica-7:8001" and log.list(limit=1)[0]["instance"] == "replica-7:8001"
    raw = Raw(log_target)
    try:
        assert _version(raw) == SCHEMA_VERSION == 4 and "instance" in _column_types(raw)
        assert raw.sqlite or {"rule_sets", "rule_set_active", "rule_set_activations", "rule_set_trials",
                              "rule_set_acks", "replicas"} <= _tables(raw)
        if not raw.sqlite:
            assert raw.run("SELECT count(*) FROM decisions_schema_version")[0][0] == 2
    finally:
        raw.close()


def test_a_decision_without_an_instance_records_the_default(log_target, monkeypatch):
    """A log given no instance records $KENTINO_INSTANCE, else the host's name."""
    import socket
    with open_log(log_target) as log:
        monkeypatch.delenv("KENTINO_INSTANCE", raising=False)
        first = log.record({"task": "inference"}, _answer("frontier", "final", "s"), "cli")
        monkeypatch.setenv("KENTINO_INSTANCE", "from-the-environment")
        second = log.record({"task": "inference"}, _answer("frontier", "final", "s"), "cli")
        assert log.get(first)["instance"] == socket.gethostname()
        assert log.get(second)["instance"] == "from-the-environment"


@pytest.mark.parametrize("version", [2, SCHEMA_VERSION])
def test_a_sqlite_log_restored_from_a_dump_opens(tmp_path, version):
    """A SQLite log copied with `.dump` (which drops PRAGMA user_version) opens at the version its columns show,
    keeps its rows and records its version, instead of failing on 'duplicate column name: status'."""
    original = str(tmp_path / "original.db")
    if version == 2:
        _create_v2(original)
    else:
        with open_log(original) as log:
            log._insert_many([{"decision_id": "a" * 32, "created_at": "2025-03-01T00:00:00.000007+00:00",
                               "source": "cli", "facts": "{}", "answer": "{}", "kind": "k", "digest": "d",
                               "engine": "e"}])
    restored = tmp_path / "restored.db"
    with sqlite3.connect(original) as source, sqlite3.connect(restored) as target:
        target.executescript("\n".join(source.iterdump()))
    with open_log(restored) as log:
        assert log.get("a" * 32)["decision_id"] == "a" * 32
    raw = Raw(str(restored))
    try:
        assert _version(raw) == SCHEMA_VERSION and "instance" in _column_types(raw)
    finally:
        raw.close()
