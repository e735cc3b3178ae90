"""Every error the service answers, by a stable code: one registry, as the diagnostics' (ruleset/diagnostic_code.py).

An error response carries its code beside the detail, `{"code": "invalid-facts", "detail": [{field, message}]}`; a
JSON-RPC error at /mcp carries it in `error.data.code`, and an error page of the decision browser shows it. The HTTP
status of each code is written here and nowhere else: the builders below take a code, never a status, and
tests/test_error_codes.py holds every code to a request that gets it and every error response to a code of this
registry. docs/chat-bots.md lists them (a generated table: `http_errors_table`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus

from fastapi.responses import JSONResponse


@dataclass(frozen=True)
class ErrorCode:
    """A code, the HTTP status it comes with, the JSON-RPC code of an MCP message refused with it, and its meaning."""
    code: str
    status: int
    meaning: str
    jsonrpc: int | None = None

    @property
    def status_line(self) -> bytes:
        """`HTTP/1.1 431 Request Header Fields Too Large` and its line break, for a response written by hand."""
        return f"HTTP/1.1 {self.status} {HTTPStatus(self.status).phrase}\r\n".encode()


REGISTRY: dict[str, ErrorCode] = {}


def _register(code: str, status: int, meaning: str, jsonrpc: int | None = None) -> ErrorCode:
    if code in REGISTRY:
        raise ValueError(f"error code '{code}' is registered twice")
    REGISTRY[code] = ErrorCode(code, status, meaning, jsonrpc)
    return REGISTRY[code]


# -- what the client sent ---------------------------------------------------------------------------
INVALID_JSON = _register("invalid-json", 422, "The body is not a JSON object: empty, not UTF-8, not strict JSON (a "
                                              "duplicate key, NaN), nested too deeply, or another JSON value.")
INVALID_FACTS = _register("invalid-facts", 422, "A fact is unknown, misspelt, of the wrong type or out of range: "
                                                "`field` names it, with the closest name when one is near.")
INVALID_PARAMETER = _register("invalid-parameter", 422, "A parameter is wrong: a query parameter (since, kind, "
                                                        "limit, cursor, format), session_id, turn or view.")
FACTS_NOT_EVALUABLE = _register("facts-not-evaluable", 422, "The facts pass the contract, but the sizing "
                                                            "arithmetic fails on them (an extreme value).")
UNREADABLE_ROW = _register("unreadable-row", 422, "The logged decision was written in a shape this service cannot "
                                                  "read (by another program); it cannot be shown or explained.")
CLIENT_GONE = _register("client-gone", 400, "The client went away (or was timed out) before its body was read.")
INVALID_HTTP = _register("invalid-http", 400, "Not a valid HTTP/1.1 request: its request line, a header field, "
                                              "Content-Length, Transfer-Encoding or the chunk framing.")
HOST_REFUSED = _register("host-refused", 400, "The Host header names no allowed host (--allowed-host), a port that "
                                              "is not one, or comes twice: the DNS-rebinding guard.")
NOT_FOUND = _register("not-found", 404, "No route has this path.")
DECISION_NOT_FOUND = _register("decision-not-found", 404, "No decision in the log has this id.")
METHOD_NOT_ALLOWED = _register("method-not-allowed", 405, "The route does not take this method (`Allow` lists "
                                                          "the ones it takes).")
REQUEST_TIMEOUT = _register("request-timeout", 408, "The request's head or body did not arrive in time "
                                                    "(--header-timeout, --body-timeout); the connection is closed.")
BODY_TOO_LARGE = _register("body-too-large", 413, "The body is over 1 MB (or, with its chunk framing, over 2 MB on "
                                                  "the wire).")
NOT_JSON = _register("not-json", 415, "A POST body not labelled JSON (Content-Type: application/json).")
BODY_ENCODED = _register("body-encoded", 415, "The body has a Content-Encoding (gzip, ...): send it uncompressed.")
HEAD_TOO_LARGE = _register("head-too-large", 431, "The request line and header fields are over --max-header-bytes, "
                                                  "or more than --max-headers fields; the connection is closed.")
# -- who asks ---------------------------------------------------------------------------------------
TOKEN_REQUIRED = _register("token-required", 401, "The route reads the decision log (or reloads the rules): a valid "
                                                  "bearer token is required (WWW-Authenticate says which).")
ADMIN_TOKEN_REQUIRED = _register("admin-token-required", 403, "A read token on a route that needs the admin token.")
RELOAD_OFF = _register("reload-off", 403, "HTTP reload is off: no admin token is configured (SIGHUP still "
                                          "reloads).")
ORIGIN_REFUSED = _register("origin-refused", 403, "An MCP request from a web page of a host that is not allowed "
                                                  "(its Origin header).")
# -- the service ------------------------------------------------------------------------------------
RELOAD_REFUSED = _register("reload-refused", 409, "The new rule set does not load (its diagnostics are given); the "
                                                  "old one is still serving.")
INTERNAL_ERROR = _register("internal-error", 500, "A bug, never the client's doing: logged in full on the server.")
MCP_NOT_INSTALLED = _register("mcp-not-installed", 501, "/mcp where the mcp package cannot be imported.")
LOG_UNAVAILABLE = _register("log-unavailable", 503, "The decision log cannot be written or read now (the decision "
                                                    "is not given: it would not be on record).")
PUBLISHED_SET_UNREADABLE = _register("published-set-unreadable", 503, "A reload on a PostgreSQL log whose published "
                                                                      "rule set cannot be read now; the old one "
                                                                      "serves.")
NOT_READY = _register("not-ready", 503, "/readyz: no rule set is loaded, or the decision log cannot be written.")
MCP_NOT_RUNNING = _register("mcp-not-running", 503, "/mcp in an app whose lifespan did not start.")
# -- MCP messages refused before any tool runs (JSON-RPC errors; the status is /mcp's) ----------------
MCP_PARSE_ERROR = _register("mcp-parse-error", 400, "An MCP message that is not strict JSON (a duplicate key, NaN, "
                                                    "bad UTF-8) or is over 1 MB.", jsonrpc=-32700)
MCP_INVALID_MESSAGE = _register("mcp-invalid-message", 400, "An MCP message that is not a JSON-RPC request, "
                                                            "notification or response.", jsonrpc=-32600)
MCP_INVALID_PARAMS = _register("mcp-invalid-params", 200, "An MCP request whose params do not fit its method (an "
                                                          "answer with an error, so 200 over HTTP).", jsonrpc=-32602)
MCP_UNKNOWN_TOOL = _register("mcp-unknown-tool", 200, "A call of a tool the server does not have (invalid params, "
                                                      "as the MCP specification answers it).", jsonrpc=-32602)


def error_body(code: ErrorCode, field: str | None, message: str, items: list[dict] | None = None, **extra) -> dict:
    """The service's error body: {code, detail: [{field, message}]} (`items`: several) and anything the route adds."""
    return {"code": code.code, "detail": items or [{"field": field, "message": message}], **extra}


def error_response(code: ErrorCode, field: str | None, message: str, headers=None, items=None,
                   **extra) -> JSONResponse:
    """The error as a JSON response with the code's status."""
    return JSONResponse(error_body(code, field, message, items, **extra), status_code=code.status, headers=headers)


def error_bytes(code: ErrorCode, field: str | None, message: str) -> bytes:
    """The error body as compact JSON bytes (for the responses written without Starlette)."""
    return json.dumps(error_body(code, field, message), separators=(",", ":")).encode()


def jsonrpc_data(code: ErrorCode, items: list[dict]) -> dict:
    """A JSON-RPC error's `data`: the code and every field error, as the HTTP API gives them."""
    return {"code": code.code, "detail": items}


def codes_table() -> str:
    """The registry as a Markdown table (docs/chat-bots.md)."""
    rows = [f"| `{c.code}` | {c.status} | {c.jsonrpc if c.jsonrpc is not None else '-'} | {c.meaning} |"
            for c in sorted(REGISTRY.values(), key=lambda c: (c.jsonrpc is not None, c.status, c.code))]
    return "\n".join(["| code | HTTP status | JSON-RPC | meaning |", "|---|---|---|---|", *rows])


def responses_for(*codes: ErrorCode) -> dict[int, dict]:
    """The OpenAPI responses of a route that may answer with these codes: one per status, naming its codes."""
    by_status: dict[int, list[ErrorCode]] = {}
    for code in codes:
        by_status.setdefault(code.status, []).append(code)
    return {status: {"description": "{code, detail: [{field, message}]}: " + "; ".join(
        f"`{c.code}`: {c.meaning}" for c in listed)} for status, listed in by_status.items()}
