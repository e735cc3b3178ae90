"""JSON-RPC's refusals for both MCP transports, made before the mcp package sees a message, in the service's words:

- a message that is not strict JSON (a duplicate key, NaN, bad UTF-8) is a parse error, refused as POST
  /v1/recommend refuses it, not handed to the mcp package, which takes the last of two duplicate keys and would
  log a decision on that guess;
- a message that is not a JSON-RPC request, notification or response, or a request whose params do not fit its
  method, is an invalid request (-32600) or invalid params (-32602) whose message is the first field error as the
  HTTP API gives it ('params.name: Input should be a valid string') and whose data holds them all, where the mcp
  package would answer with pydantic's own report (its error types, the input echoed, links to its site) or with
  no word of what was wrong.
"""
from __future__ import annotations

from collections.abc import Mapping

from ..domain.workload import strict_json_loads
from .error_codes import MCP_INVALID_MESSAGE, MCP_INVALID_PARAMS, MCP_PARSE_ERROR, ErrorCode, jsonrpc_data
from .field_errors import field_errors, one_line

PARSE_ERROR = MCP_PARSE_ERROR.jsonrpc  # -32700: JSON-RPC's code for a message that is not JSON
MAX_PROBLEM = 200  # characters of the parser's own words quoted back


def not_strict_json(raw: bytes) -> str | None:
    """Why `raw` is not one strict JSON value (what POST /v1/recommend refuses), or None."""
    return read_strict(raw)[1]


def read_strict(raw: bytes) -> tuple[object, str | None]:
    """(the value, None) of one strict JSON value, or (None, why it is not one)."""
    try:
        return strict_json_loads(raw.decode("utf-8")), None
    except UnicodeDecodeError:
        return None, "the message is not UTF-8 text"
    except RecursionError:
        return None, "the JSON nests too deeply"
    except ValueError as exc:
        return None, str(exc).splitlines()[0][:MAX_PROBLEM]


def parse_error(problem: str) -> dict:
    """The JSON-RPC error response for a message that could not be read (its id cannot be known: null)."""
    return {"jsonrpc": "2.0", "id": None, "error": {
        "code": PARSE_ERROR, "message": f"Parse error: {problem}",
        "data": jsonrpc_data(MCP_PARSE_ERROR, [{"field": None, "message": problem}])}}


def error_response(message_id, code: ErrorCode, items: list[dict]) -> dict:
    """A JSON-RPC error response: the code's JSON-RPC code, the first field error as its message, the service's code
    and every field error as data."""
    return {"jsonrpc": "2.0", "id": message_id, "error": {"code": code.jsonrpc, "message": one_line(items),
                                                          "data": jsonrpc_data(code, items)}}


def method_params(server) -> dict[str, type]:
    """The params model of each request method `server` (mcp's low-level Server) answers, initialize included."""
    import mcp_types as types
    handlers = getattr(server, "_request_handlers", {})  # mcp 2.x: {method: HandlerEntry(params_type, handler)}
    params = {method: entry.params_type for method, entry in handlers.items() if hasattr(entry, "params_type")}
    return {"initialize": types.InitializeRequestParams, **params}


def _envelope(message):
    """The mcp_types model a message claims to be, by its members, or None when it claims none."""
    import mcp_types as types
    if not isinstance(message, dict):
        return None
    if "method" in message:
        return types.JSONRPCRequest if "id" in message else types.JSONRPCNotification
    if "error" in message:
        return types.JSONRPCError
    return types.JSONRPCResponse if "result" in message else None


def refused_message(message, params_by_method: Mapping[str, type]) -> tuple[dict, ErrorCode] | None:
    """(the error response, its code) for a message the mcp package would refuse in pydantic's words; None for one
    it may have. A notification's params are the package's to check (a notification gets no answer)."""
    from pydantic import ValidationError

    model = _envelope(message)
    if model is None:
        what = "a JSON array (batches are not supported)" if isinstance(message, list) else \
            "a JSON object with no method, result or error" if isinstance(message, dict) else "not a JSON object"
        return error_response(None, MCP_INVALID_MESSAGE, [{
            "field": None, "message": f"a JSON-RPC message is a JSON object with a method (or a result or an "
                                      f"error); this is {what}"}]), MCP_INVALID_MESSAGE
    try:
        envelope = model.model_validate(message, by_name=False)
    except ValidationError as exc:
        message_id = message.get("id") if isinstance(message.get("id"), (str, int)) else None
        return error_response(message_id, MCP_INVALID_MESSAGE, field_errors(exc.errors(), message)), \
            MCP_INVALID_MESSAGE
    params_model = params_by_method.get(envelope.method) if model.__name__ == "JSONRPCRequest" else None
    if params_model is None:
        return None
    params = message.get("params") or {}
    try:
        params_model.model_validate(params, by_name=False)
    except ValidationError as exc:
        items = [{**item, "field": f"params.{item['field']}" if item["field"] else "params"}
                 for item in field_errors(exc.errors(), params)]
        return error_response(envelope.id, MCP_INVALID_PARAMS, items), MCP_INVALID_PARAMS
    return None
