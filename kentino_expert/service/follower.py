"""A replica's published rule set: read from its PostgreSQL log, written into a private directory, built
through the same sandboxed factory as a local reload, tried when `rules publish` asks and followed on NOTIFY
(decisions/published.py, decisions/replicas.py).

Each set is written into a directory of its own under one private temporary directory of the process;
a set's directory is removed once the expert built from it is gone (the last request using it has
ended), and the whole temporary directory when the service stops.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import weakref
from pathlib import Path

from ..decisions import published as store
from ..decisions import replicas
from ..decisions.postgres import PostgresDecisionLog
from ..errors import KentinoError, Location, RuleFileError
from ..expert import Expert
from ..ruleset.diagnostics import Diagnostic
from ..sandbox import vet
from .holder import ExpertHolder


def follows_published(log) -> bool:
    """Whether a service on this log follows the published rule set (a PostgreSQL log does)."""
    return isinstance(log, PostgresDecisionLog)


def sandboxed_factory(rules_dir=None, knowledge_dir=None):
    """The factory of an Expert on these directories that first trial-loads them in a child process (sandbox.vet):
    a hang or crash is refused there."""
    def build():
        vet(rules_dir, knowledge_dir)
        return Expert(rules_dir, knowledge_dir)
    build.rules_dir = rules_dir
    return build


def holder_for(log, factory, reload_file: str | None = None) -> ExpertHolder:
    """The expert holder of a server on `log` whose own rules `factory` builds: on a PostgreSQL log it serves the
    published rule set once there is one (and follows it after `start_following()`), each built sandboxed."""
    published = PublishedSource(log, sandboxed_factory) if follows_published(log) else None
    return ExpertHolder(factory, reload_file, published=published)


class PublishedSource:
    """The published rule set of `log`, as factories the holder builds; `factory_for(rules_dir,
    knowledge_dir)` makes the factory of a directory (the app's sandboxed one). `replica` names this process
    among the log's replicas (its instance label and process id)."""

    def __init__(self, log, factory_for):
        self.log = log
        self.factory_for = factory_for
        self.replica = f"{getattr(log, 'instance', None) or 'replica'}/{os.getpid()}"
        self._base: Path | None = None
        self._lock = threading.Lock()
        self._listener = None
        try:  # the trials asked for before this process started are not its to answer
            self._last_trial = replicas.last_trial(log)
        except KentinoError:
            self._last_trial = 0

    def active(self) -> store.PublishedSet | None:
        """The active published set, files included (None: nothing published)."""
        return store.active(self.log)

    def active_digest(self) -> str | None:
        return store.active_digest(self.log)

    def fetch(self, digest: str) -> store.PublishedSet:
        found = store.fetch(self.log, digest)
        if found is None:
            raise KentinoError(f"published rule set {digest[:16]} is not in the log")
        return found

    def earlier(self, digest: str) -> list[str]:
        """The sets activated before `digest`, newest first: what to serve when `digest` does not build here."""
        return store.earlier(self.log, digest)

    def trials(self) -> list[tuple[int, str]]:
        """The trials asked for since the last call: (trial, digest), oldest first."""
        pending = replicas.pending_trials(self.log, self._last_trial)
        if pending:
            self._last_trial = pending[-1][0]
        return pending

    def answer(self, trial: int, digest: str, result: str, reason: str = "") -> None:
        replicas.answer(self.log, trial, self.replica, digest, result, reason)

    def factory(self, found: store.PublishedSet):
        """A factory that builds `found` from a directory of its own and checks the digest it gets."""
        directory = Path(tempfile.mkdtemp(prefix=f"{found.digest[:12]}-", dir=self._base_dir()))
        try:
            rules_dir, knowledge_dir = store.write_files(found.files, directory)
        except (OSError, KentinoError) as exc:
            shutil.rmtree(directory, ignore_errors=True)
            raise KentinoError(f"published rule set {found.digest[:16]}: cannot write it out: {exc}") from None
        inner = self.factory_for(str(rules_dir), str(knowledge_dir))

        def build():
            try:
                expert = inner()
                _check_digest(expert, found, rules_dir)
            except BaseException:
                shutil.rmtree(directory, ignore_errors=True)
                raise
            weakref.finalize(expert, shutil.rmtree, str(directory), True)  # when its last request is done
            return expert
        build.rules_dir = str(rules_dir)
        return build

    def listen(self, on_change, status) -> None:
        """Call `on_change()` (in a thread of its own) on each NOTIFY and after each reconnection, and keep this
        replica's heartbeat with what `status()` says it serves."""
        self._listener = replicas.Listener(self.log, self.replica, on_change, status).start()

    @property
    def listening(self) -> threading.Event | None:
        return self._listener.connected if self._listener is not None else None

    def close(self) -> None:
        """Stop listening and remove the directories written."""
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        with self._lock:
            base, self._base = self._base, None
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)

    def _base_dir(self) -> Path:
        with self._lock:
            if self._base is None:
                self._base = Path(tempfile.mkdtemp(prefix="kentino-published-"))
                atexit.register(shutil.rmtree, self._base, True)
            return self._base


def _check_digest(expert, found: store.PublishedSet, rules_dir: Path) -> None:
    """A set that builds to another digest (a replica of another version hashes otherwise) is refused:
    served, it would be logged under a digest nobody published."""
    built = expert.ruleset.digest
    if built != found.digest:
        expert.close()
        raise RuleFileError([Diagnostic(Location(str(rules_dir)), "E207", f"the published rule set "
                                        f"{found.digest[:16]} builds here as {built[:16]}: upgrade every "
                                        "replica to the same kentino-expert")])
