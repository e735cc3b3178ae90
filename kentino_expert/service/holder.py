"""The expert in service, swapped atomically: a reload builds a new one and takes it only when it loads."""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import DecisionLogError, KentinoError, Location, LogUnavailable, RuleFileError
from ..ruleset.diagnostics import Diagnostic
from ..sandbox import Limits, built

log = logging.getLogger("kentino_expert.service")
LOCAL, PUBLISHED, EARLIER = "local", "published", "published-earlier"
BUILD_MARGIN_SECONDS = 30.0  # what the in-process build may take beyond the sandbox's trial
# a published set refused here is tried again after this long (a refusal may be a trial timed out under load)
RETRY_REFUSED_SECONDS = 300.0


def build_seconds() -> float:
    """How long a reload may build before it is given up (KENTINO_RELOAD_SECONDS; default: the sandbox's trial
    limit plus BUILD_MARGIN_SECONDS)."""
    text = os.environ.get("KENTINO_RELOAD_SECONDS")
    try:
        value = float(text) if text else 0.0
    except ValueError:
        value = 0.0
    return value if 0 < value < 1e6 else Limits.from_env().seconds + BUILD_MARGIN_SECONDS


@dataclass(frozen=True)
class Serving:
    """What is being served, as one value: readers never see a new generation with an old expert.
    `source` says where its rules came from: the replica's directories (`local`), the active published set
    (`published`), or an earlier published set because the active one does not build here (`published-earlier`);
    `published_digest` is the active published set last read (None: nothing published)."""
    expert: object
    generation: int
    loaded_at: float
    last_error: str | None = None
    source: str = LOCAL
    published_digest: str | None = None

    @property
    def behind(self) -> bool:
        """Whether the active published set is not the one served (it does not build here)."""
        return self.published_digest is not None and self.published_digest != self.expert.ruleset.digest


class ExpertHolder:
    """The expert in service; `reload` builds a new one and swaps it in only when it loads.

    The state is one frozen `Serving` replaced by a single assignment, so a request or /readyz
    running beside a reload thread sees either the old state or the new one, never a mix. A build runs in a
    thread of its own, bounded by `build_seconds()`: the lock that orders swaps is never held while files are
    read, and a build that does not finish is given up (said in /readyz), leaving the process stoppable.
    With several worker processes a reload in one worker touches `reload_file`; the others see its
    new mtime on their next request and reload themselves (refusing, as here, a broken rule set).

    With `published` (a follower.PublishedSource: a PostgreSQL log) the published rule set, once there
    is one, wins over the local directories: it is built at start, `follow()` switches to a newly
    published one, and a reload (HTTP, SIGHUP) reads the published set again instead of the directories.
    A replica that cannot build the active published set serves the newest earlier one it can, never its
    directories (published.earlier). `on_reload(result, trigger, serving)` is told each build ("ok" or "refused").
    """

    def __init__(self, factory, reload_file: str | None = None, published=None, on_reload=None):
        self.factory = factory
        self.published = published
        self.on_reload = on_reload
        self.build_seconds = build_seconds()
        self._lock = threading.Lock()  # orders the swaps of `serving`; held only to swap
        self._building = threading.Lock()  # one build at a time (a second reload waits, bounded)
        self._refused: str | None = None  # a published digest that failed to build: retried only after a while
        self._refused_at = 0.0
        self._staged: tuple[str, object] | None = None  # (digest, expert) built for a trial, taken on activation
        self.reload_file = Path(reload_file) if reload_file else None
        self._seen_mark = self._mark()
        self.serving = self._first()

    @property
    def expert(self):
        return self.serving.expert

    def _first(self) -> Serving:
        """The published set if there is one (an earlier one if it does not build here), else the local one."""
        if self.published is None:
            return Serving(self._built(self.factory), 1, time.time())
        try:
            found = self.published.active()
        except (DecisionLogError, LogUnavailable) as exc:  # followed once the log answers (the listener's recheck)
            error = f"reading the published rule set failed, serving the local rules until it can be read: {exc}"
            log.error("%s", error)
            return Serving(self._built(self.factory), 1, time.time(), error, LOCAL)
        if found is None:
            return Serving(self._built(self.factory), 1, time.time())
        expert, source, error = self._published_or_earlier(found)
        return Serving(expert, 1, time.time(), error, source, found.digest)

    def _published_or_earlier(self, found):
        """(expert, source, error) of the active set `found`, or of the newest earlier published set that builds
        here when it does not; a RuleFileError naming each refusal when none does."""
        try:
            return self._built(self.published.factory(found)), PUBLISHED, None
        except KentinoError as exc:
            refusal = f"the published rule set {found.digest[:16]} does not build here: {_first_line(exc)}"
            self._refuse(found.digest)
            self._answer(0, found.digest, "refused", str(exc))
        reasons = [refusal]
        for digest in self.published.earlier(found.digest):
            try:
                expert = self._built(self.published.factory(self.published.fetch(digest)))
            except KentinoError as exc:
                reasons.append(f"the earlier published rule set {digest[:16]} does not build here either: "
                               f"{_first_line(exc)}")
                continue
            error = f"{refusal}; serving the earlier published rule set {digest[:16]}"
            log.error("%s", error)
            return expert, EARLIER, error
        raise RuleFileError([Diagnostic(Location("published rule sets"), "E207", "; ".join(reasons) + ": this "
                                        "replica serves no published set, and never its own directories")])

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
        old = self.serving
        if found is not None and found.digest == old.expert.ruleset.digest:
            self._swap(lambda now: replace(now, published_digest=found.digest, last_error=None))
            return self._result(old, self.serving, reloaded=False)
        new = self._build(found, trigger)
        if propagate and self.reload_file is not None:
            try:
                self.reload_file.touch()
                self._seen_mark = self._mark()
            except OSError as exc:
                log.warning("cannot signal the other workers through %s: %s", self.reload_file, exc)
        return self._result(old, new)

    def follow(self) -> bool:
        """Answer the trials `rules publish` asked for, then switch to the active published set if it is not the
        one served (called on NOTIFY); True if switched. A set that failed to build is not tried again until it
        is published anew or reloaded."""
        if self.published is None:
            return False
        self._answer_trials()
        digest = self.published.active_digest()  # the files are read only when they are needed
        old = self._swap(lambda now: replace(now, published_digest=digest))
        if digest is None or digest == old.expert.ruleset.digest or self._refused_lately(digest):
            return False
        found = self.published.active()
        if found is None:  # unpublished meanwhile (by hand: `rules publish` never does it)
            return False
        try:
            self._build(found, "published")
        except KentinoError as exc:
            self._answer(0, found.digest, "refused", str(exc))
            log.error("published rule set %s refused, still serving %s:\n%s", found.digest[:16],
                      old.expert.ruleset.digest[:16], exc)
            return False
        log.info("now serving the published rule set %s", found.digest[:16])
        return True

    def _refused_lately(self, digest: str) -> bool:
        return digest == self._refused and time.monotonic() - self._refused_at < RETRY_REFUSED_SECONDS

    def _refuse(self, digest: str | None) -> None:
        if digest is not None:
            self._refused, self._refused_at = digest, time.monotonic()

    def _answer_trials(self) -> None:
        """Build each set a trial asks for, keep the newest that built (staged), and answer each trial."""
        for trial, digest in self.published.trials():
            if self._staged is not None and self._staged[0] == digest:
                self._answer(trial, digest, "ok")
                continue
            found = self.published.fetch(digest)
            try:
                expert = self._built(self.published.factory(found))
            except KentinoError as exc:
                self._answer(trial, digest, "refused", str(exc))
                continue
            self._staged = (digest, expert)
            self._answer(trial, digest, "ok")

    def _answer(self, trial: int, digest: str, result: str, reason: str = "") -> None:
        try:
            self.published.answer(trial, digest, result, reason)
        except (DecisionLogError, LogUnavailable) as exc:
            log.warning("cannot record this replica's answer for rule set %s: %s", digest[:16], exc)

    def _build(self, found, trigger: str) -> Serving:
        """Build and swap in the published set `found` (a staged build of it if there is one), or the local one."""
        staged, self._staged = self._staged, None
        factory = self.published.factory(found) if found is not None else self.factory
        try:
            if found is not None and staged is not None and staged[0] == found.digest:
                expert = staged[1]
            else:
                expert = self._built(factory)
        except KentinoError as exc:
            self._refuse(found.digest if found is not None else None)
            what = f"published rule set {found.digest[:16]}" if found is not None else "rule set"
            error = f"{what} refused: {exc}"
            self._swap(lambda now: replace(now, last_error=error, published_digest=found.digest if found is not None
                                           else now.published_digest))
            self._told("refused", trigger)
            raise
        self._refused = None
        new = self._swap(lambda now: Serving(expert, now.generation + 1, time.time(), None,
                                             PUBLISHED if found is not None else LOCAL,
                                             found.digest if found is not None else now.published_digest), new=True)
        self._told("ok", trigger)
        # the old expert's engine is closed by its finaliser once the last request using it is done
        return new

    def _built(self, factory):
        """factory()'s expert, built in a thread of its own and waited for at most `build_seconds`: the caller
        (a request, SIGHUP, the listener) is never stuck on a build, and a later reload builds anew. A build given
        up is closed if it ever finishes."""
        if not self._building.acquire(timeout=self.build_seconds):
            raise _gave_up(self.build_seconds, "another reload was still building")
        try:
            box, done = {}, threading.Event()

            def run():
                try:
                    box["expert"] = built(factory)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                    box["error"] = exc
                finally:
                    done.set()
                    if box.get("abandoned") and "expert" in box:
                        box["expert"].close()
            threading.Thread(target=run, name="kentino-build", daemon=True).start()
            if not done.wait(self.build_seconds):
                box["abandoned"] = True
                raise _gave_up(self.build_seconds, "building the rule set")
            if "error" in box:
                raise box["error"]
            return box["expert"]
        finally:
            self._building.release()

    def _swap(self, change, new: bool = False) -> Serving:
        """Replace `serving` by change(serving) under the lock; the new value if `new`, else the one replaced."""
        with self._lock:
            old = self.serving
            self.serving = change(old)
            return self.serving if new else old

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
            self.published.listen(self._follow_logged, self._status)

    def _status(self) -> tuple:
        """(digest, source, detail) of what this replica serves, for its heartbeat row."""
        serving = self.serving
        return serving.expert.ruleset.digest, serving.source, serving.last_error

    def _follow_logged(self) -> None:
        try:
            self.follow()
        except KentinoError as exc:  # the log cannot be read: the listener reconnects and tries again
            log.warning("cannot read the published rule set: %s", exc)

    def stop_following(self) -> None:
        if self.published is not None:
            self.published.close()


def _gave_up(seconds: float, doing: str) -> RuleFileError:
    return RuleFileError([Diagnostic(Location("rules"), "E207", f"reload given up after {seconds:g} s while "
                                     f"{doing} (KENTINO_RELOAD_SECONDS); the served rules did not change")])


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [""])[0][:500]
