"""Published rule sets in the PostgreSQL decision log: one rule set for every replica, like an OPA bundle.

`rules publish` stores a checked rule set (its files and digest) in `rule_sets` and names it in
`rule_set_active`, then sends NOTIFY on CHANNEL in the same transaction, so the notification goes out
only if the set is stored. Replicas read the active set at start and LISTEN on a connection of their
own; on a notification (and after every reconnection, which may have missed some) they read the
active set again and switch to it if its digest is not the one they serve. The payload is only a
hint: replicas always read the row, so a notification from another schema of the same database
changes nothing.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from ..errors import DecisionLogError, KentinoError, Location, LogUnavailable
from .postgres import PostgresDecisionLog, connection_settings

CHANNEL = "kentino_rule_set"
ROOTS = ("rules", "knowledge")  # a file's name is ROOT/NAME: the directory it came from, then its name
MAX_FILE_BYTES = 4 << 20  # a rule or knowledge file larger than this is refused (the loaders read YAML)
RECONNECT_SECONDS = 1.0
RECHECK_SECONDS = 30.0  # the active set is read again after this long without a notification
_log = logging.getLogger("kentino_expert.published")


@dataclass(frozen=True)
class PublishedSet:
    """A published rule set: its digest, its files ({"rules/flow.yaml": text, ...}), when and by whom."""
    digest: str
    files: Mapping[str, str]
    published_at: str = ""
    published_by: str = ""


def check_file_name(name: str) -> str:
    """`name` if it is ROOT/FILE with a plain file name (no directory, no dot file); else DecisionLogError.

    The rows are read back by every replica and written into a directory: a name must not reach outside it."""
    root, _, base = str(name).partition("/")
    if root not in ROOTS or not base or "/" in base or "\\" in base or base.startswith(".") or "\x00" in base:
        raise DecisionLogError(f"published rule set: '{str(name)[:100]}' is not a rules/ or knowledge/ file name")
    return name


def read_files(rules_dir, knowledge_dir) -> dict[str, str]:
    """The files a rule set is: rules/*.yaml and knowledge/*.yaml (what the loaders read), as text."""
    files = {}
    for root, directory in zip(ROOTS, (rules_dir, knowledge_dir), strict=True):
        for path in sorted(Path(directory).glob("*.yaml")):
            if path.name.startswith(".") or not path.is_file():
                continue
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    raise KentinoError(f"larger than {MAX_FILE_BYTES >> 20} MiB", location=Location(str(path)))
                files[f"{root}/{path.name}"] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise KentinoError(f"cannot read: {getattr(exc, 'strerror', None) or exc}",
                                   location=Location(str(path))) from None
    return files


def write_files(files: Mapping[str, str], directory: Path) -> tuple[Path, Path]:
    """Write a rule set's files under `directory` (new, empty); return its (rules, knowledge) directories."""
    roots = tuple(directory / root for root in ROOTS)
    for root in roots:
        root.mkdir(mode=0o700)
    for name, text in files.items():
        (directory / check_file_name(name)).write_text(text, encoding="utf-8")
    return roots


def _store(log) -> PostgresDecisionLog:
    if not isinstance(log, PostgresDecisionLog):
        raise DecisionLogError(f"decision log {log.url}: rule sets are published only to a postgresql:// log; "
                               "replicas on SQLite reload from their own directories")
    return log


def publish(log, published: PublishedSet, by: str) -> bool:
    """Store `published` (once per digest) and make it the active set; NOTIFY the replicas. True when the
    active set changed, False when it was already active."""
    from psycopg.types.json import Jsonb
    store = _store(log)
    files = {check_file_name(name): text for name, text in published.files.items()}
    with store.writer("rule set not published") as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('kentino_expert.rule_set_active'))")
        current = conn.execute("SELECT digest FROM rule_set_active").fetchone()
        if current and current[0] == published.digest:
            return False
        conn.execute("INSERT INTO rule_sets (digest, files, published_by) VALUES (%s, %s, %s) "
                     "ON CONFLICT (digest) DO NOTHING", [published.digest, Jsonb(files), by])
        conn.execute("INSERT INTO rule_set_active (singleton, digest, activated_by) VALUES (TRUE, %s, %s) "
                     "ON CONFLICT (singleton) DO UPDATE SET digest = EXCLUDED.digest, "
                     "activated_at = now(), activated_by = EXCLUDED.activated_by", [published.digest, by])
        conn.execute("SELECT pg_notify(%s, %s)", [CHANNEL, published.digest])
    return True


def active_digest(log) -> str | None:
    """The digest of the active set (None: nothing published yet)."""
    with _store(log).reader() as conn:
        row = conn.execute("SELECT digest FROM rule_set_active").fetchone()
    return row[0] if row else None


def active(log) -> PublishedSet | None:
    """The active set with its files (None: nothing published yet)."""
    with _store(log).reader() as conn:
        row = conn.execute("SELECT s.digest, s.files, s.published_at, a.activated_by FROM rule_set_active a "
                           "JOIN rule_sets s ON s.digest = a.digest").fetchone()
    if row is None:
        return None
    digest, files, at, by = row
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise DecisionLogError(f"published rule set {digest[:16]}: its files are not a JSON object of texts")
    checked = {check_file_name(name): text for name, text in files.items()}
    return PublishedSet(digest, MappingProxyType(checked), at.isoformat(timespec="seconds"), by)


class Listener:
    """LISTEN on CHANNEL on a connection of its own, in a daemon thread; `on_change()` is called (in that
    thread) after each (re)connection and on each notification. Stopped by `stop()`."""

    def __init__(self, log, on_change: Callable[[], None], poll_seconds: float = 0.5,
                 recheck_seconds: float = RECHECK_SECONDS):
        self._url = _store(log).url
        self._recheck = recheck_seconds
        self._scrub = log.safe_url
        self._psycopg = log.psycopg
        self._on_change = on_change
        self._poll = poll_seconds
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kentino-rule-set-listener", daemon=True)
        self.connected = threading.Event()  # set while LISTEN is in effect (tests and /readyz wait on it)

    def start(self) -> Listener:
        self._thread.start()
        return self

    def stop(self, seconds: float = 5.0) -> None:
        self._stopping.set()
        self._thread.join(seconds)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._listen()
            except (self._psycopg.Error, DecisionLogError, LogUnavailable) as exc:
                _log.warning("rule-set listener on %s: %s; reconnecting", self._scrub(), str(exc).splitlines()[0])
            except Exception:  # noqa: BLE001 - a bug must not end the thread: replicas would stop following
                _log.exception("rule-set listener failed; reconnecting")
            self.connected.clear()
            self._stopping.wait(RECONNECT_SECONDS)

    def _listen(self) -> None:
        with self._psycopg.connect(self._url, autocommit=True, **connection_settings(self._url)) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            self.connected.set()
            self._changed()  # what was published while this replica was not listening
            checked = time.monotonic()
            while not self._stopping.is_set():
                heard = any(True for _ in conn.notifies(timeout=self._poll, stop_after=1))
                # a LISTEN connection a NAT dropped without a word hears nothing ever again: the active set is
                # read again after each quiet RECHECK_SECONDS, so a replica follows a publish late, never not
                if heard or time.monotonic() - checked >= self._recheck:
                    self._changed()
                    checked = time.monotonic()

    def _changed(self) -> None:
        try:
            self._on_change()
        except Exception:  # noqa: BLE001 - logged; the next notification tries again
            _log.exception("following the published rule set failed")
