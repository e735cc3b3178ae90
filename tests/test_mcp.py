"""The MCP stdio server, driven by the mcp client library in a subprocess: recommend, then explain."""
from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

pytest.importorskip("mcp", reason="the MCP server needs the mcp package (pip install mcp)")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from kentino_expert.decisions.connect import open_log  # noqa: E402


def _is_error(result) -> bool:
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def _json_of(result) -> dict:
    structured = getattr(result, "structured_content", getattr(result, "structuredContent", None))
    if isinstance(structured, dict) and "decision_id" in structured:
        return structured
    return json.loads(result.content[0].text)


async def _round_trip(db: str) -> dict:
    params = StdioServerParameters(command=sys.executable, args=["-m", "kentino_expert.service.mcp_server"],
                                   env={**os.environ, "KENTINO_DB": db})
    out = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        out["tools"] = sorted(tool.name for tool in (await session.list_tools()).tools)
        answer = await session.call_tool("recommend", {"facts": {"task": "full-finetune", "model": "llama-3.1-70b"},
                                                       "session_id": "mcp-1", "turn": 1})
        out["answer_error"], out["answer"] = _is_error(answer), _json_of(answer)
        explained = await session.call_tool("explain", {"decision_id": out["answer"]["decision_id"]})
        out["explain_error"], out["explain"] = _is_error(explained), explained.content[0].text
        bad = await session.call_tool("recommend", {"facts": {"task": "inference", "modle": "x"}})
        out["bad_error"], out["bad"] = _is_error(bad), bad.content[0].text
        unknown = await session.call_tool("explain", {"decision_id": "nope"})
        out["unknown_error"], out["unknown"] = _is_error(unknown), unknown.content[0].text
    return out


def test_mcp_recommend_and_explain_round_trip(tmp_path):
    """Over stdio the server lists both tools, logs recommend with source 'mcp', and explains the decision."""
    db = str(tmp_path / "mcp.db")
    out = asyncio.run(asyncio.wait_for(_round_trip(db), timeout=60))
    assert out["tools"] == ["explain", "recommend"]
    answer = out["answer"]
    assert not out["answer_error"] and answer["recommendation"]["kind"] and answer["status"] in ("final", "provisional")
    assert "questions" in answer and "why_not" in answer
    assert not out["explain_error"]
    assert out["explain"].startswith(f"# Recommendation: {answer['recommendation']['kind']}")
    assert answer["decision_id"] in out["explain"]
    assert out["bad_error"] and "modle" in out["bad"] and "model" in out["bad"]
    assert out["unknown_error"] and "no decision" in out["unknown"]
    with open_log(db) as log:
        stored = log.get(answer["decision_id"])
    assert stored["source"] == "mcp" and stored["session_id"] == "mcp-1" and stored["turn"] == 1
    assert stored["digest"] == answer["ruleset"]["digest"]


def _call(server, name: str, arguments: dict):
    """(is_error, text) of one in-process tool call, whichever way the mcp version reports a tool error."""
    from kentino_expert.service.mcp_server import server_classes
    tool_error = server_classes()[1]
    try:
        result = asyncio.run(server.call_tool(name, arguments))
    except tool_error as exc:
        return True, str(exc)
    if isinstance(result, tuple):  # mcp 1.x: (content, structured)
        result = result[0]
    if isinstance(result, list):
        return False, result[0].text
    return _is_error(result), result.content[0].text


@pytest.mark.parametrize("meta, field", [
    ({"session_id": ""}, "session_id"), ({"session_id": "x" * 500}, "session_id"),
    ({"session_id": "\ud800"}, "session_id"), ({"session_id": "a\nb"}, "session_id"),
    ({"turn": -5}, "turn"), ({"turn": 2**70}, "turn"), ({"turn": 2**63}, "turn"),
])
def test_mcp_recommend_applies_the_http_rules_to_session_and_turn(tmp_path, expert, meta, field):
    """The session id and turn rules of POST /v1/recommend hold over MCP: a tool error naming the field,
    nothing logged, and the log still takes the next decision."""
    from kentino_expert.service.mcp_server import build_server
    with open_log(tmp_path / "mcp.db") as log:
        server = build_server(expert, log)
        is_error, text = _call(server, "recommend", {"facts": {"task": "inference"}, **meta})
        assert is_error and f"{field}: " in text, text
        assert log.list() == [] and log.writable()
        ok, _ = _call(server, "recommend", {"facts": {"task": "inference"}, "session_id": "s", "turn": 2**63 - 1})
        assert not ok and [row["turn"] for row in log.list()] == [2**63 - 1]


def test_mcp_recommend_turns_an_evaluation_failure_into_a_tool_error(tmp_path, expert):
    """Arithmetic that fails on extreme facts is a clean tool error worded as over HTTP, not a crash."""
    from kentino_expert.answer.cache import AnswerCache
    from kentino_expert.service.mcp_server import build_server

    class Exploding:
        answer_cache = AnswerCache()  # its own: the shared expert's cache may hold these facts' evaluation

        def __getattr__(self, name):
            return getattr(expert, name)

        def recommend_traced(self, workload):
            raise OverflowError("cannot convert float infinity to integer")

    with open_log(tmp_path / "mcp.db") as log:
        is_error, text = _call(build_server(Exploding(), log), "recommend", {"facts": {"task": "inference"}})
        assert log.list() == []
    assert is_error and text.endswith("facts: these facts cannot be evaluated: OverflowError: cannot convert float "
                                      "infinity to integer"), text
