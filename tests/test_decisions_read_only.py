"""The read commands on a SQLite decision log this process cannot write (a read-only mount, an auditor's copy)."""
from __future__ import annotations

import sqlite3

from click.testing import CliRunner

from kentino_expert.cli.main import main
from kentino_expert.decisions.connect import open_log
from kentino_expert.decisions.schema import SCHEMA_VERSION
from kentino_expert.decisions.sqlite import SqliteDecisionLog

CHAT = {"task": "inference", "model": "llama-3.1-70b"}


def _refuse_writing(monkeypatch) -> None:
    """From now on opening a log to write fails as on a read-only mount (root ignores file modes)."""
    def refuse(conn):
        raise sqlite3.OperationalError("unable to open database file")
    monkeypatch.setattr(SqliteDecisionLog, "_set_up", staticmethod(refuse))


def test_read_commands_read_a_log_that_cannot_be_written(tmp_path, expert, monkeypatch):
    """list, show, replay and explain read an unwritable log read-only; prune says it cannot write, in one line."""
    db = str(tmp_path / "evidence.db")
    with open_log(db) as log:
        decision_id = log.record(CHAT, expert.recommend(CHAT), "cli")
    _refuse_writing(monkeypatch)
    runner = CliRunner()
    for args, expected in ((["decisions", "list"], "1 decision(s)"), (["decisions", "show", decision_id], '"facts"'),
                           (["decisions", "replay", decision_id], "unchanged"), (["explain", decision_id], "## Why")):
        result = runner.invoke(main, [*args, "--db", db])
        assert result.exit_code == 0 and expected in result.output, (args, result.output)
    pruned = runner.invoke(main, ["decisions", "prune", "--before", "2020-01-01", "--db", db])
    assert pruned.exit_code == 2 and "read-only" in pruned.output and len(pruned.output.splitlines()) == 1


def test_an_unwritable_log_of_an_older_version_says_it_must_be_migrated(tmp_path, expert, monkeypatch):
    """An unwritable log at an older schema version cannot be migrated: one line says so and what to do."""
    db = str(tmp_path / "old.db")
    with open_log(db) as log:
        log.record(CHAT, expert.recommend(CHAT), "cli")
    with sqlite3.connect(db) as raw:
        raw.execute("PRAGMA user_version = 2")
        raw.execute("ALTER TABLE decisions DROP COLUMN instance")
    _refuse_writing(monkeypatch)
    result = CliRunner().invoke(main, ["decisions", "list", "--db", db])
    expected = f"schema version 2 must be migrated to {SCHEMA_VERSION}"
    assert result.exit_code == 2 and expected in result.output, result.output
    assert "(cannot open for writing: unable to open database file): read a writable copy" in result.output
    assert len(result.output.splitlines()) == 1
