"""Published rule sets in the PostgreSQL decision log: one rule set for every replica, like an OPA bundle.

`rules publish` stores a checked rule set (its files and digest) in `rule_sets`, asks every replica alive to
build it (a trial, replicas.py) and, when every one did, names it in `rule_set_active` and appends it to
`rule_set_activations`, sending NOTIFY on CHANNEL in the same transaction, so the notification goes out only
if the set is active. Replicas read the active set at start and LISTEN on a connection of their own; on a
notification (and after every reconnection, which may have missed some) they read the active set again and
switch to it if its digest is not the one they serve. A replica that cannot build the active set serves the
newest earlier activated set it can (`earlier`), never its own directories. The payload is only a hint:
replicas always read the rows, so a notification from another schema of the same database changes nothing.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from ..errors import DecisionLogError, KentinoError, Location
from ..sourcefiles import read_source, yaml_files
from .postgres import PostgresDecisionLog

CHANNEL = "kentino_rule_set"
ROOTS = ("rules", "knowledge")  # a file's name is ROOT/NAME: the directory it came from, then its name
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
    """The files a rule set is: rules/*.yaml and knowledge/*.yaml (what the loaders read), as text; each a regular
    file inside its directory of at most MAX_FILE_BYTES (sourcefiles.py), else a KentinoError at the file."""
    files = {}
    for root, directory in zip(ROOTS, (rules_dir, knowledge_dir), strict=True):
        for path in yaml_files(directory):
            try:
                files[f"{root}/{path.name}"] = read_source(path, directory).decode("utf-8")
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


def store(log, published: PublishedSet, by: str) -> None:
    """Store `published` (once per digest) without making it active: a trial or an activation names it next."""
    from psycopg.types.json import Jsonb
    files = {check_file_name(name): text for name, text in published.files.items()}
    with _store(log).writer("rule set not published") as conn:
        conn.execute("INSERT INTO rule_sets (digest, files, published_by) VALUES (%s, %s, %s) "
                     "ON CONFLICT (digest) DO NOTHING", [published.digest, Jsonb(files), by])


def activate(log, digest: str, by: str) -> bool:
    """Make the stored set `digest` the active one, record the activation and NOTIFY the replicas. True when the
    active set changed, False when it was already active."""
    with _store(log).writer("rule set not published") as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('kentino_expert.rule_set_active'))")
        current = conn.execute("SELECT digest FROM rule_set_active").fetchone()
        if current and current[0] == digest:
            return False
        conn.execute("INSERT INTO rule_set_active (singleton, digest, activated_by) VALUES (TRUE, %s, %s) "
                     "ON CONFLICT (singleton) DO UPDATE SET digest = EXCLUDED.digest, "
                     "activated_at = now(), activated_by = EXCLUDED.activated_by", [digest, by])
        conn.execute("INSERT INTO rule_set_activations (digest, activated_by) VALUES (%s, %s)", [digest, by])
        conn.execute("SELECT pg_notify(%s, %s)", [CHANNEL, digest])
    return True


def publish(log, published: PublishedSet, by: str) -> bool:
    """Store `published` and make it the active set at once (no trial); NOTIFY the replicas. True when the active
    set changed, False when it was already active."""
    store(log, published, by)
    return activate(log, published.digest, by)


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
    return _published_set(*row)


def fetch(log, digest: str) -> PublishedSet | None:
    """The stored set `digest` with its files (None: no such set)."""
    with _store(log).reader() as conn:
        row = conn.execute("SELECT digest, files, published_at, published_by FROM rule_sets WHERE digest = %s",
                           [digest]).fetchone()
    return None if row is None else _published_set(*row)


def earlier(log, digest: str, limit: int = 5) -> list[str]:
    """The sets activated before the newest activation of `digest`, newest first, each once, `digest` left out:
    where a replica that cannot build the active set looks for the set to serve instead."""
    with _store(log).reader() as conn:
        rows = conn.execute(
            "SELECT digest FROM rule_set_activations WHERE digest <> %s AND seq < coalesce((SELECT max(seq) FROM "
            "rule_set_activations WHERE digest = %s), 9223372036854775807) GROUP BY digest ORDER BY max(seq) DESC "
            "LIMIT %s", [digest, digest, limit]).fetchall()
    return [row[0] for row in rows]


def _published_set(digest, files, at, by) -> PublishedSet:
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise DecisionLogError(f"published rule set {digest[:16]}: its files are not a JSON object of texts")
    checked = {check_file_name(name): text for name, text in files.items()}
    return PublishedSet(digest, MappingProxyType(checked), at.isoformat(timespec="seconds"), by)
