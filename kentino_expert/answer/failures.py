"""Arithmetic that fails on facts the input contract accepts: an EngineError for the caller, and the traceback
for whoever maintains the rules and the knowledge, logged once per place it failed."""
from __future__ import annotations

import logging
import threading
import traceback
from contextlib import contextmanager

from ..errors import EngineError, KentinoError

# what sizing and rules raise on numbers they cannot handle (a rule dividing by a figure that came out 0, a
# constant in knowledge/ that overflows a figure); anything else is a defect of this code and stays a crash
EVALUATION_FAILURES = (ArithmeticError, ValueError, TypeError, RecursionError)
MAX_SITES = 256  # places whose traceback was logged, kept to say "logged before" (bounded: new places keep logging)

_logged: set = set()
_lock = threading.Lock()


@contextmanager
def evaluation_failures(facts, logger: logging.Logger):
    """Turn an evaluation failure inside the block into an EngineError (`TypeName: message`), logging `facts`
    with it: the traceback the first time a place fails, one line after (a client repeating the facts must not
    fill the log)."""
    try:
        yield
    except KentinoError:
        raise
    except EVALUATION_FAILURES as exc:
        _report(exc, facts, logger)
        raise EngineError(f"{type(exc).__name__}: {exc}") from None


def _report(exc: BaseException, facts, logger: logging.Logger) -> None:
    frames = traceback.extract_tb(exc.__traceback__)
    site = (type(exc).__name__, frames[-1].filename, frames[-1].lineno) if frames else (type(exc).__name__, "", 0)
    with _lock:
        first = site not in _logged
        if first and len(_logged) < MAX_SITES:
            _logged.add(site)
    if first:
        logger.warning("facts that cannot be evaluated: %r", facts, exc_info=exc)
    else:
        logger.warning("facts that cannot be evaluated (%s at %s:%d; its traceback is logged above): %r",
                       *site, facts)


def forget_logged_sites() -> None:
    """Log the next failure of every place in full again (tests reset global state with this)."""
    with _lock:
        _logged.clear()
