"""The decision log on SQLite (and PostgreSQL when KENTINO_TEST_PG_URL is set), its errors, and replay."""
from __future__ import annotations

import os
import shutil
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kentino_expert.decisions.connect import open_log
from kentino_expert.errors import DecisionLogError
from kentino_expert.expert import Expert
from kentino_expert.paths import bundled
from kentino_expert.service.decide import decide
from kentino_expert.service.replay import replay

CHAT = {"task": "inference", "model": "llama-3.1-70b"}
FINETUNE = {"task": "full-finetune", "model": "llama-3.1-70b"}


def test_record_get_list(log, expert):
    """A recorded decision reads back whole, and list filters by kind and time, newest first."""
    session = f"s-{uuid.uuid4().hex}"
    answer = expert.recommend(CHAT)
    first = log.record(CHAT, answer, "http", session_id=session, turn=1)
    second = log.record(FINETUNE, expert.recommend(FINETUNE), "mcp", session_id=session, turn=2)
    row = log.get(first)
    assert row["decision_id"] == first and row["source"] == "http" and row["session_id"] == session
    assert row["turn"] == 1 and row["facts"] == CHAT
    assert row["answer"] == answer.model_dump(mode="json")
    assert row["kind"] == answer.recommendation.kind and row["digest"] == answer.ruleset.digest
    assert row["engine"] == answer.ruleset.engine
    created = datetime.fromisoformat(row["created_at"])
    assert created.tzinfo is not None and created.utcoffset() == timedelta(0)
    assert log.get("no-such-id") is None
    recent = log.list(since=(datetime.now(UTC) - timedelta(minutes=5)).isoformat())
    ids = [r["decision_id"] for r in recent]
    assert ids.index(second) < ids.index(first)
    kind = log.get(second)["kind"]
    assert all(r["kind"] == kind for r in log.list(kind=kind))
    assert log.list(since="2999-01-01") == []
    assert len(log.list(limit=1)) == 1
    assert log.writable()


def test_bad_since_is_an_error(log):
    """A since that is not ISO-8601 is a DecisionLogError with an example."""
    with pytest.raises(DecisionLogError, match="ISO-8601"):
        log.list(since="last tuesday")


@pytest.mark.parametrize("since", ["11111111111111111111", "1" * 5000, "20250131", "2025"])
def test_since_is_the_extended_iso_form_only(log, since):
    """Digits that fromisoformat happens to read (twenty ones: 1111-11-11T11:11:11.111111) are refused, quoted
    by their first 60 characters."""
    with pytest.raises(DecisionLogError, match="ISO-8601") as caught:
        log.list(since=since)
    assert len(caught.value.message) < 150


def test_sqlite_is_wal_with_full_sync(tmp_path):
    """The SQLite log runs in WAL mode with synchronous=FULL."""
    log = open_log(tmp_path / "wal.db")
    assert log._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert log._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    log.close()
    with sqlite3.connect(tmp_path / "wal.db") as other:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_default_path_from_env(tmp_path, monkeypatch):
    """Without a path the log opens $KENTINO_DB."""
    monkeypatch.setenv("KENTINO_DB", str(tmp_path / "env.db"))
    with open_log() as log:
        assert log.url == str(tmp_path / "env.db")
    assert (tmp_path / "env.db").exists()


def test_read_only_path_is_an_error(tmp_path):
    """A log where no file can be written raises DecisionLogError, never a silent loss."""
    if os.geteuid() == 0:  # root ignores file modes: /proc refuses new files to everyone
        target = "/proc/kentino-decisions-test.db"
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        target = locked / "decisions.db"
    with pytest.raises(DecisionLogError, match="cannot open"):
        open_log(target)


def test_missing_directory_and_bad_urls(tmp_path):
    """A missing directory, an unknown URL scheme and an unreachable PostgreSQL are DecisionLogErrors."""
    with pytest.raises(DecisionLogError, match="does not exist"):
        open_log(tmp_path / "no" / "such" / "dir.db")
    with pytest.raises(DecisionLogError, match="unsupported"):
        open_log("mysql://root@127.0.0.1/x")
    pytest.importorskip("psycopg", reason="the PostgreSQL log needs psycopg 3")
    pytest.importorskip("psycopg_pool", reason="the PostgreSQL log needs psycopg_pool")
    with pytest.raises(DecisionLogError, match="cannot open") as info:
        open_log("postgresql://nobody:secret@127.0.0.1:1/none")
    assert "secret" not in str(info.value)


def test_full_disk_is_an_error(tmp_path, expert):
    """A write that does not fit (a full disk, simulated with max_page_count) raises and records nothing."""
    log = open_log(tmp_path / "full.db")
    log._conn.execute("PRAGMA max_page_count = 8")
    big = {**CHAT, "note": "x" * 100_000}
    with pytest.raises(DecisionLogError, match="not recorded"):
        log.record(big, expert.recommend(CHAT), "cli")
    assert log.list() == []
    log.close()


def test_record_rejects_bad_source_and_closed_log(tmp_path, expert):
    """An unknown source and a closed log are DecisionLogErrors."""
    log = open_log(tmp_path / "closed.db")
    with pytest.raises(DecisionLogError, match="source"):
        log.record(CHAT, expert.recommend(CHAT), "carrier-pigeon")
    log.close()
    with pytest.raises(DecisionLogError, match="closed"):
        log.record(CHAT, expert.recommend(CHAT), "cli")
    assert not log.writable()


def test_decide_records_before_returning(tmp_path, expert):
    """decide() returns the id of a decision that is already committed (visible to another connection)."""
    log = open_log(tmp_path / "decide.db")
    body = decide(expert, log, CHAT, "cli", session_id="x", turn=0)
    with sqlite3.connect(tmp_path / "decide.db") as other:
        (count,) = other.execute("SELECT count(*) FROM decisions WHERE decision_id = ?", [body.decision_id]).fetchone()
    assert count == 1 and body.status in ("final", "provisional")
    log.close()


def _edited_rules(tmp_path):
    """A copy of the bundled rules with the 70B+ class moved out of reach (so 70B full fine-tuning decides
    otherwise)."""
    rules = tmp_path / "rules"
    shutil.copytree(bundled("rules"), rules)
    path = rules / "parameters.yaml"
    data = yaml.safe_load(path.read_text())
    assert "large_model_params_b" in data["parameters"], "the replay test edits large_model_params_b"
    data["parameters"]["large_model_params_b"]["value"] = 100000
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return rules


def test_replay_unchanged_and_changed(log, expert, tmp_path):
    """Replay with the same rules is unchanged; with an edited rules copy it reports the change and digest drift."""
    decision_id = log.record(FINETUNE, expert.recommend(FINETUNE), "cli")
    decision = log.get(decision_id)
    same = replay(expert, decision)
    assert same.unchanged and not same.digest_changed and same.rules_changed == []
    assert list(same.report()) == ["decision_id", "old_digest", "new_digest", "digest_changed", "unchanged",
                                   "changes", "rules_changed", "warnings_changed"]  # `--format json`, as documented
    edited = Expert(_edited_rules(tmp_path))
    try:
        other = replay(edited, decision)
    finally:
        edited.close()
    assert not other.unchanged and other.digest_changed
    assert other.old_digest == decision["digest"] and other.new_digest != decision["digest"]
    assert other.rules_changed or other.changes
    changed_rules = {r.rule: r.change for r in other.rules_changed}
    if "full-finetune-70b-plus-needs-ib-cluster" in changed_rules:
        assert changed_rules["full-finetune-70b-plus-needs-ib-cluster"] == "no longer fires"


def _cli():
    from kentino_expert.cli.main import main as standalone
    return standalone


def test_cli_decisions_list_show_replay(tmp_path, expert):
    """`decisions list/show/replay` read the log; replay exits 0 unchanged and 1 changed."""
    db = str(tmp_path / "cli.db")
    with open_log(db) as log:
        decision_id = log.record(FINETUNE, expert.recommend(FINETUNE), "cli", session_id="c1", turn=4)
    runner = CliRunner()
    listed = runner.invoke(_cli(), ["decisions", "list", "--db", db])
    assert listed.exit_code == 0 and decision_id in listed.output and "1 decision(s)" in listed.output
    shown = runner.invoke(_cli(), ["decisions", "show", decision_id, "--db", db])
    assert shown.exit_code == 0 and '"session_id": "c1"' in shown.output
    same = runner.invoke(_cli(), ["decisions", "replay", decision_id, "--db", db])
    assert same.exit_code == 0 and same.output.startswith("unchanged")
    changed = runner.invoke(_cli(), ["decisions", "replay", decision_id, "--db", db,
                                     "--rules", str(_edited_rules(tmp_path))])
    assert changed.exit_code == 1 and changed.output.startswith("changed") and "digest drift" in changed.output


def test_an_id_written_with_dashes_or_capitals_finds_its_decision(tmp_path, expert):
    """The same UUID with dashes, capitals, braces or a urn: prefix (as a ticket or a spreadsheet quotes it) finds
    the decision stored under its 32 hex digits, in the log and in `decisions show`; a near miss finds nothing."""
    db = str(tmp_path / "ids.db")
    with open_log(db) as log:
        decision_id = log.record(CHAT, expert.recommend(CHAT), "cli")
        dashed = str(uuid.UUID(decision_id))
        for written in (dashed, dashed.upper(), "{" + dashed + "}", "urn:uuid:" + dashed, decision_id.upper()):
            assert log.get(written)["decision_id"] == decision_id, written
        assert log.get(dashed[:-1] + ("0" if dashed[-1] != "0" else "1")) is None
    shown = CliRunner().invoke(_cli(), ["decisions", "show", dashed.upper(), "--db", db])
    assert shown.exit_code == 0 and f'"decision_id": "{decision_id}"' in shown.output


def test_cli_user_mistakes_exit_2(tmp_path):
    """A missing log, an unknown id and a bad --since exit 2 with one line and no traceback."""
    runner = CliRunner()
    missing = runner.invoke(_cli(), ["decisions", "list", "--db", str(tmp_path / "none.db")])
    assert missing.exit_code == 2 and "no decision log" in missing.output and "Traceback" not in missing.output
    db = str(tmp_path / "empty.db")
    open_log(db).close()
    unknown = runner.invoke(_cli(), ["decisions", "show", "nope", "--db", db])
    assert unknown.exit_code == 2 and "no decision 'nope'" in unknown.output
    since = runner.invoke(_cli(), ["decisions", "list", "--since", "soon", "--db", db])
    assert since.exit_code == 2 and "ISO-8601" in since.output


def test_an_unknown_id_of_any_length_is_quoted_short(tmp_path):
    """An unknown id of 100,000 characters is quoted by its first 200, as the API quotes it, not whole."""
    db = str(tmp_path / "empty.db")
    open_log(db).close()
    for command in (["decisions", "show"], ["decisions", "replay"], ["explain"]):
        result = CliRunner().invoke(_cli(), [*command, "x" * 100_000, "--db", db])
        assert result.exit_code == 2 and f"no decision '{'x' * 200}...' in " in result.output
        assert len(result.output) < 400, len(result.output)


# -- values a driver cannot store, and the read commands' log checks ------------------------------

_ANSWER = {"recommendation": {"kind": "single-node"}, "ruleset": {"digest": "d" * 64, "engine": "test"}}


@pytest.mark.parametrize("session_id, turn, field", [
    ("\ud800", 1, "session_id"), ("a\nb", 1, "session_id"), ("", 1, "session_id"), ("x" * 201, 1, "session_id"),
    ("tab\there", 1, "session_id"), ("line\u2028sep", 1, "session_id"), (["a"], 1, "session_id"),
    ("s", 2**70, "turn"), ("s", 2**63, "turn"), ("s", -5, "turn"), ("s", "²", "turn"), ("s", "--5", "turn"),
    ("s", True, "turn"), ("s", 1.5, "turn"), ("s", float("inf"), "turn"), ("s", float("nan"), "turn"),
    ("s", 1e19, "turn"), ("s", "1.0", "turn"),
])
def test_record_refuses_meta_a_driver_cannot_store(tmp_path, session_id, turn, field):
    """A session id with a surrogate or control character, or a turn outside 0..2**63-1, is an InputError
    naming the field; nothing is written and the log stays writable."""
    from kentino_expert.errors import InputError
    log = open_log(tmp_path / "meta.db")
    with pytest.raises(InputError) as info:
        log.record({"task": "inference"}, _ANSWER, "http", session_id=session_id, turn=turn)
    assert info.value.field == field
    assert log.writable() and log.record({"task": "inference"}, _ANSWER, "http", session_id="ok", turn=2**63 - 1)
    assert [r["turn"] for r in log.list()] == [2**63 - 1]
    log.close()


def test_check_meta_accepts_what_it_should():
    """Integers, digit strings and whole floats (3.0, as a fact's count is read) are turns; an integer session id
    is its digits; None is none."""
    from kentino_expert.decisions.meta import check_meta
    assert check_meta(None, None) == (None, None)
    assert check_meta(42, " 7 ") == ("42", 7)
    assert check_meta("chat-é-😀", 0) == ("chat-é-😀", 0)
    assert check_meta("s", 3.0) == ("s", 3) and type(check_meta("s", 3.0)[1]) is int


@pytest.mark.parametrize("value", [2**70, "\ud800"])
def test_a_failed_insert_leaves_no_transaction_open(tmp_path, value):
    """A value SQLite cannot bind (OverflowError, UnicodeEncodeError) rolls the transaction back: the
    next write and the readiness probe still work."""
    log = open_log(tmp_path / "bind.db")
    row = {"decision_id": "bad", "created_at": "2025-01-01T00:00:00+00:00", "session_id": "s", "turn": 1,
           "source": "http", "facts": "{}", "answer": "{}", "kind": "single-node", "digest": "d", "engine": "e"}
    row["turn" if isinstance(value, int) else "session_id"] = value
    with pytest.raises(DecisionLogError, match="not recorded"):
        log._insert_many([row])
    assert not log._conn.in_transaction and log.writable()
    assert log.record({"task": "inference"}, _ANSWER, "http")
    log.close()


@pytest.mark.parametrize("since, listed", [("9999-12-31T23:00:00-05:00", 0), ("0001-01-01T00:00:00+05:00", 1)])
def test_since_out_of_utc_range_is_the_first_or_last_moment(tmp_path, since, listed):
    """A since that exists in its own zone but not in UTC (a date-time RFC 3339 allows) filters from the first
    moment there is, or after the last: every decision, or none; `decisions list` says the same."""
    db = tmp_path / "since.db"
    with open_log(db) as log:
        log.record({"task": "inference"}, _ANSWER, "http")
        assert len(log.list(since=since)) == listed
    result = CliRunner().invoke(_cli(), ["decisions", "list", "--since", since, "--db", str(db)])
    assert result.exit_code == 0 and result.output.count("single-node") == listed, result.output


def test_prune_before_out_of_utc_range_is_an_error(tmp_path):
    """prune's --before deletes: a time that is not in UTC's years 1-9999 is refused, not taken as an edge."""
    with open_log(tmp_path / "before.db") as log, pytest.raises(DecisionLogError, match="ISO-8601"):
        log.prune(before="9999-12-31T23:00:00-05:00")


def test_cli_read_commands_refuse_a_missing_or_empty_log_in_url_form(tmp_path, expert):
    """sqlite:///missing.db is refused like a missing path (no log created); a 0-byte file is not given a schema."""
    runner = CliRunner()
    missing = tmp_path / "typo.db"
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for target in (f"sqlite://{missing}", str(empty), f"sqlite://{empty}"):
        for args in (["decisions", "list"], ["decisions", "show", "x"], ["decisions", "replay", "x"], ["explain", "x"]):
            result = runner.invoke(_cli(), [*args, "--db", target])
            assert result.exit_code == 2 and "decision log" in result.output, (target, args, result.output)
    assert not missing.exists() and empty.stat().st_size == 0
    with open_log(tmp_path / "real.db") as log:
        log.record(CHAT, expert.recommend(CHAT), "cli")
    listed = runner.invoke(_cli(), ["decisions", "list", "--db", f"sqlite://{tmp_path / 'real.db'}"])
    assert listed.exit_code == 0 and "1 decision(s)" in listed.output


def _foreign_databases(tmp_path) -> list[Path]:
    """SQLite files of another application: plain, in WAL mode, and with a `decisions` table of its own."""
    made = []
    for name, statements in (("app.db", ["CREATE TABLE customers (id INTEGER)"]),
                             ("wal.db", ["PRAGMA journal_mode = WAL", "CREATE TABLE customers (id INTEGER)"]),
                             ("mine.db", ["CREATE TABLE decisions (id INTEGER, verdict TEXT)"])):
        conn = sqlite3.connect(tmp_path / name)
        for statement in statements:
            conn.execute(statement)
        conn.commit()
        conn.close()
        made.append(tmp_path / name)
    return made


def test_cli_read_commands_leave_a_foreign_sqlite_file_unchanged(tmp_path):
    """Every command that must find a log refuses another app's SQLite file in one line, its bytes unchanged
    and nothing created beside it (no schema, no -wal or -shm)."""
    import hashlib
    files = _foreign_databases(tmp_path)
    before = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in files}
    runner = CliRunner()
    for path in files:
        for args in (["decisions", "list"], ["decisions", "show", "x"], ["decisions", "replay", "x"],
                     ["decisions", "prune", "--before", "2020-01-01"], ["explain", "x"]):
            result = runner.invoke(_cli(), [*args, "--db", str(path)])
            assert result.exit_code == 2, (path, args, result.output)
            assert result.output.splitlines() == [result.output.strip()] and "Traceback" not in result.output
            assert result.output.startswith(f"error: {path}: not a Kentino decision log"), result.output
    assert {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in files} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in files)
    tables = sqlite3.connect(tmp_path / "app.db").execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("customers",)]


def test_cli_read_commands_still_read_a_log_in_use(tmp_path, expert):
    """A log another process holds open (its -wal file present) and one closed are both read."""
    db = tmp_path / "busy.db"
    runner = CliRunner()
    with open_log(db) as log:
        log.record(CHAT, expert.recommend(CHAT), "cli")
        assert (tmp_path / "busy.db-wal").exists()
        listed = runner.invoke(_cli(), ["decisions", "list", "--db", str(db)])
        assert listed.exit_code == 0 and "1 decision(s)" in listed.output, listed.output
    listed = runner.invoke(_cli(), ["decisions", "list", "--db", f"sqlite://{db}"])
    assert listed.exit_code == 0 and "1 decision(s)" in listed.output, listed.output


def test_postgres_url_password_is_masked_everywhere():
    """The password is masked in user:pass@ and in ?password= (also percent-encoded); libpq's two-line
    connection error is one line."""
    pytest.importorskip("psycopg", reason="the PostgreSQL log needs psycopg 3")
    pytest.importorskip("psycopg_pool", reason="the PostgreSQL log needs psycopg_pool")
    for url in ("postgresql://127.0.0.1:1/db?password=hunter2", "postgresql://bob:hunter2@127.0.0.1:1/db",
                "postgresql://127.0.0.1:1/db?sslmode=disable&p%61ssword=hunter2",
                "postgresql://127.0.0.1:1/db?password=hunter2%zz"):
        with pytest.raises(DecisionLogError, match="cannot open") as info:
            open_log(url)
        assert "hunter2" not in str(info.value) and "\n" not in str(info.value), str(info.value)
    result = CliRunner().invoke(_cli(), ["decisions", "list", "--db", "postgresql://127.0.0.1:1/db?password=hunter2"])
    assert result.exit_code == 2 and "hunter2" not in result.output and len(result.output.splitlines()) == 1


def test_cli_unknown_id_on_postgresql_masks_the_password(pg_target):
    """`decisions show`, `replay` and `explain` of an unknown id name a PostgreSQL log without its password."""
    from kentino_expert.decisions.postgres import _url_passwords
    url = pg_target if _url_passwords(pg_target) else f"{pg_target}&password=kentino-test-secret"
    secret = _url_passwords(url)[0]
    open_log(url).close()
    for command in (["decisions", "show"], ["decisions", "replay"], ["explain"]):
        result = CliRunner().invoke(_cli(), [*command, "no-such-id", "--db", url])
        assert result.exit_code == 2 and "no decision 'no-such-id'" in result.output, result.output
        assert secret not in result.output and "***" in result.output
