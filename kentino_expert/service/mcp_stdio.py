"""MCP over stdio, strict as over HTTP: a line over 1 MB or not strict JSON (a duplicate key, NaN, bad UTF-8) gets
JSON-RPC's parse error on stdout (and one that is not JSON-RPC, or whose params do not fit its method, the error
jsonrpc.py words) and never reaches the mcp package, which would take the last of two duplicate
keys (and log a decision on that guess) or drop the line without a word. A longer line is never held whole: its
first 1 MB is read and the rest dropped as it comes."""
from __future__ import annotations

import sys

import anyio

from ..domain.workload import MAX_FACTS_BYTES
from .jsonrpc import method_params, parse_error, read_strict, refused_message


class StrictLines:
    """The stdin that mcp's stdio transport reads: the lines as text, except those that are not strict JSON,
    which are answered here (through the transport's own write stream, once `bind` gives it: one writer, so
    replies never interleave) and not passed on. A blank line is passed on: the transport skips it."""

    def __init__(self, lines, params_by_method=None):
        self._lines = lines  # an async iterable of bytes, one line each
        self._params = params_by_method or {}  # jsonrpc.method_params of the server
        self._replies = None
        self._bound = anyio.Event()

    def bind(self, write_stream) -> None:
        """The stream the transport writes its messages from: parse errors go out through it too."""
        self._replies = write_stream
        self._bound.set()

    def __aiter__(self):
        return self._strict()

    async def _strict(self):
        async for raw in self._lines:
            refused = _refused(raw, self._params)
            if refused is None:
                yield raw.decode("utf-8", errors="replace")
                continue
            await self._bound.wait()
            try:
                await self._replies.send(_message(refused))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):  # the server has stopped: so do we
                return


async def bounded_lines(stream, limit: int = MAX_FACTS_BYTES):
    """The lines of `stream` (a binary file, read in a worker thread), none longer than `limit` + 1 bytes: of a
    longer one, its first `limit` + 1 bytes (so it is refused as too large) while the rest is read in pieces and
    dropped, so a client sending one endless line cannot make the server hold it all."""
    while True:
        line = await anyio.to_thread.run_sync(stream.readline, limit + 1)
        if not line:
            return
        head = line
        while not line.endswith(b"\n") and len(line) > limit:  # the line goes on: read past it, keep none
            line = await anyio.to_thread.run_sync(stream.readline, limit + 1)
        yield head


def _refused(raw: bytes, params_by_method) -> dict | None:
    """The JSON-RPC error response to a line (None: passed on): over the 1 MB every edge takes, not strict JSON, or
    not a JSON-RPC message whose params fit its method (jsonrpc.refused_message)."""
    if len(raw) > MAX_FACTS_BYTES:  # as POST /v1/recommend and /mcp refuse a larger body (413)
        return parse_error(f"the message is larger than {MAX_FACTS_BYTES} bytes")
    if not raw.strip():
        return None
    message, problem = read_strict(raw)
    if problem is not None:
        return parse_error(problem)
    refused = refused_message(message, params_by_method)
    return refused[0] if refused is not None else None


def _message(response: dict):
    import mcp_types as types
    from mcp.shared.message import SessionMessage
    return SessionMessage(types.jsonrpc_message_adapter.validate_python(response))


async def serve_stdio(server, stdin=None) -> None:
    """Run `server` (mcp_server.build_server) on stdin and stdout until the client closes stdin; `stdin` is an
    async iterable of byte lines (default: the process's)."""
    from mcp.server.stdio import stdio_server
    lines = StrictLines(stdin if stdin is not None else bounded_lines(sys.stdin.buffer), method_params(server))
    async with stdio_server(stdin=lines) as (read, write):
        lines.bind(write)
        await server.run(read, write, server.create_initialization_options())
