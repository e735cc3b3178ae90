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

from kentino_expert.decisions import DecisionLog  # noqa: E402


def _is_error(result) -> bool:
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def _json_of(result) -> dict:
    structured = getattr(result, "structured_content", getattr(result, "structuredContent", None))
    return structured if isinstance(structured, dict) and "decision_id" in structured else json.loads(result.content[0].text)


async def _round_trip(db: str) -> dict:
    params = StdioServerParameters(command=sys.executable, args=["-m", "kentino_expert.mcp_server"],
                                   env={**os.environ, "KENTINO_DB": db})
    out = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
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
    assert not out["explain_error"] and out["explain"].startswith(f"# Recommendation: {answer['recommendation']['kind']}")
    assert answer["decision_id"] in out["explain"]
    assert out["bad_error"] and "modle" in out["bad"] and "model" in out["bad"]
    assert out["unknown_error"] and "no decision" in out["unknown"]
    with DecisionLog.open(db) as log:
        stored = log.get(answer["decision_id"])
    assert stored["source"] == "mcp" and stored["session_id"] == "mcp-1" and stored["turn"] == 1
    assert stored["digest"] == answer["ruleset"]["digest"]
