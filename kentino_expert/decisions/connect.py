"""Which decision log a target names, and opening it: the one place KENTINO_DB is read.

A target is a SQLite path, a sqlite:///path URL or a postgresql:// URL (psycopg 3, imported only
then); none given means $KENTINO_DB, else ./kentino-decisions.db.
"""
from __future__ import annotations

import os

from ..errors import DecisionLogError
from .log import DecisionLog
from .postgres import PostgresDecisionLog
from .sqlite import SqliteDecisionLog

DEFAULT_PATH = "kentino-decisions.db"
ENVIRONMENT = "KENTINO_DB"


def log_target(given: str | os.PathLike | None = None) -> str:
    """The log a command or the service uses: the one given, else $KENTINO_DB, else ./kentino-decisions.db."""
    if given not in (None, ""):
        return os.fspath(given)
    return os.environ.get(ENVIRONMENT) or DEFAULT_PATH


def sqlite_path(url_or_path: str) -> str | None:
    """The file a SQLite log target names (a path or sqlite:///path), or None for another scheme."""
    text = os.fspath(url_or_path)
    if "://" not in text:
        return text
    scheme, rest = text.split("://", 1)
    return (rest or DEFAULT_PATH) if scheme.lower() == "sqlite" else None


def is_url(target: str) -> bool:
    return "://" in target


def open_log(url_or_path: str | os.PathLike | None = None) -> DecisionLog:
    """Open (and create, or migrate to the current schema) the log a target names (see `log_target`)."""
    text = log_target(url_or_path)
    scheme = text.split("://", 1)[0].lower() if is_url(text) else ""
    if scheme in ("postgresql", "postgres"):
        return PostgresDecisionLog(text)  # imports psycopg (an optional dependency) only now
    if scheme == "sqlite":
        return SqliteDecisionLog(sqlite_path(text))  # sqlite:///abs/path.db
    if scheme:
        raise DecisionLogError(f"unsupported decision log URL '{text}': use a file path, sqlite:///path "
                               "or postgresql://user@host/db")
    return SqliteDecisionLog(text)
