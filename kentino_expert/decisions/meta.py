"""Checks and times shared by every entry point of the decision log (HTTP, MCP, the CLI, the log itself)."""
from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime, timedelta

from ..errors import DecisionLogError, InputError

MAX_SESSION_ID = 200
MAX_TURN = 2**63 - 1  # SQLite's and PostgreSQL's widest INTEGER: a larger turn cannot be stored
_TURN_TEXT = re.compile(r"[+-]?[0-9]{1,40}")  # ASCII digits only: int() also takes '²' and '٣'
# control characters forge lines in `decisions list`; a lone surrogate cannot be encoded by any driver
_BAD_CATEGORIES = {"Cc", "Cs", "Zl", "Zp"}
# the same characters as the ranges of a regular expression's class (for the OpenAPI document), written as the
# characters themselves (JSON escapes the controls): Cc, Zl and Zp. Cs is left out: a lone surrogate is no character
# of UTF-8, so no query string or JSON text sent in it can hold one, and regex dialects read its escapes apart
NOT_TEXT = "\x00-\x1f\x7f-\x9f\u2028\u2029"
# a cursor: microseconds since 1970 (17 digits reach past the year 5000), a dot, an id of 1-200 bytes in hex
CURSOR_PATTERN = rf"^-?[0-9]{{1,17}}\.(?:[0-9a-f]{{2}}){{1,{MAX_SESSION_ID}}}$"
CURSOR = re.compile(CURSOR_PATTERN.replace("$", r"\Z"), re.ASCII)
_CURSOR_ERROR = "is not a cursor of this log: pass next_cursor back unchanged"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc_now() -> str:
    """ISO-8601 UTC with microseconds, e.g. 2025-01-31T12:00:00.000000+00:00 (sorts as text)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


# ISO-8601's extended form (what the log stores and its documentation shows): fromisoformat alone also reads
# '11111111111111111111' (or 5,000 ones) as 1111-11-11T11:11:11.111111
_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}(?::\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?)?"
                       r"(?:Z|[+-]\d{2}(?::?\d{2})?)?)?", re.ASCII)


def normalise_time(text: str, clamp: bool = False) -> str:
    """An ISO-8601 date or time as the log stores it (naive times are taken as UTC). One whose UTC falls before year 1
    or after 9999 (0001-01-01T00:00+05:00) is refused, or with `clamp` (a filter's bound, where it means 'from the
    first' or 'after the last') taken as the first or last moment there is."""
    text = str(text).strip()
    try:
        if not _ISO_TIME.fullmatch(text):
            raise ValueError(text)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise DecisionLogError(f"'{text[:60]}' is not an ISO-8601 date or time (e.g. 2025-01-31T12:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC).isoformat(timespec="microseconds")
    except OverflowError:  # 9999-12-31T23:00-05:00 is in year 10000 in UTC
        if clamp:
            edge = datetime.min if moment.year == datetime.min.year else datetime.max
            return edge.replace(tzinfo=UTC).isoformat(timespec="microseconds")
        raise DecisionLogError(f"'{text}' is not an ISO-8601 time between years 1 and 9999 in UTC") from None


def check_session_id(value) -> str | None:
    """The session id as stored: 1-200 characters of printable text (an integer, or a whole float such as 60.0 as a
    JSON integer may be written, is taken as its digits)."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
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


def check_instance(value) -> str:
    """An instance label as recorded: 1-200 characters of printable text."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_SESSION_ID or \
            any(unicodedata.category(c) in _BAD_CATEGORIES for c in value):
        raise InputError(f"must be 1 to {MAX_SESSION_ID} characters of text without control characters",
                         field="instance")
    return value


def check_turn(value) -> int | None:
    """The turn as stored: an integer from 0 to 2**63-1 (a string of ASCII digits, or a whole float such as 3.0,
    is read as one)."""
    if value is None:
        return None
    digits = isinstance(value, str) and _TURN_TEXT.fullmatch(value.strip())
    whole = isinstance(value, float) and value.is_integer()  # 3.0, as a fact's count is taken (pydantic's lax int)
    if digits or whole:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError("must be an integer", field="turn")
    if not 0 <= value <= MAX_TURN:
        raise InputError(f"must be between 0 and {MAX_TURN}", field="turn")
    return value


def check_meta(session_id, turn) -> tuple[str | None, int | None]:
    """(session_id, turn) checked as every entry point (HTTP, MCP, the log itself) must check them."""
    return check_session_id(session_id), check_turn(turn)


def encode_cursor(created_at: str, decision_id: str) -> str:
    """The cursor for the page after the decision (created_at, decision_id): the time in microseconds since 1970
    (UTC), a dot, and the id's UTF-8 bytes in hex, e.g. '1796438297245614.3663...'. URL-safe, and every text of
    its form (CURSOR_PATTERN) is a position in the listing, so the OpenAPI document can say exactly which are
    taken."""
    moment = datetime.fromisoformat(str(created_at))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    micros = (moment - EPOCH) // timedelta(microseconds=1)
    return f"{micros}.{str(decision_id).encode('utf-8', 'surrogatepass').hex()}"


def decode_cursor(cursor) -> tuple[str, str]:
    """(created_at as the log stores it, decision_id) of a cursor: one the log gave continues where its page ended;
    any other text of the cursor's form is a position too (a time before year 1 or after 9999 is taken as the
    first or last there can be, an id's bytes that are not UTF-8 as their nearest text). Anything else is an
    InputError."""
    if not isinstance(cursor, str) or not CURSOR.fullmatch(cursor):
        raise InputError(_CURSOR_ERROR, field="cursor")
    micros, _, hex_id = cursor.partition(".")
    try:
        moment = EPOCH + timedelta(microseconds=int(micros))
    except OverflowError:  # beyond datetime's years 1-9999: the first or last moment it has
        moment = datetime.min.replace(tzinfo=UTC) if micros.startswith("-") else datetime.max.replace(tzinfo=UTC)
    decision_id = bytes.fromhex(hex_id).decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    return moment.isoformat(timespec="microseconds"), decision_id


def check_no_nul(value, field: str) -> None:
    """Refuse the NUL character anywhere in `value` (a JSON-able structure): PostgreSQL's JSONB cannot hold it,
    and the log must take the same decisions on both backends."""
    if _holds_nul(value):
        raise InputError("must not contain the NUL character (\\u0000)", field=field)


def _holds_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_nul(v) for v in value)
    return False
