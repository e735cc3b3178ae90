"""MCP over streamable HTTP at /mcp on a real server, driven by the MCP SDK's client: the tools, recommend (full and
compact) with no token, explain of a logged decision only with the read token, and the guard in front."""
from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("mcp", reason="MCP over HTTP needs the mcp package (pip install mcp)")
pytest.importorskip("uvicorn", reason="the live test needs uvicorn")
httpx = pytest.importorskip("httpx", reason="the live test drives the server with httpx")

import httpx2  # noqa: E402  (the mcp client's HTTP library)
from mcp import Client, ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from kentino_expert.service.compact import MAX_COMPACT_BYTES  # noqa: E402
from live_server import start_server, stop_server  # noqa: E402

READ_TOKEN = "mcp-http-read-token"
FACTS = {"task": "inference", "model": "llama-3.1-70b", "gpu": "rtx-5090"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server with a read token configured."""
    process, base = start_server(tmp_path_factory.mktemp("mcp-http"), KENTINO_READ_TOKEN=READ_TOKEN)
    yield base
    stop_server(process)


async def _legacy_session(base: str, headers: dict | None = None) -> dict:
    """The 2025 handshake (ClientSession over streamable HTTP): list, recommend both views, explain."""
    out = {}
    async with httpx2.AsyncClient(headers=headers or {}, timeout=30) as http, \
            streamable_http_client(f"{base}/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        out["tools"] = {tool.name: tool for tool in (await session.list_tools()).tools}
        full = await session.call_tool("recommend", {**FACTS, "session_id": "remote-1", "turn": 1})
        out["full"], out["full_error"] = full.structured_content, full.is_error
        short = await session.call_tool("recommend", {**FACTS, "session_id": "remote-1", "turn": 2, "view": "compact"})
        out["compact"], out["compact_text"] = short.structured_content, short.content[0].text
        explained = await session.call_tool("explain", {"decision_id": out["full"]["decision_id"]})
        out["explain_error"], out["explain"] = explained.is_error, explained.content[0].text
        by_facts = await session.call_tool("explain", {"facts": FACTS})
        out["facts_error"], out["facts_explain"] = by_facts.is_error, by_facts.content[0].text
    return out


async def _modern_explain(base: str, decision_id: str, token: str) -> tuple[bool, str]:
    """The SDK's high-level Client (protocol negotiated automatically) calling explain with a bearer token."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http, \
            Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
        result = await client.call_tool("explain", {"decision_id": decision_id})
        return result.is_error, result.content[0].text


def _run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=90))


def test_recommend_over_http_needs_no_token_and_is_logged(server):
    """Without a token a remote assistant lists both tools (recommend with the facts schema), gets full and compact
    answers, and each decision is in the log with source 'mcp'."""
    out = _run(_legacy_session(server))
    assert sorted(out["tools"]) == ["explain", "recommend"]
    assert out["tools"]["recommend"].input_schema["required"] == ["task"]
    assert out["tools"]["explain"].annotations.read_only_hint is True
    assert not out["full_error"] and out["full"]["trace"] and out["full"]["questions"] is not None
    compact = out["compact"]
    assert compact["view"] == "compact" and len(out["compact_text"].encode()) <= MAX_COMPACT_BYTES
    assert compact["recommendation"]["kind"] == out["full"]["recommendation"]["kind"]
    listed = httpx.get(f"{server}/v1/decisions", params={"session_id": "remote-1"},
                       headers={"Authorization": f"Bearer {READ_TOKEN}"}).json()["decisions"]
    assert [(row["decision_id"], row["source"], row["turn"]) for row in listed] == [
        (compact["decision_id"], "mcp", 2), (out["full"]["decision_id"], "mcp", 1)]


def test_explain_of_a_logged_decision_needs_the_read_token(server):
    """explain by decision_id reads the log: refused without the read token (facts are explained without one),
    answered with it as a bearer token."""
    out = _run(_legacy_session(server))
    assert out["explain_error"] and out["explain"].startswith("authorization: ")
    assert not out["facts_error"] and out["facts_explain"].startswith("# Recommendation: ")
    decision_id = out["full"]["decision_id"]
    assert _run(_modern_explain(server, decision_id, "wrong-token"))[0]
    is_error, text = _run(_modern_explain(server, decision_id, READ_TOKEN))
    assert not is_error and decision_id in text and text.startswith("# Recommendation: ")
    with_token = _run(_legacy_session(server, {"Authorization": f"Bearer {READ_TOKEN}"}))
    assert not with_token["explain_error"] and with_token["full"]["decision_id"] in with_token["explain"]


def test_the_guard_stands_in_front_of_mcp(server):
    """A foreign Host is a 400, an Origin from another host a 403 and a body not labelled JSON a 415, before MCP."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"accept": "application/json, text/event-stream"}
    ok = httpx.post(f"{server}/mcp", json=initialize, headers=accept)
    assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "kentino-expert"
    assert httpx.post(f"{server}/mcp", json=initialize, headers={**accept, "host": "evil.example"}).status_code == 400
    foreign = httpx.post(f"{server}/mcp", json=initialize, headers={**accept, "origin": "http://evil.example"})
    assert foreign.status_code == 403 and foreign.json()["detail"][0]["field"] == "origin"
    assert httpx.post(f"{server}/mcp", json=initialize,
                      headers={**accept, "origin": "http://localhost:3000"}).status_code == 200
    plain = httpx.post(f"{server}/mcp", content=json.dumps(initialize),
                       headers={**accept, "content-type": "text/plain"})
    assert plain.status_code == 415


def _initialize(**extra) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}, **extra}


ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def test_a_duplicate_key_is_a_parse_error_not_a_guess(server):
    """A tool call whose arguments name `task` twice is refused as POST /v1/recommend refuses it (a JSON-RPC parse
    error), and no decision is logged on a guess of which was meant."""
    raw = ('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recommend","arguments":'
           '{"task":"inference","task":"lora","session_id":"dup-key"}}}')
    response = httpx.post(f"{server}/mcp", content=raw, headers=ACCEPT)
    assert response.status_code == 400
    assert response.json()["error"] == {"code": -32700, "message": "Parse error: duplicate key 'task'", "data": {
        "code": "mcp-parse-error", "detail": [{"field": None, "message": "duplicate key 'task'"}]}}
    listed = httpx.get(f"{server}/v1/decisions", params={"session_id": "dup-key"},
                       headers={"Authorization": f"Bearer {READ_TOKEN}"}).json()["decisions"]
    assert listed == []


def test_only_post_is_served(server):
    """GET (the event stream a stateless server never writes to) and DELETE are a 405 naming POST, answered at
    once rather than held open."""
    for method in ("GET", "DELETE"):
        response = httpx.request(method, f"{server}/mcp", headers={"accept": "text/event-stream"}, timeout=10)
        assert response.status_code == 405 and response.headers["allow"] == "POST"
        assert response.json()["detail"][0]["field"] == "method"


def test_transport_refusals_are_json(server):
    """A body over 1 MB and a POST with no Content-Type get the API's JSON error body, not plain text."""
    big = json.dumps(_initialize(padding="x" * 1_000_001))
    too_big = httpx.post(f"{server}/mcp", content=big, headers=ACCEPT)
    assert too_big.status_code == 413 and too_big.json()["detail"][0]["field"] == "body"
    unlabelled = httpx.post(f"{server}/mcp", headers={"accept": ACCEPT["accept"]})
    assert unlabelled.status_code == 415 and unlabelled.json()["detail"][0]["field"] == "content-type"
    ok = httpx.post(f"{server}/mcp", json=_initialize(), headers=ACCEPT)
    assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "kentino-expert"
