"""MCP over streamable HTTP at /mcp on the HTTP service: the tools of mcp_server.py for a remote assistant, with no
local process.

Stateless, with JSON responses (no session, no SSE stream): every request stands alone, so any worker of
`--workers N`, or any replica, answers any request, as for POST /v1/recommend. So only POST is served (a GET
would open an event stream that never carries a message), and its body is read here first, by the rules of
POST /v1/recommend: at most 1 MB, labelled JSON, strict JSON (a duplicate key is refused, not guessed), and a
JSON-RPC message whose params fit its method (jsonrpc.py: field errors as the HTTP API words them).
The service's guard applies in front of it (the Host allowlist, JSON bodies, and an Origin from an allowed
host); `recommend` needs no token, as POST /v1/recommend needs none, and `explain` of a logged decision reads
the log, so it wants the read (or admin) token as a bearer token when one is configured
(mcp_server.KentinoTools).
"""
from __future__ import annotations

import json
from contextlib import asynccontextmanager

from .error_codes import (
    BODY_TOO_LARGE,
    MCP_NOT_INSTALLED,
    MCP_NOT_RUNNING,
    MCP_PARSE_ERROR,
    METHOD_NOT_ALLOWED,
    NOT_JSON,
    ErrorCode,
)
from .guard import is_json_media_type, not_json, refusal
from .http_io import MAX_BODY
from .jsonrpc import method_params, parse_error, read_strict, refused_message
from .mcp_server import build_server, mcp_installed


class McpEndpoint:
    """The ASGI app at /mcp. Its session manager runs inside the service's lifespan (`running`), a new one each
    time the app starts (a manager runs only once)."""

    def __init__(self, server):
        self.server = server
        self._params = method_params(server)
        self._manager = None

    @asynccontextmanager
    async def running(self):
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        # the service's guard checks the Host (its --allowed-host list) and the Origin before a request gets here
        manager = StreamableHTTPSessionManager(
            app=self.server, stateless=True, json_response=True, max_request_body_size=MAX_BODY,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope, receive, send):
        if self._manager is None:  # the app was called without its lifespan (no MCP session manager)
            await refusal(send, MCP_NOT_RUNNING, None, "MCP is not running: the service's lifespan did not start")
            return
        if scope["method"] != "POST":
            await refusal(send, METHOD_NOT_ALLOWED, "method", "MCP here is stateless with JSON responses: POST a "
                                                              "JSON-RPC message "
                                               "(there is no event stream to GET and no session to DELETE)",
                          [(b"allow", b"POST")])
            return
        content_type = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
        if not is_json_media_type(content_type):
            await refusal(send, NOT_JSON, "content-type", not_json(content_type))
            return
        body = await _read_body(receive)
        if body is None:
            await refusal(send, BODY_TOO_LARGE, "body", f"the body is larger than {MAX_BODY} bytes")
            return
        message, problem = read_strict(body)
        refused = (parse_error(problem), MCP_PARSE_ERROR) if problem is not None else \
            refused_message(message, self._params)
        if refused is not None:  # before the mcp package, which would answer in pydantic's words
            await _json_rpc_error(send, *refused)
            return
        await self._manager.handle_request(scope, _replaying(body, receive), send)


async def _read_body(receive) -> bytes | None:
    """The whole request body, or None past MAX_BODY (a client gone mid-body leaves what it sent)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _json_rpc_error(send, response: dict, code: ErrorCode) -> None:
    """A JSON-RPC error response with its code's status: 400 for a message refused as a whole (not JSON, not
    JSON-RPC), 200 for a request answered with an error (its params), as the mcp package answers them."""
    body = json.dumps(response, separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": code.status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _replaying(body: bytes, receive):
    """A receive that gives the body already read, then whatever the client sends next (its disconnect)."""
    given = False

    async def replayed():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replayed


MCP_MISSING = ("MCP over HTTP needs the mcp package (2.x), which is not installed here: pip install 'mcp>=2.3,<3' "
               "(a dependency of kentino-expert: reinstall it with its dependencies)")


class McpMissing:
    """/mcp where the mcp package cannot be imported: 501, naming the package, rather than a silent 404 (an ASGI app,
    as McpEndpoint is, so every method reaches it)."""

    async def __call__(self, scope, receive, send):
        await refusal(send, MCP_NOT_INSTALLED, None, MCP_MISSING)


mcp_missing = McpMissing()


def mount_mcp(current_expert, decision_log, may_read) -> McpEndpoint | None:
    """The /mcp endpoint over the service's expert (`current_expert()`: the one serving now) and log, or None
    when the mcp package is not installed."""
    if not mcp_installed():
        return None
    return McpEndpoint(build_server(current_expert, decision_log, may_read))
