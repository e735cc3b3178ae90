"""What `explain` is given in a file, checked before anything renders it: a decision, an answer or facts.

The renderers (explain.py) trust their subject's shape: a logged decision was written by the log. A file
may hold anything, so its shape is checked here first, against the answer's own model.
"""
from __future__ import annotations

from pydantic import ValidationError

from ..errors import InputError
from .model import Answer


def checked_subject(data) -> dict:
    """`data` read from a file, its shape checked before anything renders it: a decision (an object with an
    `answer`) or an answer (with a `recommendation` or a `trace`) is validated as the Answer model, facts are
    left to Expert.recommend. InputError naming the first field that is wrong, e.g.
    `answer.recommendation.kind: Input should be ...`."""
    if not isinstance(data, dict):
        raise InputError(f"expected a JSON object (an answer, a decision or facts), not a {_json_type(data)}")
    if "answer" in data:  # a decision: `decisions show` output or a row of the log
        if "facts" in data and not isinstance(data["facts"], dict):
            raise InputError(f"must be an object, not a {_json_type(data['facts'])}", field="facts")
        return {**data, "answer": _checked_answer(data["answer"], ("answer",))}
    if "recommendation" in data or "trace" in data:  # an answer: `recommend --format json` output
        return _checked_answer(data, ())
    return data


def _checked_answer(value, where: tuple) -> dict:
    """The answer validated and as the model writes it (extra keys, such as a decision_id, kept)."""
    try:
        answer = Answer.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part)[:40] for part in (*where, *first["loc"])) or None
        raise InputError(str(first["msg"])[:300], field=field) from None
    try:
        return {**value, **answer.model_dump(mode="json")}
    except (ValueError, RecursionError):  # pydantic: "Maximum serialization depth exceeded" in a free-form dict
        raise InputError("nests too deeply to explain", field=".".join(where) or None) from None


def _json_type(value) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
