"""The expert in service, swapped atomically: a reload builds a new one and takes it only when it loads."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import KentinoError
from ..sandbox import built

log = logging.getLogger("kentino_expert.service")
LOCAL, PUBLISHED = "local", "published"


@dataclass(frozen=True)
class Serving:
    """What is being served, as one value: readers never see a new generation with an old expert.
    `source` says where its rules came from (the replica's directories, or the published set);
    `published_digest` is the active published set last read (None: nothing published)."""
    expert: object
    generation: int
    loaded_at: float
    last_error: str | None = None
    source: str = LOCAL
    published_digest: str | None = None


class ExpertHolder:
    """The expert in service; `reload` builds a new one and swaps it in only when it loads.

    The state is one frozen `Serving` replaced by a single assignment, so a request or /readyz
    running beside a reload thread sees either the old state or the new one, never a mix.
    With several worker processes a reload in one worker touches `reload_file`; the others see its
    new mtime on their next request and reload themselves (refusing, as here, a broken rule set).

    With `published` (a follower.PublishedSource: a PostgreSQL log) the published rule set, once there
    is one, wins over the local directories: it is built at start, `follow()` switches to a newly
    published one, and a reload (HTTP, SIGHUP) reads the published set again instead of the directories.
    `on_reload(result, trigger, serving)` is told each build ("ok" or "refused").
    """

    def __init__(self, factory, reload_file: str | None = None, published=None, on_reload=None):
        self.factory = factory
        self.published = published
        self.on_reload = on_reload
        self._lock = threading.Lock()
        self._refused: str | None = None  # a published digest that failed to build: not retried on NOTIFY
        self.reload_file = Path(reload_file) if reload_file else None
        self._seen_mark = self._mark()
        self.serving = self._first()

    @property
    def expert(self):
        return self.serving.expert

    def _first(self) -> Serving:
        """The published set if there is one and it builds (else the local one, saying why)."""
        if self.published is None:
            return Serving(built(self.factory), 1, time.time())
        error, found = None, None
        try:
            found = self.published.active()
            if found is not None:
                return Serving(built(self.published.factory(found)), 1, time.time(), None, PUBLISHED, found.digest)
        except KentinoError as exc:
            what = f"the published rule set {found.digest[:16]}" if found else "reading the published rule set"
            error = f"{what} refused, serving the local rules: {exc}"
            self._refused = found.digest if found else None
            log.error("%s", error)
        return Serving(built(self.factory), 1, time.time(), error, LOCAL, found.digest if found else None)

    def _mark(self):
        try:
            return self.reload_file.stat().st_mtime_ns if self.reload_file else None
        except OSError:
            return None

    def snapshot(self) -> Serving:
        """The state to use for one whole request (later swaps do not affect it). A reload signalled
        by another worker runs in a thread of its own: its trial load can take up to the sandbox's
        limit, and the request (on the event loop) is answered by the current rules meanwhile."""
        if self.reload_file is not None:
            mark = self._mark()
            if mark != self._seen_mark:
                self._seen_mark = mark
                threading.Thread(target=self._signalled_reload, name="kentino-reload", daemon=True).start()
        return self.serving

    def _signalled_reload(self) -> None:
        try:
            self.reload(propagate=False, trigger="worker")
        except KentinoError as exc:
            log.error("reload signalled by another worker refused: %s", exc)

    def current(self):
        """The expert to use for one whole request."""
        return self.snapshot().expert

    def reload(self, propagate: bool = True, trigger: str = "http") -> dict:
        """Build a new expert (the published set when there is one, else from the same factory); raise
        its KentinoError (any other failure of the build becomes one) and keep the old one if it fails."""
        found = self.published.active() if self.published is not None else None
        with self._lock:
            old = self.serving
            if found is not None and found.digest == old.expert.ruleset.digest:
                self.serving = replace(old, published_digest=found.digest, last_error=None)
                return self._result(old, self.serving, reloaded=False)
            new = self._build(old, found, trigger)
            if propagate and self.reload_file is not None:
                try:
                    self.reload_file.touch()
                    self._seen_mark = self._mark()
                except OSError as exc:
                    log.warning("cannot signal the other workers through %s: %s", self.reload_file, exc)
        return self._result(old, new)

    def follow(self) -> bool:
        """Switch to the active published set if it is not the one served (called on NOTIFY); True if
        switched. A set that failed to build is not tried again until it is published anew or reloaded."""
        if self.published is None:
            return False
        digest = self.published.active_digest()  # the files are read only when they are needed
        with self._lock:
            old = self.serving
            if digest != old.published_digest:
                self.serving = old = replace(old, published_digest=digest)
            if digest is None or digest in (old.expert.ruleset.digest, self._refused):
                return False
            found = self.published.active()
            if found is None:  # unpublished meanwhile (by hand: `rules publish` never does it)
                return False
            try:
                self._build(old, found, "published")
            except KentinoError as exc:
                log.error("published rule set %s refused, still serving %s:\n%s", found.digest[:16],
                          old.expert.ruleset.digest[:16], exc)
                return False
            log.info("now serving the published rule set %s", found.digest[:16])
            return True

    def _build(self, old: Serving, found, trigger: str) -> Serving:
        """Build and swap in (caller holds the lock): the published set `found`, or the local one."""
        factory = self.published.factory(found) if found is not None else self.factory
        published_digest = found.digest if found is not None else old.published_digest
        try:
            expert = built(factory)
        except KentinoError as exc:
            self._refused = found.digest if found is not None else self._refused
            what = f"published rule set {found.digest[:16]}" if found is not None else "rule set"
            self.serving = replace(old, last_error=f"{what} refused: {exc}", published_digest=published_digest)
            self._told("refused", trigger)
            raise
        self._refused = None
        self.serving = Serving(expert, old.generation + 1, time.time(), None,
                               PUBLISHED if found is not None else LOCAL, published_digest)
        self._told("ok", trigger)
        # the old expert's engine is closed by its finaliser once the last request using it is done
        return self.serving

    def _told(self, result: str, trigger: str) -> None:
        if self.on_reload is not None:
            try:
                self.on_reload(result, trigger, self.serving)
            except Exception:  # noqa: BLE001 - metrics must not fail a reload
                log.exception("reload observer failed")

    @staticmethod
    def _result(old: Serving, new: Serving, reloaded: bool = True) -> dict:
        return {"reloaded": reloaded, "digest": new.expert.ruleset.digest, "previous_digest": old.expert.ruleset.digest,
                "rules": len(new.expert.ruleset.rules), "generation": new.generation, "source": new.source}

    # -- following the published set (a PostgreSQL log) ----------------------------------------------
    def start_following(self) -> None:
        """Listen for newly published sets (nothing to do without a PostgreSQL log)."""
        if self.published is not None:
            self.published.listen(self._follow_logged)

    def _follow_logged(self) -> None:
        try:
            self.follow()
        except KentinoError as exc:  # the log cannot be read: the listener reconnects and tries again
            log.warning("cannot read the published rule set: %s", exc)

    def stop_following(self) -> None:
        if self.published is not None:
            self.published.close()
