"""Rows another program wrote into the decision log (bad JSON, a JSON string, a list, an answer of another shape):
the read commands, the API and the browser say so in one line instead of crashing."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kentino_expert.cli.main import main as cli
from kentino_expert.decisions.connect import open_log
from kentino_expert.errors import DecisionLogError, InputError
from kentino_expert.service.replay import replay

ROW = ("decision_id", "created_at", "source", "facts", "answer", "kind", "digest", "engine")
# (id, facts, answer, the field the error names)
HOSTILE = [("h-list", [1, 2], "just text", "facts"),
           ("h-null", None, None, "facts"),
           ("h-shape", {"task": "lora"}, {"trace": "nope", "recommendation": "x", "ruleset": 5}, "answer.status"),
           ("h-empty", {}, {}, "answer.status")]


def _insert(log, decision_id: str, facts_text: str, answer_text: str) -> None:
    """A row written by another program: the JSON columns as the text given."""
    json_value = "%s::jsonb" if log._P == "%s" else "?"
    values = [log._P, log._T, log._P, json_value, json_value, log._P, log._P, log._P]
    log._write(f"INSERT INTO decisions ({', '.join(ROW)}) VALUES ({', '.join(values)})",
               [decision_id, "2025-01-31T12:00:00+00:00", "http", facts_text, answer_text, "single-node", "d" * 64,
                "other"])


@pytest.fixture
def hostile_log(log_target):
    """A new log on each backend holding the HOSTILE rows."""
    log = open_log(log_target)
    for decision_id, facts, answer, _ in HOSTILE:
        _insert(log, decision_id, json.dumps(facts), json.dumps(answer))
    yield log
    log.close()


def test_a_json_string_in_the_log_reads_back_as_that_string(hostile_log):
    """A JSON string stored as the answer is read back as the string, not parsed a second time as JSON."""
    assert hostile_log.get("h-list")["answer"] == "just text"
    assert hostile_log.get("h-null")["answer"] is None


def test_text_that_is_not_json_is_a_decision_log_error(tmp_path):
    """On SQLite (JSON kept as text) a row whose answer is not JSON is a DecisionLogError naming the decision;
    `decisions show` says so in one line."""
    db = str(tmp_path / "hostile.db")
    with open_log(db) as log:
        _insert(log, "h-text", "{}", "{not json")
        with pytest.raises(DecisionLogError, match="h-text.*answer is not JSON"):
            log.get("h-text")
    shown = CliRunner().invoke(cli, ["decisions", "show", "h-text", "--db", db])
    assert shown.exit_code == 2 and "answer is not JSON" in shown.output and "Traceback" not in shown.output


@pytest.mark.parametrize("decision_id, field", [(h[0], h[3]) for h in HOSTILE])
def test_replay_of_a_row_of_another_shape_names_the_field(hostile_log, expert, decision_id, field):
    """replay() of a stored decision that is not in the shape the log writes is an InputError naming the field."""
    with pytest.raises(InputError) as info:
        replay(expert, hostile_log.get(decision_id))
    assert info.value.field == field


@pytest.mark.parametrize("command", [["decisions", "replay"], ["explain"]])
def test_cli_replay_and_explain_of_a_hostile_row_exit_2(tmp_path, command):
    """`decisions replay` and `explain` of each hostile row exit 2 with one line naming the decision and field."""
    db = str(tmp_path / "hostile.db")
    with open_log(db) as log:
        for decision_id, facts, answer, _ in HOSTILE:
            _insert(log, decision_id, json.dumps(facts), json.dumps(answer))
    for decision_id, _, _, field in HOSTILE:
        result = CliRunner().invoke(cli, [*command, decision_id, "--db", db])
        assert result.exit_code == 2, (decision_id, result.output)
        assert result.output.startswith(f"error: {decision_id}: cannot ") and field in result.output
        assert "Traceback" not in result.output


def test_the_api_and_browser_refuse_a_hostile_row_with_422(hostile_log):
    """GET /v1/decisions/{id}/explain and /ui/decisions/{id} of a hostile row are a 422 naming the field, not a
    500; GET /v1/decisions/{id} still shows the row as stored."""
    pytest.importorskip("fastapi", reason="the HTTP service needs fastapi")
    from fastapi.testclient import TestClient

    from kentino_expert.service.app import create_app
    client = TestClient(create_app(log=hostile_log), base_url="http://localhost")
    for decision_id, _, answer, field in HOSTILE:
        assert client.get(f"/v1/decisions/{decision_id}").json()["answer"] == answer
        explained = client.get(f"/v1/decisions/{decision_id}/explain")
        assert explained.status_code == 422 and explained.json()["detail"][0]["field"] == field
        page = client.get(f"/ui/decisions/{decision_id}")
        assert page.status_code == 422 and field in page.text


def test_decisions_list_escapes_control_characters_of_a_row(tmp_path):
    """`decisions list` prints a row's control characters as escapes: one line per decision, no terminal codes."""
    db = str(tmp_path / "hostile.db")
    with open_log(db) as log:
        log._write("INSERT INTO decisions (decision_id, created_at, session_id, source, facts, answer, kind, digest, "
                   "engine) VALUES (?, ?, ?, 'cli', '{}', '{}', ?, ?, 'other')",
                   ["h-ctrl", "2025-01-31T12:00:00+00:00", "s\x1b[31mred\nforged line", "k\nind", "d\x1b[2J"])
    listed = CliRunner().invoke(cli, ["decisions", "list", "--db", db])
    assert listed.exit_code == 0 and "\x1b" not in listed.output
    assert listed.output.splitlines()[1:] == ["1 decision(s)"] and "\\x1b[31m" in listed.output


def test_a_row_whose_json_is_not_json_is_a_422_not_a_503(tmp_path):
    """A SQLite row whose answer is not JSON is, over the API and in the browser, a 422 naming the column (as a
    row of another shape is), not a 503 'cannot be read now' that a client would retry; the log's path stays
    in the server's log."""
    pytest.importorskip("fastapi", reason="the HTTP service needs fastapi")
    from fastapi.testclient import TestClient

    from kentino_expert.service.app import create_app
    with open_log(tmp_path / "secret-name.db") as log:
        _insert(log, "h-text", "{}", "{not json")
        client = TestClient(create_app(log=log), base_url="http://localhost")
        for url in ("/v1/decisions/h-text", "/v1/decisions/h-text/explain"):
            response = client.get(url)
            assert response.status_code == 422 and response.json()["detail"][0]["field"] == "answer"
            assert "its stored answer is not JSON" in response.text and "secret-name" not in response.text
        page = client.get("/ui/decisions/h-text")
        assert page.status_code == 422 and "is not JSON" in page.text and "secret-name" not in page.text
