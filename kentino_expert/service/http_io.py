"""The service's edges: strict parsing of request bodies, deciding off the event loop, HEAD as GET."""
from __future__ import annotations

import asyncio
import logging
import weakref

import anyio
from starlette.requests import ClientDisconnect, Request

from .. import fastjson
from ..decisions.meta import check_meta
from ..domain.workload import MAX_FACTS_BYTES, json_value_problem, strict_json_loads
from .compact import check_view, compact
from .decide import decide
from .error_codes import (
    BODY_ENCODED,
    BODY_TOO_LARGE,
    CLIENT_GONE,
    INVALID_JSON,
    INVALID_PARAMETER,
    ErrorCode,
)
from .tool_schema import META_KEYS, facts_of

MAX_BODY = MAX_FACTS_BYTES  # a body is facts (and the meta keys): the limit of a file of facts too
DECIDERS = 40  # decisions at once in worker threads; the others wait on the event loop


class BadRequest(Exception):
    """A client mistake, answered with its error code (error_codes.py: the code says the status) and the field it
    concerns."""

    def __init__(self, code: ErrorCode, field: str | None, message: str):
        super().__init__(message)
        self.code, self.field, self.message = code, field, message


# -- request parsing --------------------------------------------------------------------------------

def parse_body(raw: bytes):
    """Strict JSON: UTF-8, no NaN/Infinity, no duplicate keys, bounded nesting."""
    if not raw.strip():
        raise BadRequest(INVALID_JSON, "facts", "empty body: expected a JSON object of facts such as "
                                                "{\"task\": \"inference\"}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(INVALID_JSON, "facts", "the body is not UTF-8 text") from None

    try:
        return strict_json_loads(text)
    except RecursionError:
        raise BadRequest(INVALID_JSON, "facts", "the JSON nests too deeply") from None
    except ValueError as exc:
        raise BadRequest(INVALID_JSON, "facts", f"invalid JSON: {json_value_problem(exc)}") from None


def split_meta(data, query) -> tuple[dict, str | None, int | None, str]:
    """(facts, session_id, turn, view): the meta keys come from the body's top level or the query string."""
    if not isinstance(data, dict):
        kind = "null" if data is None else {list: "an array", str: "a string", bool: "a boolean",
                                            int: "a number", float: "a number"}.get(type(data), type(data).__name__)
        raise BadRequest(INVALID_JSON, "facts", f"expected a JSON object of facts, got {kind}")
    for key in META_KEYS:  # which of two values was meant cannot be known: refused, not guessed
        if len(query.getlist(key)) > 1:
            raise BadRequest(INVALID_PARAMETER, key, "given more than once in the query string")
        if key in data and key in query:
            raise BadRequest(INVALID_PARAMETER, key, "given in both the body and the query string: give it once")
    facts = facts_of(data)
    session_id, turn = check_meta(data.get("session_id", query.get("session_id")),
                                  data.get("turn", query.get("turn")))
    try:
        view = check_view(data.get("view", query.get("view")))
    except ValueError as exc:
        raise BadRequest(INVALID_PARAMETER, "view", str(exc)) from None
    return facts, session_id, turn, view


def check_encoding(request: Request) -> None:
    """Refuse a compressed body (415) rather than parse its bytes as JSON."""
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise BadRequest(BODY_ENCODED, "content-encoding", f"content encoding '{encoding[:40]}' is not supported: "
                         "send the JSON body uncompressed")


async def read_limited(request: Request) -> bytes:
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > MAX_BODY:
        raise BadRequest(BODY_TOO_LARGE, "facts", f"the body is larger than {MAX_BODY} bytes")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise BadRequest(BODY_TOO_LARGE, "facts", f"the body is larger than {MAX_BODY} bytes")
            chunks.append(chunk)
    except ClientDisconnect:  # gone, or closed by the body-read timeout: no one reads the answer
        raise BadRequest(CLIENT_GONE, "facts", "the client went away before the body was read") from None
    return b"".join(chunks)


# -- deciding off the event loop ------------------------------------------------------------------

_deciders: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def decision_limiter() -> anyio.CapacityLimiter:
    """The limiter of decisions in worker threads (HTTP and MCP share it), one per event loop (a TestClient runs
    each client on a loop of its own)."""
    loop = asyncio.get_running_loop()
    limiter = _deciders.get(loop)
    if limiter is None:
        limiter = _deciders[loop] = anyio.CapacityLimiter(DECIDERS)
    return limiter


async def decide_off_loop(holder, decision_log, raw: bytes, query) -> bytes:
    """The response body for a POST /v1/recommend body, all of it worked out in a worker thread:
    the event loop stays free for other requests however long a decision takes (commits still group)."""
    return await anyio.to_thread.run_sync(decide_and_record, holder, decision_log, raw, query,
                                          limiter=decision_limiter())


def decide_and_record(holder, decision_log, raw: bytes, query) -> bytes:
    """Parse, decide (or take the cached evaluation), commit, render: one request's work."""
    facts, session_id, turn, view = split_meta(parse_body(raw), query)
    expert = holder.current()  # one snapshot for the whole decision
    logger = logging.getLogger("uvicorn.error")  # arithmetic failing on extreme facts: the client's 422
    decision = decide(expert, decision_log, facts, "http", session_id, turn, logger)
    return fastjson.dumps_bytes(decision.response() if view == "full" else compact(decision.response()))


class HeadAsGet:
    """HEAD answered as the GET of the same URL, without the body (load balancers probe with HEAD;
    FastAPI routes a GET route's HEAD to a 405). A POST-only path still answers 405."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message):
            if message["type"] == "http.response.body":
                if message.get("more_body"):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


def allow_with_head(allow: str) -> str:
    methods = [m.strip() for m in allow.split(",") if m.strip()]
    return ", ".join(methods + ["HEAD"]) if "GET" in methods and "HEAD" not in methods else allow
