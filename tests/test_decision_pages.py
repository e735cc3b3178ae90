"""Bounded reads of the decision log: cursor pages, column-only listings, reads beside writes, and pruning
(SQLite and the real PostgreSQL server when KENTINO_TEST_PG_URL is set)."""
from __future__ import annotations

import base64
import json
import sys
import threading
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from kentino_expert.decisions import log as decisions_module
from kentino_expert.decisions.connect import open_log
from kentino_expert.decisions.log import MAX_HTTP_PAGE, MAX_PAGE
from kentino_expert.decisions.meta import encode_cursor
from kentino_expert.decisions.readers import ReaderPool
from kentino_expert.errors import DecisionLogError, InputError, LogUnavailable

ANSWER = {"status": "final", "recommendation": {"kind": "single-node", "summary": "Buy one node."},
          "ruleset": {"digest": "d" * 64, "engine": "test"}}
HOUR_AGO = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)


def _at(seconds: float) -> str:
    return (HOUR_AGO + timedelta(seconds=seconds)).isoformat(timespec="microseconds")


def _rows(log, times, kind="single-node", prefix="r"):
    """Decisions written at the given offsets from an hour ago (ids r000, r001, ... in the order given)."""
    rows = [{"decision_id": f"{prefix}{i:03d}", "created_at": _at(t), "session_id": None, "turn": i, "source": "cli",
             "facts": json.dumps({"task": "inference"}), "answer": json.dumps(ANSWER), "kind": kind,
             "digest": "d" * 64, "engine": "e", "status": "final", "summary": f"row {i}"}
            for i, t in enumerate(times)]
    log._insert_many(rows)
    return [r["decision_id"] for r in rows]


@pytest.fixture()
def fresh(log_target):
    """An empty decision log on each backend."""
    with open_log(log_target) as log:
        yield log


# -- pages ------------------------------------------------------------------------------------------

def test_cursor_pages_cover_every_row_once_in_order(fresh):
    """Pages of 7 followed by their cursors give every row once, newest first, ties on time broken by id;
    the last page has no cursor."""
    times = [i // 3 for i in range(25)]  # three rows share each second
    _rows(fresh, times)
    seen, cursor, pages = [], None, 0
    while True:
        page = fresh.page(limit=7, cursor=cursor)
        seen += [r["decision_id"] for r in page.decisions]
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    expected = [f"r{i:03d}" for i in sorted(range(25), key=lambda i: (times[i], f"r{i:03d}"), reverse=True)]
    assert seen == expected and pages == 4


def test_a_page_that_ends_the_log_has_no_cursor(fresh):
    """Exactly `limit` rows left: the page holds them and says there is no next page."""
    _rows(fresh, [1, 2, 3])
    page = fresh.page(limit=3)
    assert len(page.decisions) == 3 and page.next_cursor is None
    assert fresh.page(limit=2).next_cursor is not None


def test_pages_are_stable_while_decisions_are_added(fresh):
    """Decisions written between two page reads neither shift nor repeat the rows of the next pages."""
    _rows(fresh, range(10))
    first = fresh.page(limit=4)
    _rows(fresh, [100, 101, 102], prefix="new")  # newer than everything listed
    rest, cursor = [], first.next_cursor
    while cursor:
        page = fresh.page(limit=4, cursor=cursor)
        rest += [r["decision_id"] for r in page.decisions]
        cursor = page.next_cursor
    assert [r["decision_id"] for r in first.decisions] + rest == [f"r{i:03d}" for i in range(9, -1, -1)]


def test_pages_filter_by_kind_and_since(fresh):
    """kind and since apply to every page of a listing."""
    _rows(fresh, range(6), kind="single-node")
    _rows(fresh, range(6), kind="frontier", prefix="f")
    page = fresh.page(kind="frontier", since=_at(2), limit=2)
    rest = fresh.page(kind="frontier", since=_at(2), limit=2, cursor=page.next_cursor)
    assert [r["decision_id"] for r in page.decisions + rest.decisions] == ["f005", "f004", "f003", "f002"]
    assert rest.next_cursor is None


def test_pages_filter_by_session_across_cursors(fresh):
    """A session filter keeps only that conversation's rows, page after page; an id no decision can have is an
    InputError on session_id."""
    ids = [fresh.record({"task": "inference"}, ANSWER, "http", session_id="chat-a" if n % 3 else "chat-b", turn=n)
           for n in range(12)]
    wanted = [decision_id for n, decision_id in enumerate(ids) if n % 3]
    seen, cursor = [], None
    while True:
        page = fresh.page(limit=3, session_id="chat-a", cursor=cursor)
        seen += [row["decision_id"] for row in page.decisions]
        assert all(row["session_id"] == "chat-a" for row in page.decisions)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(wanted) and len(seen) == len(wanted)
    assert fresh.page(session_id="nobody").decisions == ()
    with pytest.raises(InputError) as refused:
        fresh.page(session_id="a\nb")
    assert refused.value.field == "session_id"


def test_a_listing_reads_columns_not_the_stored_answer(fresh):
    """Summaries come from the status and summary columns, and carry neither facts nor answer (the stored answer
    below says otherwise: a listing that parsed it would show it)."""
    fresh.record({"task": "inference"}, ANSWER, "http")
    decision_id = fresh.list()[0]["decision_id"]
    fresh._write(f"UPDATE decisions SET status = 'from-column', summary = 'column text' WHERE decision_id = "
                 f"{fresh._P}", [decision_id])
    (row,) = fresh.list()
    assert (row["status"], row["summary"]) == ("from-column", "column text")
    assert "answer" not in row and "facts" not in row
    assert fresh.get(decision_id)["answer"]["status"] == "final"
    assert fresh.page(with_facts=True).decisions[0]["facts"] == {"task": "inference"}


@pytest.mark.parametrize("limit", [0, -1, MAX_PAGE + 1, True, 2.5])
def test_page_limit_out_of_range_is_an_input_error(fresh, limit):
    """A page holds 1 to MAX_PAGE rows; anything else is an InputError on `limit`."""
    with pytest.raises(InputError) as info:
        fresh.page(limit=limit)
    assert info.value.field == "limit"


def _b64(value) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


@pytest.mark.parametrize("cursor", ["x", "%%%", "é", "A" * 500, _b64({"a": 1}), _b64(["2025-01-01", 5]),
                                    _b64(["yesterday", "abc"]), _b64(["2025-01-01", "a\nb"]), _b64(["2025-01-01"]),
                                    base64.urlsafe_b64encode(b"\xff\xfe").decode()])
def test_a_cursor_of_another_form_is_an_input_error(fresh, cursor):
    """A cursor not of the log's form (the old base64 ones among them) is an InputError on `cursor`, never a
    database error."""
    with pytest.raises(InputError) as info:
        fresh.page(cursor=cursor)
    assert info.value.field == "cursor"


def test_the_cli_pages_internally_and_prints_json_as_one_array(fresh, monkeypatch, log_target):
    """`decisions list --limit N` reads page after page (pages of 3 here) and --format json prints one JSON
    array with facts, status and summary."""
    monkeypatch.setattr(decisions_module, "MAX_PAGE", 3)
    ids = _rows(fresh, range(10))
    runner = CliRunner()
    text = runner.invoke(_cli(), ["decisions", "list", "--limit", "8", "--db", log_target])
    assert text.exit_code == 0 and text.output.splitlines()[-1] == "8 decision(s)"
    assert [line.split()[1] for line in text.output.splitlines()[:-1]] == ids[::-1][:8]
    shown = runner.invoke(_cli(), ["decisions", "list", "--limit", "100", "--format", "json", "--db", log_target])
    rows = json.loads(shown.output)
    assert [r["decision_id"] for r in rows] == ids[::-1]
    assert rows[0]["facts"] == {"task": "inference"} and rows[0]["summary"] == "row 9" and "answer" not in rows[0]
    empty = runner.invoke(_cli(), ["decisions", "list", "--kind", "frontier", "--format", "json", "--db", log_target])
    assert json.loads(empty.output) == []
    misspelt = runner.invoke(_cli(), ["decisions", "list", "--kind", "frontieer", "--db", log_target])
    assert misspelt.exit_code == 2 and "'frontieer' is not one of" in misspelt.output


# -- over HTTP --------------------------------------------------------------------------------------

def _client(expert, log):
    pytest.importorskip("fastapi", reason="the HTTP service needs fastapi")
    from fastapi.testclient import TestClient

    from kentino_expert.service.app import create_app
    return TestClient(create_app(expert_factory=lambda: expert, log=log), base_url="http://localhost",
                      raise_server_exceptions=False)


def test_http_listing_is_paged_with_next_cursor(fresh, expert):
    """GET /v1/decisions returns pages of at most MAX_HTTP_PAGE with next_cursor; following it lists every
    decision once; a larger limit and a forged cursor are 422s naming the field."""
    ids = _rows(fresh, range(5))
    with _client(expert, fresh) as client:
        seen, params = [], {"limit": 2}
        while True:
            body = client.get("/v1/decisions", params=params).json()
            seen += [d["decision_id"] for d in body["decisions"]]
            if body["next_cursor"] is None:
                break
            params = {"limit": 2, "cursor": body["next_cursor"]}
        assert seen == ids[::-1]
        assert body["decisions"][0]["status"] == "final" and body["decisions"][0]["summary"] == "row 0"
        for params, field in (({"limit": MAX_HTTP_PAGE + 1}, "limit"), ({"cursor": "nope"}, "cursor"),
                              ({"cursor": ""}, "cursor")):
            response = client.get("/v1/decisions", params=params)
            assert response.status_code == 422 and response.json()["detail"][0]["field"] == field, response.text
        assert len(client.get("/v1/decisions", params={"limit": MAX_HTTP_PAGE}).json()["decisions"]) == 5


def test_http_turn_past_32_bits_is_stored(fresh, expert):
    """POST /v1/recommend?turn=3000000000 is answered and logged (it was a 503 on PostgreSQL's INTEGER)."""
    with _client(expert, fresh) as client:
        response = client.post("/v1/recommend?session_id=s&turn=3000000000",
                               json={"task": "inference", "model": "llama-3.1-70b"})
        assert response.status_code == 200, response.text
        assert fresh.get(response.json()["decision_id"])["turn"] == 3_000_000_000


# -- reads beside writes ------------------------------------------------------------------------------

def _finishes(work, seconds: float = 20.0):
    """Run `work` in a thread; return its result, or fail if it is still blocked after `seconds` (a hang)."""
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("value", work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{work} did not finish in {seconds}s: it waits on the other side"
    return result["value"]


@contextmanager
def _writes_held(log):
    """Every write connection of the log busy, as while commits are in progress (SQLite: its one write
    connection's lock; PostgreSQL: each connection of its write pool, inside an open transaction)."""
    if not hasattr(log, "writer"):
        with log._lock:
            yield
        return
    with ExitStack() as stack:
        for _ in range(sys.modules[type(log).__module__].WRITERS):
            conn = stack.enter_context(log.writer("held by the test"))
            stack.enter_context(conn.transaction())
            conn.execute("SELECT count(*) FROM decisions").fetchall()
        yield


def test_a_read_does_not_wait_for_a_write_in_progress(fresh):
    """While the write connections are held (commits in progress), listings and lookups still answer."""
    ids = _rows(fresh, range(3))
    with _writes_held(fresh):
        assert len(_finishes(lambda: fresh.page(limit=10)).decisions) == 3
        assert _finishes(lambda: fresh.get(ids[0]))["decision_id"] == ids[0]


def _reader_count(log) -> int:
    """How many read connections the log's backend keeps."""
    return sys.modules[type(log).__module__].READERS


def test_a_write_does_not_wait_for_reads_in_progress(fresh):
    """With every read connection busy inside an open read transaction, a decision is still recorded."""
    _rows(fresh, range(3))
    held = [fresh.reader() for _ in range(_reader_count(fresh))]
    try:
        for context in held:
            conn = context.__enter__()
            conn.execute("BEGIN")
            conn.execute("SELECT count(*) FROM decisions").fetchall()  # holds its snapshot (and on PG its lock)
        decision_id = _finishes(lambda: fresh.record({"task": "inference"}, ANSWER, "http"))
    finally:
        for context in held:
            context.__exit__(None, None, None)
    assert fresh.get(decision_id) is not None


def test_read_connections_cannot_write(fresh):
    """A statement that writes, sent through a read connection, is refused by the database."""
    _rows(fresh, range(2))
    with pytest.raises(DecisionLogError, match="cannot read"):
        fresh._read("DELETE FROM decisions", [])
    assert len(fresh.list()) == 2


def test_reading_a_closed_log_is_an_error(log_target):
    """After close(), a read raises LogUnavailable rather than reopening the log."""
    log = open_log(log_target)
    log.list()
    log.close()
    with pytest.raises(LogUnavailable, match="closed"):
        log.list()


def test_reader_pool_bounds_reads_and_drops_failed_connections():
    """At most `size` connections are lent at once (the next waits, then fails cleanly); a connection whose
    read failed is closed and replaced; idle ones are reused."""
    made = []

    class Conn:
        closed = False

        def close(self):
            self.closed = True

    def connect():
        made.append(Conn())
        return made[-1]

    pool = ReaderPool(connect, "test.db", size=1, wait_seconds=0.01)
    with pool.connection() as first, pytest.raises(LogUnavailable, match="too many reads"), pool.connection():
        pass
    with pool.connection() as again:
        assert again is first
    with pytest.raises(RuntimeError), pool.connection():
        raise RuntimeError("read failed")
    assert first.closed
    with pool.connection() as fresh_one:
        assert fresh_one is not first and len(made) == 2
    pool.close()
    assert fresh_one.closed


# -- pruning ----------------------------------------------------------------------------------------

def test_prune_deletes_only_older_decisions_in_batches(fresh):
    """prune(before=T) deletes exactly the decisions created before T, a batch at a time; T itself and
    anything later stay; a dry run counts without deleting."""
    ids = _rows(fresh, [-86400 * 2, -86400, -0.000001, 0, 1, 60])
    cutoff = _at(0)
    assert fresh.prune(cutoff, dry_run=True) == 3 and len(fresh.list()) == 6
    assert fresh.prune(cutoff, batch=2) == 3
    assert sorted(r["decision_id"] for r in fresh.list()) == ids[3:]
    assert fresh.prune(cutoff) == 0


@pytest.mark.parametrize("before, message", [("2999-01-01", "in the future"), ("soon", "ISO-8601")])
def test_prune_refuses_a_future_or_unreadable_date(fresh, before, message):
    """prune never takes a date in the future (that would delete every decision) nor one it cannot read."""
    _rows(fresh, [0])
    with pytest.raises(DecisionLogError, match=message):
        fresh.prune(before)
    assert len(fresh.list()) == 1


def _cli():
    from kentino_expert.cli.main import main as standalone
    return standalone


def test_cli_prune(fresh, log_target):
    """`decisions prune` refuses to run without --before (one line, exit 2, nothing deleted), reports a dry run,
    and prints how many it deleted."""
    _rows(fresh, [-7200, -3600, 10])
    runner = CliRunner()
    for args in ([], ["--before", ""], ["--before", "2999-01-01"], ["--before", "tomorrow"]):
        refused = runner.invoke(_cli(), ["decisions", "prune", *args, "--db", log_target])
        assert refused.exit_code == 2 and refused.output.startswith("error: ") and \
            len(refused.output.splitlines()) == 1, (args, refused.output)
    assert len(fresh.list()) == 3
    cutoff = _at(0)
    dry = runner.invoke(_cli(), ["decisions", "prune", "--before", cutoff, "--dry-run", "--db", log_target])
    assert dry.exit_code == 0 and dry.output == f"would delete 2 decision(s) created before {cutoff}\n"
    done = runner.invoke(_cli(), ["decisions", "prune", "--before", cutoff, "--db", log_target])
    assert done.exit_code == 0 and done.output == f"deleted 2 decision(s) created before {cutoff}\n"
    assert [r["decision_id"] for r in fresh.list()] == ["r002"]


def test_cli_prune_needs_an_existing_log(tmp_path):
    """Pruning a log that does not exist is an error, and creates nothing."""
    result = CliRunner().invoke(_cli(), ["decisions", "prune", "--before", "2025-01-01", "--db",
                                         str(tmp_path / "none.db")])
    assert result.exit_code == 2 and "no decision log" in result.output and not (tmp_path / "none.db").exists()


@pytest.mark.parametrize("cursor", ["1.00", "-99999999999999999.ff", "99999999999999999." + "ff" * 200,
                                    "0." + "c3" * 3])
def test_any_cursor_of_the_form_is_a_position(fresh, cursor):
    """Every cursor of the form the OpenAPI document gives (CURSOR_PATTERN) is a position in the listing, also one
    the log did not give: a time before year 1 lists nothing older, one past the year 5000 everything, and an id
    whose bytes are not UTF-8 compares as their nearest text."""
    _rows(fresh, range(3))
    expected = 0 if cursor.startswith(("1.", "-", "0.")) else 3
    assert len(fresh.page(cursor=cursor).decisions) == expected


def test_encode_cursor_is_url_safe_and_of_the_documented_form():
    """A cursor travels in a query string unescaped (digits, '-', '.' and hex digits only), matches the pattern the
    OpenAPI document gives, and reads back as the row it was made from."""
    import re

    from kentino_expert.decisions.meta import CURSOR_PATTERN, decode_cursor
    for at, decision_id in (("2025-01-01T00:00:00.000000+00:00", "f" * 32), ("1969-07-20T20:17:40.000000+00:00",
                                                                           "id from élsewhere")):
        cursor = encode_cursor(at, decision_id)
        assert set(cursor) <= set("0123456789abcdef-.") and re.fullmatch(CURSOR_PATTERN.strip("^$"), cursor)
        assert decode_cursor(cursor) == (at, decision_id)
