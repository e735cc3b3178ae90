"""Pydantic's validation errors as the service words them everywhere (HTTP and MCP): one {field, message} per
field, the field a dotted path into what was sent, the message pydantic's one sentence, never its internals
(the error type, the input echoed back, a link to its documentation)."""
from __future__ import annotations

from collections.abc import Iterable

SHOULD_BE = "Input should be "


def _holds(node, step) -> bool:
    """`step` is a key of the dict `node`, or an index of the list `node`."""
    if isinstance(node, dict):
        return step in node
    return isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node)


def _field(loc, value, skip: Iterable[str]) -> str | None:
    """The dotted path of `loc` into `value`; steps that are not keys or indexes of what was sent (the members of a
    union pydantic tried, such as 'str' or 'int') are left out, a key that is missing is kept."""
    path, node = [], value
    for position, step in enumerate(loc):
        if position == 0 and step in skip:
            continue
        if _holds(node, step):
            node = node[step]
        elif position != len(loc) - 1 or not isinstance(node, dict):  # a union member's tag, not a field
            continue
        path.append(str(step))
    return ".".join(path) or None


def field_errors(errors: Iterable[dict], value=None, skip: Iterable[str] = ()) -> list[dict]:
    """[{field, message}] of pydantic's `errors()` for `value` (what was validated; None: every step is a field),
    the first step of a location left out when it is in `skip` (FastAPI's 'body', 'query', 'path'). The errors
    of one field (pydantic reports each member of a union) become one: 'Input should be a valid string or a
    valid integer'."""
    skip = tuple(skip)
    merged: dict[str | None, list[str]] = {}
    for error in errors:
        loc = tuple(error.get("loc", ()))
        field = _field(loc, value, skip) if value is not None else \
            ".".join(str(step) for step in loc if step not in skip) or None
        message = str(error.get("msg", "invalid")).splitlines()[0]
        said = merged.setdefault(field, [])
        if message not in said:
            said.append(message)
    return [{"field": field, "message": _joined(messages)} for field, messages in merged.items()]


def _joined(messages: list[str]) -> str:
    first, *rest = messages
    if first.startswith(SHOULD_BE):
        rest = [m[len(SHOULD_BE):] if m.startswith(SHOULD_BE) else m for m in rest]
    return " or ".join([first, *rest])


def one_line(items: list[dict]) -> str:
    """The first item as 'field: message', and how many more there are."""
    first = items[0]
    text = f"{first['field']}: {first['message']}" if first.get("field") else first["message"]
    return text + (f" (and {len(items) - 1} more)" if len(items) > 1 else "")
