"""JSON-RPC's parse error for both MCP transports: a message that is not strict JSON (a duplicate key, NaN, bad
UTF-8) is refused as POST /v1/recommend refuses it, not handed to the mcp package, which takes the last of two
duplicate keys and would log a decision on that guess."""
from __future__ import annotations

from ..domain.workload import strict_json_loads

PARSE_ERROR = -32700  # JSON-RPC's code for a message that is not JSON, as the mcp package answers it
MAX_PROBLEM = 200  # characters of the parser's own words quoted back


def not_strict_json(raw: bytes) -> str | None:
    """Why `raw` is not one strict JSON value (what POST /v1/recommend refuses), or None."""
    try:
        strict_json_loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "the message is not UTF-8 text"
    except RecursionError:
        return "the JSON nests too deeply"
    except ValueError as exc:
        return str(exc).splitlines()[0][:MAX_PROBLEM]
    return None


def parse_error(problem: str) -> dict:
    """The JSON-RPC error response for a message that could not be read (its id cannot be known: null)."""
    return {"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": f"Parse error: {problem}"}}
