"""MCP over streamable HTTP at /mcp on the HTTP service: the tools of mcp_server.py for a remote assistant, with no
local process.

Stateless, with JSON responses (no session, no SSE stream): every request stands alone, so any worker of
`--workers N`, or any replica, answers any request, as for POST /v1/recommend. The service's guard applies
in front of it (the Host allowlist, JSON bodies, and an Origin from an allowed host); `recommend` needs no
token, as POST /v1/recommend needs none, and `explain` of a logged decision reads the log, so it wants the
read (or admin) token as a bearer token when one is configured (mcp_server.KentinoTools).
"""
from __future__ import annotations

import json
from contextlib import asynccontextmanager

from .http_io import MAX_BODY
from .mcp_server import build_server, mcp_installed


class McpEndpoint:
    """The ASGI app at /mcp. Its session manager runs inside the service's lifespan (`running`), a new one each
    time the app starts (a manager runs only once)."""

    def __init__(self, server):
        self.server = server
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
            body = json.dumps({"detail": [{"field": None, "message": "MCP is not running: the service's lifespan "
                                                                     "did not start"}]}).encode()
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self._manager.handle_request(scope, receive, send)


def mount_mcp(current_expert, decision_log, may_read) -> McpEndpoint | None:
    """The /mcp endpoint over the service's expert (`current_expert()`: the one serving now) and log, or None
    when the mcp package is not installed."""
    if not mcp_installed():
        return None
    return McpEndpoint(build_server(current_expert, decision_log, may_read))
