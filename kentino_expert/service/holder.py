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


@dataclass(frozen=True)
class Serving:
    """What is being served, as one value: readers never see a new generation with an old expert."""
    expert: object
    generation: int
    loaded_at: float
    last_error: str | None = None


class ExpertHolder:
    """The expert in service; `reload` builds a new one and swaps it in only when it loads.

    The state is one frozen `Serving` replaced by a single assignment, so a request or /readyz
    running beside a reload thread sees either the old state or the new one, never a mix.
    With several worker processes a reload in one worker touches `reload_file`; the others see its
    new mtime on their next request and reload themselves (refusing, as here, a broken rule set).
    """

    def __init__(self, factory, reload_file: str | None = None):
        self.factory = factory
        self._lock = threading.Lock()
        self.reload_file = Path(reload_file) if reload_file else None
        self._seen_mark = self._mark()
        self.serving = Serving(built(factory), 1, time.time())

    @property
    def expert(self):
        return self.serving.expert

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
            self.reload(propagate=False)
        except KentinoError as exc:
            log.error("reload signalled by another worker refused: %s", exc)

    def current(self):
        """The expert to use for one whole request."""
        return self.snapshot().expert

    def reload(self, propagate: bool = True) -> dict:
        """Build a new expert from the same factory; raise its KentinoError (any other failure of the
        build becomes one) and keep the old one if it fails."""
        with self._lock:
            old = self.serving
            try:
                new = built(self.factory)
            except KentinoError as exc:
                self.serving = replace(old, last_error=str(exc))
                raise
            self.serving = Serving(new, old.generation + 1, time.time())
            if propagate and self.reload_file is not None:
                try:
                    self.reload_file.touch()
                    self._seen_mark = self._mark()
                except OSError as exc:
                    log.warning("cannot signal the other workers through %s: %s", self.reload_file, exc)
        # the old expert's engine is closed by its finaliser once the last request using it is done
        return {"reloaded": True, "digest": new.ruleset.digest, "previous_digest": old.expert.ruleset.digest,
                "rules": len(new.ruleset.rules), "generation": old.generation + 1}
