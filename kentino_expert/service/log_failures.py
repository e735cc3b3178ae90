"""A decision log that fails, as a client is told and as the operator's log has it: the log's own words name its
database (PostgreSQL's user, host, port and name), so they go to the server's log, once while they stay the same,
and a client (who needs no token to decide) gets a sentence."""
from __future__ import annotations

import logging
import threading
import time

from ..errors import DecisionLogError

REPEAT_SECONDS = 60.0  # the same failure is logged again after this long: a log down for a minute is one line
NOT_RECORDED = "the decision could not be recorded, so it is not given (the server's log says why)"
NOT_READ = "the decision log cannot be read now (the server's log says why)"

_logger = logging.getLogger("uvicorn.error")
_lock = threading.Lock()
_last: dict = {"message": None, "at": 0.0}


def public_message(exc: DecisionLogError, writing: bool) -> str:
    """What a client is told of `exc` (a write that failed, or a read); its own message is logged."""
    _log_once(f"decision log: {exc.message}")
    return NOT_RECORDED if writing else NOT_READ


def _log_once(message: str) -> None:
    now = time.monotonic()
    with _lock:  # the service's threads (and MCP's) share it
        if message == _last["message"] and now - _last["at"] < REPEAT_SECONDS:
            return
        _last.update(message=message, at=now)
    _logger.warning(message)


def forget_logged() -> None:
    """Log the next failure whatever came before (tests reset this global state)."""
    with _lock:
        _last.update(message=None, at=0.0)
