"""The MCP server (the `mcp` package, 2.x): tools `recommend` and `explain` for LLM agents, over stdio
(`kentino-expert mcp`) and over streamable HTTP at /mcp on the HTTP service (mcp_http.py).

`recommend`'s input schema is the body of POST /v1/recommend: the facts schema (enums, `task` required, each
fact's description and the question to ask for it) plus session_id, turn and view. Every `recommend` call is
written to the decision log (source 'mcp') before its result is returned. stdout carries the stdio protocol:
logs go to stderr. mcp is imported only here and in mcp_http.py (a dependency; an install without it serves
/mcp as a 501 and `kentino-expert mcp` exits naming it).
"""
from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from typing import Any

from .. import fastjson
from ..answer.explain import explain_markdown
from ..decisions.connect import open_log
from ..errors import DecisionLogError, EngineError, KentinoError, UnreadableRow
from ..expert import Expert
from ..version import __version__
from .answer_size import served_sizes
from .compact import check_view, compact
from .decide import decide
from .error_codes import MCP_UNKNOWN_TOOL, jsonrpc_data
from .log_failures import public_message
from .tool_schema import facts_of, recommend_output_schema, request_schema

SERVER_NAME = "kentino-expert"
INSTRUCTIONS = (
    "Kentino Expert recommends GPU-server builds for AI workloads. Call `recommend` with the workload "
    "facts you know (only `task` is required: inference, batch-inference, lora, qlora, full-finetune or "
    "pretraining; add model, concurrency, context_tokens, ... when known). When the result's status is "
    "'provisional', ask the person the first of its `questions` and call `recommend` again with every fact "
    "known so far, the answer added. Pass view='compact' for a short result (at most 2 KB). Call `explain` "
    "with the decision_id for a Markdown explanation to show the person.")
RECOMMEND_DESCRIPTION = (
    "Recommend a GPU-server build (one node, INT4 on one node, data-parallel replicas, a multi-node InfiniBand "
    "cluster, or frontier-scale) for an AI workload. The arguments are the workload facts (only `task` is "
    "required; each property says what it is and `x-ask` the question to ask for it), plus session_id and turn "
    "to tie a conversation together and view ('full' or 'compact'). Returns decision_id, status, the questions "
    "still worth asking (most decisive first), the recommendation, warnings and, in the full view, the "
    "figures, assumptions, why-trace and why not the other kinds. The decision is logged.")
EXPLAIN_DESCRIPTION = (
    "Explain a decision in Markdown: the answer, each rule that fired with actual values vs thresholds, the "
    "heuristics in the source document's words, assumptions and why not the other kinds. Give the "
    "`decision_id` of an earlier `recommend` result (over HTTP this reads the decision log, so it needs the "
    "service's read token when one is set), or `facts` to explain without logging.")
EXPLAIN_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "decision_id": {"type": "string", "minLength": 1, "maxLength": 200,
                        "description": "The decision_id of an earlier `recommend` result."},
        "facts": {"type": "object", "description": "Workload facts as for `recommend` (explained, not logged)."}},
    "description": "Give decision_id or facts."}

_logger = logging.getLogger("kentino_expert.mcp")


class ToolFailed(Exception):
    """A tool call the client must change: its message goes back as the tool error's text."""


class UnknownTool(Exception):
    """A call of a tool the server does not have: JSON-RPC's invalid params (-32602), as the MCP specification
    answers it, not a tool error (no tool ran)."""


def _message(exc: KentinoError) -> str:
    field = getattr(exc, "field", None) or exc.name
    text = exc.suggested()
    if isinstance(exc, EngineError) and not field:  # worded as POST /v1/recommend words it
        field, text = "facts", f"these facts cannot be evaluated: {text}"
    return f"{field}: {text}" if field else text


class KentinoTools:
    """The two tools, whatever carries them: their definitions and their calls.

    `expert` is an Expert or a function returning the one to use now (the service's reloadable holder);
    `may_read(headers)` says why a caller over HTTP may not read the decision log (None: it may).
    """

    def __init__(self, expert, log, may_read: Callable[[Mapping[str, str]], str | None] | None = None):
        self._expert = expert if callable(expert) else (lambda: expert)
        self.log, self.may_read = log, may_read

    def definitions(self) -> list[dict[str, Any]]:
        """name, description, input schema, output schema (of a tool returning structured content) and annotations of
        each tool (the rules' facts schema, now)."""
        expert = self._expert()
        return [
            {"name": "recommend", "title": "Recommend a GPU-server build", "description": RECOMMEND_DESCRIPTION,
             "input_schema": request_schema(expert.ruleset, expert.knowledge, served_sizes(expert)),
             "output_schema": recommend_output_schema(),  # the structured content it returns
             # logs a new decision at each call: not read-only, not idempotent; additive, closed world
             "annotations": {"title": "Recommend a GPU-server build", "read_only_hint": False,
                             "destructive_hint": False, "idempotent_hint": False, "open_world_hint": False}},
            {"name": "explain", "title": "Explain a decision", "description": EXPLAIN_DESCRIPTION,
             "input_schema": EXPLAIN_SCHEMA,
             "annotations": {"title": "Explain a decision", "read_only_hint": True, "destructive_hint": False,
                             "idempotent_hint": True, "open_world_hint": False}},
        ]

    async def call(self, name: str, arguments: dict, headers: Mapping[str, str] | None) -> tuple[str, dict | None]:
        """(text, structured result or None) of one call; ToolFailed for what the client must change, UnknownTool
        for a name that is not one of the tools."""
        import anyio

        from .http_io import decision_limiter  # the HTTP stack's limiter, shared with POST /v1/recommend

        if name == "recommend":
            body = await anyio.to_thread.run_sync(self.recommend, arguments, limiter=decision_limiter())
            return fastjson.dumps(body), body
        if name == "explain":
            return await anyio.to_thread.run_sync(self.explain, arguments, headers, limiter=decision_limiter()), None
        raise UnknownTool(f"unknown tool '{str(name)[:60]}' (the tools are recommend and explain)")

    def recommend(self, arguments: dict) -> dict:
        """The decision's JSON (full or compact), logged with source 'mcp'."""
        facts = facts_of(arguments)
        try:
            view = check_view(arguments.get("view"))
        except ValueError as exc:
            raise ToolFailed(f"view: {exc}") from None
        with _tool_errors("recommend", "internal error (logged on the server)"):
            # decide() checks session_id and turn by the rules of POST /v1/recommend, before deciding
            response = decide(self._expert(), self.log, facts, "mcp", arguments.get("session_id"),
                              arguments.get("turn"), _logger).response()
        return response if view == "full" else compact(response)

    def explain(self, arguments: dict, headers: Mapping[str, str] | None) -> str:
        """The Markdown explanation of a logged decision (the log read needs the read token over HTTP) or of facts."""
        unknown = sorted(set(arguments) - {"decision_id", "facts"})
        if unknown:
            raise ToolFailed(f"{unknown[0][:60]}: unknown argument (give decision_id or facts)")
        decision_id, facts = arguments.get("decision_id"), arguments.get("facts")
        with _tool_errors("explain", "these facts or this decision cannot be explained (logged on the server)"):
            expert = self._expert()
            if decision_id:
                if not isinstance(decision_id, str):
                    raise ToolFailed("decision_id: must be a string")
                refused = self.may_read(headers) if headers is not None and self.may_read else None
                if refused:
                    raise ToolFailed(f"authorization: {refused}")
                decision = self.log.get(decision_id) if len(decision_id) <= 200 else None
                if decision is None:
                    raise ToolFailed(f"decision_id: no decision '{decision_id[:200]}'")
                return explain_markdown(expert, decision)
            if facts:
                if not isinstance(facts, dict):
                    raise ToolFailed("facts: must be a JSON object of facts")
                # a bot may pass its `recommend` arguments as they were: the conversation's keys are not facts
                return explain_markdown(expert, expert.recommend(facts_of(facts)))
        raise ToolFailed("give a decision_id or facts")


@contextmanager
def _tool_errors(tool: str, unexpected: str):
    """Every failure of a tool as a ToolFailed, translated once: a KentinoError is the client's (its message),
    anything else is logged in full and named only by `unexpected`."""
    try:
        yield
    except ToolFailed:
        raise
    except UnreadableRow as exc:  # a row another program wrote: the client's to know, without the log's name
        raise ToolFailed(exc.problem) from None
    except DecisionLogError as exc:  # its words name the database: the server's log gets them (log_failures.py)
        raise ToolFailed(public_message(exc, writing=tool == "recommend")) from None
    except KentinoError as exc:
        raise ToolFailed(_message(exc)) from None
    except Exception:
        _logger.exception("error in tool %s", tool)
        raise ToolFailed(unexpected) from None


def build_server(expert=None, log=None, may_read=None):
    """The MCP server object (the low-level `mcp` Server: the tools' schemas are ours, not a signature's);
    `expert` (an Expert, or a function returning one) and `log` default to the bundled rules and KENTINO_DB."""
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    tools = KentinoTools(expert or Expert(), log if log is not None else open_log(), may_read)

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=d["name"], title=d["title"], description=d["description"], input_schema=d["input_schema"],
                       output_schema=d.get("output_schema"), annotations=types.ToolAnnotations(**d["annotations"]))
            for d in tools.definitions()])

    async def call_tool(ctx, params) -> types.CallToolResult:
        headers = getattr(getattr(ctx, "request", None), "headers", None)  # the HTTP request's; None on stdio
        try:
            text, structured = await tools.call(params.name, params.arguments or {}, headers)
        except ToolFailed as exc:
            return types.CallToolResult(content=[types.TextContent(text=str(exc))], is_error=True)
        except UnknownTool as exc:
            raise MCPError(MCP_UNKNOWN_TOOL.jsonrpc, f"params.name: {exc}",
                           jsonrpc_data(MCP_UNKNOWN_TOOL, [{"field": "params.name", "message": str(exc)}])) from None
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)

    server = Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                    on_call_tool=call_tool)
    server.kentino_tools = tools
    return server


def mcp_installed() -> bool:
    """Whether the mcp package (2.x) can be imported."""
    try:
        import mcp.server.lowlevel  # noqa: F401
        import mcp_types  # noqa: F401
    except ImportError:
        return False
    return True


def main(rules_dir=None, knowledge_dir=None, db=None) -> None:
    """Run the MCP server on stdin/stdout until the client closes it. On a PostgreSQL log it serves the published
    rule set once there is one, and follows it, as `serve` does."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    import anyio

    from .follower import holder_for
    from .mcp_stdio import serve_stdio
    log = open_log(db)
    holder = holder_for(log, lambda: Expert(rules_dir, knowledge_dir))  # PostgreSQL: the published rule set
    holder.start_following()
    try:
        anyio.run(serve_stdio, build_server(holder.current, log))
    finally:
        holder.stop_following()
        log.close()


if __name__ == "__main__":  # pragma: no cover
    main()
