"""Checks and times shared by every entry point of the decision log (HTTP, MCP, the CLI, the log itself)."""
from __future__ import annotations

import re
import unicodedata
from datetime import datetime, timezone

from .errors import DecisionLogError, InputError

MAX_SESSION_ID = 200
MAX_TURN = 2**63 - 1  # SQLite's and PostgreSQL's widest INTEGER: a larger turn cannot be stored
_TURN_TEXT = re.compile(r"[+-]?[0-9]{1,40}")  # ASCII digits only: int() also takes '²' and '٣'
# control characters forge lines in `decisions list`; a lone surrogate cannot be encoded by any driver
_BAD_CATEGORIES = {"Cc", "Cs", "Zl", "Zp"}


def utc_now() -> str:
    """ISO-8601 UTC with microseconds, e.g. 2025-01-31T12:00:00.000000+00:00 (sorts as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def normalise_time(text: str) -> str:
    """An ISO-8601 date or time as the log stores it (naive times are taken as UTC)."""
    try:
        moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise DecisionLogError(f"'{text}' is not an ISO-8601 date or time (e.g. 2025-01-31T12:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")
    except OverflowError:  # 9999-12-31T23:00-05:00 is in year 10000 in UTC
        raise DecisionLogError(f"'{text}' is not an ISO-8601 time between years 1 and 9999 in UTC") from None


def check_session_id(value) -> str | None:
    """The session id as stored: 1-200 characters of printable text (an integer is taken as its digits)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError("must be a string", field="session_id")
    too_long = isinstance(value, int) and abs(value) >= 10**MAX_SESSION_ID  # str() of a huge int may be refused
    text = "" if too_long else str(value)
    if too_long or not 1 <= len(text) <= MAX_SESSION_ID:
        raise InputError(f"must be 1 to {MAX_SESSION_ID} characters", field="session_id")
    if any(unicodedata.category(c) in _BAD_CATEGORIES for c in text):
        raise InputError("must be text without control characters, line breaks or lone surrogates",
                         field="session_id")
    return text


def check_turn(value) -> int | None:
    """The turn as stored: an integer from 0 to 2**63-1 (a string of ASCII digits is read as one)."""
    if value is None:
        return None
    if isinstance(value, str) and _TURN_TEXT.fullmatch(value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError("must be an integer", field="turn")
    if not 0 <= value <= MAX_TURN:
        raise InputError(f"must be between 0 and {MAX_TURN}", field="turn")
    return value


def check_meta(session_id, turn) -> tuple[str | None, int | None]:
    """(session_id, turn) checked as every entry point (HTTP, MCP, the log itself) must check them."""
    return check_session_id(session_id), check_turn(turn)
