"""An MCP server over stdio (the `mcp` package): tools `recommend` and `explain` for LLM agents.

Every `recommend` call is written to the decision log (source 'mcp') before its result is returned.
Works with mcp 2.x (MCPServer) and mcp 1.x (FastMCP). stdout carries the protocol: logs go to stderr.
"""
from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from typing import Any

from ..answer.explain import explain_markdown
from ..decisions.connect import open_log
from ..errors import EngineError, KentinoError
from ..expert import Expert
from .decide import decide

SERVER_NAME = "kentino-expert"
INSTRUCTIONS = (
    "Kentino Expert recommends GPU-server builds for AI workloads. Call `recommend` with the workload "
    "facts you know (only `task` is required: inference, batch-inference, lora, qlora, full-finetune or "
    "pretraining; add model, concurrency, context_tokens, ... when known). When the result's status is "
    "'provisional', ask the person the first of its `questions` and call `recommend` again with the "
    "answer added. Call `explain` with the decision_id for a Markdown explanation to show the person.")


def server_classes():
    """(server class, ToolError class) of whichever mcp major version is installed (mcp is an optional
    dependency: imported only here)."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
        return MCPServer, ToolError
    except ImportError:
        from mcp.server.fastmcp import FastMCP
        from mcp.server.fastmcp.exceptions import ToolError
        return FastMCP, ToolError


_logger = logging.getLogger("kentino_expert.mcp")


def _message(exc: KentinoError) -> str:
    field = getattr(exc, "field", None) or exc.name
    text = exc.suggested()
    if isinstance(exc, EngineError) and not field:  # worded as POST /v1/recommend words it
        field, text = "facts", f"these facts cannot be evaluated: {text}"
    return f"{field}: {text}" if field else text


@contextmanager
def _tool_errors(tool_error, tool: str, unexpected: str):
    """Every failure of a tool as a tool error, translated once: a KentinoError is the client's (its message),
    anything else is logged in full on stderr and named only by `unexpected`."""
    try:
        yield
    except tool_error:
        raise
    except KentinoError as exc:
        raise tool_error(_message(exc)) from None
    except Exception:
        _logger.exception("error in tool %s", tool)
        raise tool_error(unexpected) from None


def build_server(expert=None, log=None):
    """The MCP server object with the two tools; `expert` and `log` default to the bundled rules and KENTINO_DB."""
    server_class, tool_error = server_classes()
    expert = expert or Expert()
    log = log if log is not None else open_log()
    server = server_class(SERVER_NAME, instructions=INSTRUCTIONS)

    @server.tool(name="recommend", description=(
        "Recommend a GPU-server build for workload facts. `facts` is a JSON object with `task` (required) and "
        "any of: model, params_b, precision, gpu, gpus_per_node, concurrency, context_tokens, qps, tokens_per_s, "
        "latency, tenancy, training_tokens, corpus_tokens, deadline_days, proposed_build, interconnect. Returns "
        "the answer with decision_id, status, ranked questions and why the other kinds were not chosen."))
    def recommend(facts: dict[str, Any], session_id: str | None = None, turn: int | None = None) -> dict[str, Any]:
        # decide() checks session_id and turn by the rules of POST /v1/recommend
        with _tool_errors(tool_error, "recommend", "internal error (logged on the server's stderr)"):
            return decide(expert, log, facts, "mcp", session_id, turn, _logger).response()

    @server.tool(name="explain", description=(
        "Explain a decision in Markdown: the answer, each rule that fired with actual values vs thresholds, the "
        "heuristics in the source document's words, assumptions and why not the other kinds. Give the "
        "`decision_id` of an earlier `recommend` result, or `facts` to explain without logging."))
    def explain(decision_id: str | None = None, facts: dict[str, Any] | None = None) -> str:
        # extreme facts or a bug: a message for the client, the traceback on stderr
        with _tool_errors(tool_error, "explain", "these facts or this decision cannot be explained "
                                                 "(logged on the server's stderr)"):
            if decision_id:
                decision = log.get(decision_id)
                if decision is None:
                    raise tool_error(f"decision_id: no decision '{decision_id[:200]}'")
                return explain_markdown(expert, decision)
            if facts:
                return explain_markdown(expert, expert.recommend(facts))
        raise tool_error("give a decision_id or facts")

    return server


def main(rules_dir=None, knowledge_dir=None, db=None) -> None:
    """Run the MCP server on stdin/stdout until the client closes it."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    expert = Expert(rules_dir, knowledge_dir)
    server = build_server(expert, open_log(db))
    server.run("stdio")


if __name__ == "__main__":  # pragma: no cover
    main()
