"""The decision log's table on SQLite and PostgreSQL, its schema version, and the migrations to it.

Version 1 (before versions were recorded): `turn` INTEGER (32-bit on PostgreSQL), `created_at` TEXT.
Version 2: `turn` BIGINT and `created_at` TIMESTAMPTZ on PostgreSQL; `status` and `summary` columns,
written with each decision (and filled from the stored answers when an old table is migrated), so
a listing reads columns and never parses an answer; indexes that serve newest-first pages.
Version 3: an `instance` column, the replica that answered (NULL in rows written before it was
recorded); on PostgreSQL the published rule sets (`rule_sets`) and the one replicas serve
(`rule_set_active`), written by `rules publish` (published.py).
Version 4: on PostgreSQL, what makes replicas serve one rule set (published.py, replicas.py): every activation
in order (`rule_set_activations`: a replica that cannot build the active set serves the newest earlier one it
can), the trials `rules publish` asks the replicas for before it activates a set (`rule_set_trials`), their
answers (`rule_set_acks`), and the replicas alive (`replicas`: a heartbeat). SQLite has none of them.
SQLite keeps the version in PRAGMA user_version; PostgreSQL in the table decisions_schema_version.
Both migrate inside one transaction that also holds the migration lock, so two replicas opening
an old log at once migrate it once.
"""
from __future__ import annotations

import zlib

from ..errors import DecisionLogError

SCHEMA_VERSION = 4
# a whole decision as `get` returns it (status and summary are in its answer)
ROW_COLUMNS = ("decision_id", "created_at", "session_id", "turn", "source", "facts", "answer", "kind", "digest",
               "engine", "instance")
COLUMNS = ROW_COLUMNS + ("status", "summary")  # what a write stores
V1_COLUMNS = tuple(c for c in ROW_COLUMNS if c != "instance")  # the table of version 1: every log has these
LIST_COLUMNS = ("decision_id", "created_at", "session_id", "turn", "source", "kind", "digest", "engine", "status",
                "summary", "instance")  # what a listing reads: no JSON column
# any transaction that migrates the table first takes this lock (released at its commit)
PG_MIGRATION_LOCK = zlib.crc32(b"kentino_expert.decision_log.schema")

_TABLE = """
CREATE TABLE IF NOT EXISTS decisions (
    decision_id TEXT PRIMARY KEY,
    created_at  {time} NOT NULL,
    session_id  TEXT NULL,
    turn        {int} NULL,
    source      TEXT NOT NULL CHECK (source IN ('http', 'mcp', 'cli')),
    facts       {json} NOT NULL,
    answer      {json} NOT NULL,
    kind        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    engine      TEXT NOT NULL,
    status      TEXT NULL,
    summary     TEXT NULL,
    instance    TEXT NULL
)"""
# newest-first pages, plain and of one kind; the time index also serves `since` and pruning
_INDEXES = ("CREATE INDEX IF NOT EXISTS decisions_created_id ON decisions (created_at, decision_id)",
            "CREATE INDEX IF NOT EXISTS decisions_kind_created_id ON decisions (kind, created_at, decision_id)")
_OLD_INDEXES = ("DROP INDEX IF EXISTS decisions_created_at", "DROP INDEX IF EXISTS decisions_kind")

SQLITE_CREATE = (_TABLE.format(time="TEXT", int="INTEGER", json="JSON"), *_INDEXES)  # INTEGER: 64-bit

# from version 1 to 2, statement by statement
SQLITE_TO_2 = ("ALTER TABLE decisions ADD COLUMN status TEXT",
               "ALTER TABLE decisions ADD COLUMN summary TEXT",
               "UPDATE decisions SET status = json_extract(answer, '$.status'), "
               "summary = json_extract(answer, '$.recommendation.summary')",
               *_OLD_INDEXES, *_INDEXES)
PG_TO_2 = ("ALTER TABLE decisions ALTER COLUMN turn TYPE BIGINT, "
           "ALTER COLUMN created_at TYPE TIMESTAMPTZ USING created_at::timestamptz, "
           "ADD COLUMN status TEXT, ADD COLUMN summary TEXT",
           "UPDATE decisions SET status = answer->>'status', summary = answer->'recommendation'->>'summary'",
           *_OLD_INDEXES, *_INDEXES)
SQLITE_TO_3 = ("ALTER TABLE decisions ADD COLUMN instance TEXT",)
# the published rule sets, by digest (files: {"rules/NAME.yaml" | "knowledge/NAME.yaml": text}), and the
# one row naming the set every replica serves
PG_RULE_SETS = ("""CREATE TABLE IF NOT EXISTS rule_sets (
    digest       TEXT PRIMARY KEY,
    files        JSONB NOT NULL,
    published_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    published_by TEXT NOT NULL
)""", """CREATE TABLE IF NOT EXISTS rule_set_active (
    singleton    BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    digest       TEXT NOT NULL REFERENCES rule_sets (digest),
    activated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    activated_by TEXT NOT NULL
)""")
PG_TO_3 = ("ALTER TABLE decisions ADD COLUMN instance TEXT", *PG_RULE_SETS)
# every activation in order, the trials publish asks for and the replicas' answers, the replicas alive
PG_REPLICA_TABLES = ("""CREATE TABLE IF NOT EXISTS rule_set_activations (
    seq          BIGSERIAL PRIMARY KEY,
    digest       TEXT NOT NULL REFERENCES rule_sets (digest),
    activated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    activated_by TEXT NOT NULL
)""", """CREATE TABLE IF NOT EXISTS rule_set_trials (
    trial        BIGSERIAL PRIMARY KEY,
    digest       TEXT NOT NULL REFERENCES rule_sets (digest),
    requested_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    requested_by TEXT NOT NULL
)""", """CREATE TABLE IF NOT EXISTS rule_set_acks (
    trial        BIGINT NOT NULL,
    replica      TEXT NOT NULL,
    digest       TEXT NOT NULL,
    result       TEXT NOT NULL CHECK (result IN ('ok', 'refused')),
    reason       TEXT NULL,
    at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (trial, replica)
)""", """CREATE TABLE IF NOT EXISTS replicas (
    replica      TEXT PRIMARY KEY,
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    seen_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    serving      TEXT NULL,
    source       TEXT NULL,
    detail       TEXT NULL
)""")
PG_TO_4 = (*PG_REPLICA_TABLES, "INSERT INTO rule_set_activations (digest, activated_at, activated_by) "
           "SELECT digest, activated_at, activated_by FROM rule_set_active")
PG_CREATE = (_TABLE.format(time="TIMESTAMPTZ", int="BIGINT", json="JSONB"), *_INDEXES, *PG_RULE_SETS,
             *PG_REPLICA_TABLES)
# the statements that bring a log from the version found (the key) to the next one; 0: none yet
SQLITE_STEPS = {0: SQLITE_CREATE, 1: SQLITE_TO_2, 2: SQLITE_TO_3, 3: ()}
PG_STEPS = {0: PG_CREATE, 1: PG_TO_2, 2: PG_TO_3, 3: PG_TO_4}
PG_VERSION_TABLE = ("CREATE TABLE IF NOT EXISTS decisions_schema_version ("
                    "version INTEGER NOT NULL, migrated_at TIMESTAMPTZ NOT NULL DEFAULT now())")


def migrate_sqlite(conn) -> int:
    """Bring the log in `conn` (no transaction open) to SCHEMA_VERSION; return the version found."""
    conn.execute("BEGIN IMMEDIATE")  # the write lock: a second process waits here, then finds the work done
    try:
        recorded = conn.execute("PRAGMA user_version").fetchone()[0]
        found = sqlite_version(recorded, {row[1] for row in conn.execute("PRAGMA table_info(decisions)")})
        for statement in _statements(SQLITE_STEPS, found):
            conn.execute(statement)
        if recorded < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found


def migrate_postgres(conn) -> int:
    """Bring the log `conn` reaches to SCHEMA_VERSION in one transaction; return the version found."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [PG_MIGRATION_LOCK])
        conn.execute(PG_VERSION_TABLE)
        recorded = conn.execute("SELECT max(version) FROM decisions_schema_version").fetchone()[0]
        table = conn.execute("SELECT to_regclass('decisions') IS NOT NULL").fetchone()[0]
        found = _found_version(recorded or 0, table)
        for statement in _statements(PG_STEPS, found):
            conn.execute(statement)
        if found < SCHEMA_VERSION:
            conn.execute("INSERT INTO decisions_schema_version (version) VALUES (%s)", [SCHEMA_VERSION])
    return found


def _statements(steps: dict, found: int) -> list[str]:
    """What brings a log at version `found` to SCHEMA_VERSION: a new one is created whole, an old one migrated
    a version at a time."""
    if found == 0:
        return list(steps[0])
    return [statement for version in range(found, SCHEMA_VERSION) for statement in steps[version]]


# the column each version added, newest first: what a SQLite log without a recorded version is
_ADDED_COLUMNS = ((3, "instance"), (2, "status"))


def sqlite_version(recorded: int, columns: set) -> int:
    """The version of a SQLite log: `recorded` (PRAGMA user_version), or, when that is 0, the version its
    `decisions` columns show. A log restored from `sqlite3 old.db .dump` (which does not carry user_version)
    is at the version it was, not version 1 migrated again ("duplicate column name: status")."""
    if recorded or not columns:
        return _found_version(recorded, bool(columns))
    return next((version for version, column in _ADDED_COLUMNS if column in columns), 1)


def _found_version(recorded: int, table_exists: bool) -> int:
    """0: no log yet; 1: a table from before versions were recorded; else the version recorded."""
    if recorded > SCHEMA_VERSION:
        raise DecisionLogError(f"the decision log has schema version {recorded}, newer than this kentino-expert "
                               f"knows ({SCHEMA_VERSION}): upgrade kentino-expert")
    if recorded:
        return recorded
    return 1 if table_exists else 0
