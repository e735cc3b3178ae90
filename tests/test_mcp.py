"""The MCP server: over stdio, driven by the mcp client library in a subprocess (tools, schemas, recommend, explain),
and in process through the SDK's in-memory client (the rules of POST /v1/recommend, views, errors)."""
from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

pytest.importorskip("mcp", reason="the MCP server needs the mcp package (pip install mcp)")

from mcp import Client, ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from kentino_expert.decisions.connect import open_log  # noqa: E402
from kentino_expert.domain.vocabulary import TASKS  # noqa: E402
from kentino_expert.service.compact import MAX_COMPACT_BYTES  # noqa: E402
from kentino_expert.service.mcp_server import build_server  # noqa: E402

FINETUNE = {"task": "full-finetune", "model": "llama-3.1-70b"}


def _text(result) -> str:
    return result.content[0].text


async def _round_trip(db: str) -> dict:
    params = StdioServerParameters(command=sys.executable, args=["-m", "kentino_expert.service.mcp_server"],
                                   env={**os.environ, "KENTINO_DB": db})
    out = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        out["tools"] = {tool.name: tool for tool in (await session.list_tools()).tools}
        answer = await session.call_tool("recommend", {**FINETUNE, "session_id": "mcp-1", "turn": 1})
        out["answer_error"], out["answer"] = answer.is_error, answer.structured_content
        out["answer_text"] = json.loads(_text(answer))
        short = await session.call_tool("recommend", {**FINETUNE, "view": "compact"})
        out["compact"], out["compact_text"] = short.structured_content, _text(short)
        explained = await session.call_tool("explain", {"decision_id": out["answer"]["decision_id"]})
        out["explain_error"], out["explain"] = explained.is_error, _text(explained)
        bad = await session.call_tool("recommend", {"task": "inference", "modle": "x"})
        out["bad_error"], out["bad"] = bad.is_error, _text(bad)
        unknown = await session.call_tool("explain", {"decision_id": "nope"})
        out["unknown_error"], out["unknown"] = unknown.is_error, _text(unknown)
    return out


@pytest.fixture(scope="module")
def stdio_round_trip(tmp_path_factory):
    """One stdio session against `python -m kentino_expert.service.mcp_server` and its log."""
    db = str(tmp_path_factory.mktemp("mcp") / "mcp.db")
    return db, asyncio.run(asyncio.wait_for(_round_trip(db), timeout=90))


def test_stdio_lists_both_tools_with_the_facts_schema_and_annotations(stdio_round_trip):
    """recommend takes the facts themselves (task required, its enum, each fact's description and question) plus
    session_id, turn and view; explain is annotated read-only, recommend not (it logs a decision)."""
    tools = stdio_round_trip[1]["tools"]
    assert sorted(tools) == ["explain", "recommend"]
    schema = tools["recommend"].input_schema
    assert schema["type"] == "object" and schema["required"] == ["task"] and schema["additionalProperties"] is False
    assert schema["properties"]["task"]["enum"] == list(TASKS)
    assert {"session_id", "turn", "view", "model", "concurrency"} <= set(schema["properties"])
    assert schema["properties"]["view"]["enum"] == ["full", "compact"]
    assert schema["properties"]["concurrency"]["x-ask"] and schema["properties"]["concurrency"]["description"]
    assert "$defs" not in schema
    recommend, explain = tools["recommend"].annotations, tools["explain"].annotations
    assert explain.read_only_hint is True and explain.open_world_hint is False
    assert recommend.read_only_hint is False and recommend.idempotent_hint is False
    assert recommend.destructive_hint is False and recommend.open_world_hint is False


def _without_defaults(node):
    """A JSON Schema without its `default` annotations (FastAPI leaves a null default out of the OpenAPI document)."""
    if isinstance(node, dict):
        return {k: _without_defaults(v) for k, v in node.items() if k != "default"}
    return [_without_defaults(v) for v in node] if isinstance(node, list) else node


def test_recommend_declares_the_output_schema_of_the_openapi_document(stdio_round_trip, tmp_path):
    """recommend, which returns structured content, declares it as its outputSchema: an object at the root, both
    results of the session (full and compact) valid against it, and each model in it the one POST /v1/recommend
    declares in the OpenAPI document; explain returns text only and declares none."""
    import jsonschema

    from kentino_expert.service.app import create_app
    out = stdio_round_trip[1]
    schema = out["tools"]["recommend"].output_schema
    assert schema is not None and schema["type"] == "object" and out["tools"]["explain"].output_schema is None
    for result in (out["answer"], out["compact"]):
        jsonschema.Draft202012Validator(schema).validate(result)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate({**out["answer"], "status": "maybe"})
    with open_log(tmp_path / "openapi.db") as log:
        document = create_app(log=log).openapi()
    declared = document["paths"]["/v1/recommend"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    ours = json.loads(json.dumps(schema).replace("#/$defs/", "#/components/schemas/"))
    assert ours["anyOf"] == declared["anyOf"]
    for name, model in ours["$defs"].items():
        assert _without_defaults(model) == _without_defaults(document["components"]["schemas"][name]), name


def test_stdio_recommend_is_logged_and_explained(stdio_round_trip):
    """recommend answers as POST /v1/recommend (structured and as JSON text), is logged with source 'mcp', and
    explain by its id gives the Markdown report."""
    db, out = stdio_round_trip
    answer = out["answer"]
    assert not out["answer_error"] and out["answer_text"] == answer
    assert answer["recommendation"]["kind"] and answer["status"] in ("final", "provisional")
    assert "questions" in answer and "why_not" in answer and answer["trace"]
    assert not out["explain_error"]
    assert out["explain"].startswith(f"# Recommendation: {answer['recommendation']['kind']}")
    assert answer["decision_id"] in out["explain"]
    with open_log(db) as log:
        stored = log.get(answer["decision_id"])
    assert stored["source"] == "mcp" and stored["session_id"] == "mcp-1" and stored["turn"] == 1
    assert stored["digest"] == answer["ruleset"]["digest"]
    assert stored["facts"] == FINETUNE  # session_id, turn and view are not facts


def test_stdio_compact_view(stdio_round_trip):
    """view='compact' gives the compact view of the same decision, within 2 KB, also logged."""
    db, out = stdio_round_trip
    short = out["compact"]
    assert short["view"] == "compact" and len(out["compact_text"].encode()) <= MAX_COMPACT_BYTES
    assert short["recommendation"]["kind"] == out["answer"]["recommendation"]["kind"]
    assert "trace" not in short and "figures" not in short
    with open_log(db) as log:
        assert log.get(short["decision_id"])["source"] == "mcp"


def test_stdio_errors_name_the_field(stdio_round_trip):
    """A misspelt fact and an unknown decision are tool errors naming the field."""
    out = stdio_round_trip[1]
    assert out["bad_error"] and out["bad"].startswith("modle: ") and "model" in out["bad"]
    assert out["unknown_error"] and out["unknown"].startswith("decision_id: no decision")


def _raw_stdio_exchange(db: str, lines: list[bytes]) -> list[dict]:
    """The messages the stdio server writes for `lines` (after the initialize handshake), read until the response
    to the last line's request id; a reader thread and a timeout: a server that never answers fails, not hangs."""
    import queue
    import subprocess
    import threading
    process = subprocess.Popen([sys.executable, "-m", "kentino_expert.service.mcp_server"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, env={**os.environ, "KENTINO_DB": db})
    out: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [out.put(json.loads(line)) for line in process.stdout], daemon=True).start()
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
    try:
        for line in [json.dumps(hello).encode(), b'{"jsonrpc":"2.0","method":"notifications/initialized"}', *lines]:
            process.stdin.write(line + b"\n")
        process.stdin.flush()
        last_id = json.loads(lines[-1])["id"]
        seen = []
        while not seen or seen[-1].get("id") != last_id:
            seen.append(out.get(timeout=60))
        return seen[1:]  # after initialize's result
    finally:
        process.stdin.close()
        process.wait(timeout=30)


def test_stdio_refuses_a_duplicate_key_as_http_does(tmp_path):
    """A line with a duplicate key, NaN, bytes that are not UTF-8 or over 1 MB gets JSON-RPC's parse error (id
    null) and decides nothing; the session goes on, and the next call is answered and logged."""
    db = str(tmp_path / "strict.db")
    call = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "recommend", "arguments": FINETUNE}}
    seen = _raw_stdio_exchange(db, [
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"recommend",'
        b'"arguments":{"task":"inference","task":"full-finetune","model":"llama-3.1-70b"}}}',
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recommend","arguments":{"qps":NaN}}}',
        b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"\xff"}}',
        json.dumps({**call, "id": 9, "params": {**call["params"], "padding": "x" * 1_000_000}}).encode(),
        json.dumps({**call, "id": 4}).encode()])
    errors = [message["error"] for message in seen if "error" in message]
    assert [message.get("id") for message in seen] == [None, None, None, None, 4]
    assert {error["code"] for error in errors} == {-32700}
    assert "duplicate key 'task'" in errors[0]["message"] and "UTF-8" in errors[2]["message"]
    assert "larger than 1000000 bytes" in errors[3]["message"]
    answered = seen[-1]["result"]
    assert not answered.get("isError") and answered["structuredContent"]["recommendation"]["kind"]
    with open_log(db) as log:
        assert [log.get(row["decision_id"])["facts"] for row in log.list()] == [FINETUNE]


def _call(server, name: str, arguments: dict):
    """(is_error, text) of one tool call through the SDK's in-process client."""
    async def call():
        async with Client(server) as client:
            result = await client.call_tool(name, arguments)
            return result.is_error, _text(result)
    return asyncio.run(asyncio.wait_for(call(), timeout=60))


@pytest.mark.parametrize("meta, field", [
    ({"session_id": ""}, "session_id"), ({"session_id": "x" * 500}, "session_id"),
    ({"session_id": "\ud800"}, "session_id"), ({"session_id": "a\nb"}, "session_id"),
    ({"turn": -5}, "turn"), ({"turn": 2**70}, "turn"), ({"turn": 2**63}, "turn"), ({"view": "tiny"}, "view"),
])
def test_mcp_recommend_applies_the_http_rules_to_session_turn_and_view(tmp_path, expert, meta, field):
    """The session id, turn and view rules of POST /v1/recommend hold over MCP: a tool error naming the field,
    nothing logged, and the log still takes the next decision."""
    with open_log(tmp_path / "mcp.db") as log:
        server = build_server(expert, log)
        is_error, text = _call(server, "recommend", {"task": "inference", **meta})
        assert is_error and text.startswith(f"{field}: "), text
        assert log.list() == [] and log.writable()
        is_error, _ = _call(server, "recommend", {"task": "inference", "session_id": "s", "turn": 2**63 - 1})
        assert not is_error and [row["turn"] for row in log.list()] == [2**63 - 1]


def test_mcp_recommend_turns_an_evaluation_failure_into_a_tool_error(tmp_path, expert):
    """Arithmetic that fails on extreme facts is a clean tool error worded as over HTTP, not a crash."""
    from kentino_expert.answer.cache import AnswerCache

    class Exploding:
        answer_cache = AnswerCache()  # its own: the shared expert's cache may hold these facts' evaluation

        def __getattr__(self, name):
            return getattr(expert, name)

        def recommend_traced(self, workload):
            raise OverflowError("cannot convert float infinity to integer")

        decide_parts = recommend_traced  # what decide() asks of an expert

    with open_log(tmp_path / "mcp.db") as log:
        is_error, text = _call(build_server(Exploding(), log), "recommend", {"task": "inference"})
        assert log.list() == []
    assert is_error and text == "facts: these facts cannot be evaluated: OverflowError: cannot convert float " \
                                "infinity to integer", text


def test_a_log_failure_is_a_tool_error_that_names_no_database(tmp_path, expert):
    """A decision log that cannot be written or read is a tool error in a sentence, as over HTTP: the log's own
    words (on PostgreSQL its user, host and database) stay in the server's log."""
    log = open_log(tmp_path / "hidden-name.db")
    server = build_server(expert, log)
    log.close()
    wrote = _call(server, "recommend", FINETUNE)
    read = _call(server, "explain", {"decision_id": "d" * 32})
    assert wrote[0] and wrote[1].startswith("the decision could not be recorded, so it is not given"), wrote
    assert read[0] and read[1].startswith("the decision log cannot be read now"), read
    assert "hidden-name" not in wrote[1] + read[1]


@pytest.mark.parametrize("arguments, start", [
    ({}, "give a decision_id or facts"), ({"decision_id": 7}, "decision_id: must be a string"),
    ({"facts": ["task"]}, "facts: must be a JSON object"), ({"decision": "x"}, "decision: unknown argument"),
])
def test_explain_refuses_what_it_cannot_explain(tmp_path, expert, arguments, start):
    """explain without an id or facts, with an id that is not text, facts that are not an object, or an argument
    it does not take, is a tool error saying which."""
    with open_log(tmp_path / "mcp.db") as log:
        is_error, text = _call(build_server(expert, log), "explain", arguments)
    assert is_error and text.startswith(start), text


def test_explain_of_facts_logs_nothing(tmp_path, expert):
    """explain with facts gives the report without writing a decision."""
    with open_log(tmp_path / "mcp.db") as log:
        is_error, text = _call(build_server(expert, log), "explain", {"facts": FINETUNE})
        assert log.list() == []
    assert not is_error and text.startswith("# Recommendation: ")


def test_explain_takes_the_arguments_recommend_took(tmp_path, expert):
    """explain with facts that still carry session_id, turn and view (a bot's `recommend` arguments as they were)
    explains the facts, as recommend decides them, instead of calling session_id an unknown fact."""
    arguments = {**FINETUNE, "session_id": "chat-1", "turn": 2, "view": "compact"}
    with open_log(tmp_path / "mcp.db") as log:
        server = build_server(expert, log)
        is_error, text = _call(server, "explain", {"facts": arguments})
        plain = _call(server, "explain", {"facts": FINETUNE})[1]
    assert not is_error and text == plain, text[:200]


def test_an_unknown_tool_is_invalid_params(tmp_path, expert):
    """A tool the server does not have is JSON-RPC's invalid params (-32602), as the MCP specification says, naming
    it and the tools there are, not a tool result marked isError."""
    from mcp.shared.exceptions import MCPError

    async def call(server):
        async with Client(server) as client:
            try:
                return await client.call_tool("delete_everything", {})
            except MCPError as exc:
                return exc

    with open_log(tmp_path / "mcp.db") as log:
        raised = asyncio.run(asyncio.wait_for(call(build_server(expert, log)), timeout=60))
    assert isinstance(raised, MCPError) and raised.code == -32602, raised
    assert "delete_everything" in raised.message and "recommend and explain" in raised.message


def test_without_its_lifespan_or_its_package_the_http_endpoint_says_so(tmp_path, monkeypatch):
    """/mcp answers 503 in an app whose lifespan did not run, and 501 naming the package where the mcp package cannot
    be imported (an install without its dependencies); the `mcp` command then exits 2 naming the package."""
    from click.testing import CliRunner
    from fastapi.testclient import TestClient

    from kentino_expert.cli import service as cli_service
    from kentino_expert.service import mcp_http
    from kentino_expert.service.app import create_app

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    with open_log(tmp_path / "mcp.db") as log:
        not_started = TestClient(create_app(log=log), base_url="http://localhost").post("/mcp", json=initialize)
        assert not_started.status_code == 503 and "lifespan" in not_started.json()["detail"][0]["message"]
        monkeypatch.setattr(mcp_http, "mcp_installed", lambda: False)
        with TestClient(create_app(log=log), base_url="http://localhost") as client:
            missing = client.post("/mcp", json=initialize)
            assert missing.status_code == 501 and "needs the mcp package" in missing.json()["detail"][0]["message"]
            assert client.post("/v1/recommend", json=FINETUNE).status_code == 200
    monkeypatch.setattr(cli_service, "mcp_installed", lambda: False)
    result = CliRunner().invoke(cli_service.standalone, ["mcp", "--db", str(tmp_path / "cli.db")])
    assert result.exit_code == 2 and "needs the mcp package" in result.output


PYDANTIC_INTERNALS = ("errors.pydantic.dev", "[type=", "input_value", "input_type", "validation error for")
WRONG_MESSAGES = [  # (message, JSON-RPC code, the field its error names first)
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "x"}, -32600, "params"),
    ({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": 5, "arguments": {}}}, -32602,
     "params.name"),
    ({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "recommend", "arguments": []}}, -32602,
     "params.arguments"),
    ({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"arguments": {}}}, -32602, "params.name"),
    ({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"cursor": 5}}, -32602, "params.cursor"),
    ({"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": {}}, -32602, "params.protocolVersion"),
    ({"jsonrpc": "1.0", "id": 7, "method": "ping"}, -32600, "jsonrpc"),
    ({"jsonrpc": "2.0", "id": 8.5, "method": "ping"}, -32600, "id"),
    ([{"jsonrpc": "2.0", "id": 9, "method": "ping"}], -32600, None),
]


def _says_which_field(error: dict, code: int, field) -> None:
    """A JSON-RPC error in the HTTP API's words: its code, 'field: message' on one line, every field error in
    data.detail, and nothing of pydantic's own report."""
    assert error["code"] == code, error
    assert "\n" not in error["message"] and not any(word in json.dumps(error) for word in PYDANTIC_INTERNALS), error
    assert error["message"].startswith(f"{field}: " if field else "a JSON-RPC message is"), error
    assert error["data"]["detail"][0]["field"] == field, error


@pytest.mark.parametrize("message, code, field", WRONG_MESSAGES)
def test_mcp_over_http_words_a_wrong_message_as_the_http_api(tmp_path, message, code, field):
    """A message that is not JSON-RPC, or whose params do not fit its method, is refused before the mcp package
    sees it, with the field named as POST /v1/recommend names it (the package echoed pydantic's report, with its
    error types, the input and links to pydantic's site, or said only 'Invalid request parameters')."""
    from fastapi.testclient import TestClient

    from kentino_expert.service.app import create_app
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
    with open_log(tmp_path / "mcp.db") as log, \
            TestClient(create_app(log=log), base_url="http://localhost") as client:
        response = client.post("/mcp", json=message, headers=headers)
        assert response.status_code == (400 if code == -32600 else 200), response.text
        _says_which_field(response.json()["error"], code, field)
        assert log.list() == []


def test_mcp_over_stdio_words_a_wrong_message_as_the_http_api(tmp_path):
    """Over stdio too: each wrong message gets its error in the HTTP API's words, and the session goes on."""
    lines = [json.dumps(message).encode() for message, _, _ in WRONG_MESSAGES[:-1]]
    seen = _raw_stdio_exchange(str(tmp_path / "stdio.db"), [*lines, b'{"jsonrpc":"2.0","id":99,"method":"ping"}'])
    by_id = {message.get("id"): message for message in seen}
    for message, code, field in WRONG_MESSAGES[:-1]:
        wanted = message["id"] if isinstance(message["id"], int) else None
        _says_which_field(by_id[wanted]["error"], code, field)
    assert by_id[99]["result"] == {}


def test_stdio_reads_a_long_line_in_pieces_and_keeps_only_its_head():
    """A line longer than the limit comes through as its first limit + 1 bytes (refused as too large), and the
    lines after it come through whole, so one endless line is never held in memory."""
    import io

    import anyio

    from kentino_expert.service.mcp_stdio import bounded_lines

    async def lines(data: bytes) -> list[bytes]:
        return [line async for line in bounded_lines(io.BytesIO(data), 10)]

    got = anyio.run(lines, b"short\n" + b"y" * 95 + b"\n" + b"z" * 10 + b"\n" + b"{}")
    assert got == [b"short\n", b"y" * 11, b"z" * 10 + b"\n", b"{}"]


def test_explain_of_a_row_that_is_not_json_says_so_without_the_log(tmp_path, expert):
    """explain of a stored decision whose answer is not JSON is a tool error naming the decision and the column,
    not 'the decision log cannot be read now', and not the log's path."""
    with open_log(tmp_path / "hidden-name.db") as log:
        log._write("INSERT INTO decisions (decision_id, created_at, source, facts, answer, kind, digest, engine) "
                   "VALUES ('h-text', '2025-01-31T12:00:00+00:00', 'cli', '{}', '{not json', 'k', 'd', 'e')", [])
        is_error, text = _call(build_server(expert, log), "explain", {"decision_id": "h-text"})
    assert is_error and text == "decision 'h-text': its stored answer is not JSON", text
