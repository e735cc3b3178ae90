"""The replicas of one PostgreSQL log, so they serve one rule set: who is alive, the trials `rules publish` asks of
them before it activates a set, their answers, and the listener each replica follows the published set with.

A replica registers in `replicas` when its listener connects and updates `seen_at` every HEARTBEAT_SECONDS
from that connection; one not seen for LIVE_SECONDS is taken for gone. `rules publish` stores a set, adds a
trial row and NOTIFYs; each replica alive builds the set (the same sandboxed build as a switch), keeps it
ready and answers `ok` or `refused` with the reason in `rule_set_acks`. Only when every replica alive answered
`ok` is the set activated, and the replicas switch to the build they already have: none serves a set the
others refused. A replica also answers when it refuses a set activated without a trial (`--wait 0`).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import DecisionLogError, LogUnavailable
from .postgres import connection_settings
from .published import CHANNEL, _store

HEARTBEAT_SECONDS = 5.0
LIVE_SECONDS = 3 * HEARTBEAT_SECONDS  # a replica not seen for this long is taken for gone
RECONNECT_SECONDS = 1.0
RECHECK_SECONDS = 30.0  # the active set is read again after this long without a notification
DEFAULT_WAIT_SECONDS = 120.0  # what `rules publish` waits for the replicas' answers by default
REASON_CHARACTERS = 2000  # what an answer keeps of a refusal's reason
_log = logging.getLogger("kentino_expert.published")


@dataclass(frozen=True)
class Answer:
    """A replica's answer to a trial: `ok`, `refused` (with the reason) or `silent` (no answer in time)."""
    replica: str
    result: str
    reason: str = ""


def request_trial(log, digest: str, by: str) -> int:
    """Ask every replica to build the stored set `digest` (NOTIFY); the trial's number."""
    with _store(log).writer("rule set not published") as conn, conn.transaction():
        trial = conn.execute("INSERT INTO rule_set_trials (digest, requested_by) VALUES (%s, %s) RETURNING trial",
                             [digest, by]).fetchone()[0]
        conn.execute("SELECT pg_notify(%s, %s)", [CHANNEL, f"trial:{trial}"])
    return trial


def pending_trials(log, after: int) -> list[tuple[int, str]]:
    """The trials numbered above `after` (oldest first) as (trial, digest), among those of the last LIVE_SECONDS x 4:
    an older one was answered or given up by its publisher."""
    with _store(log).reader() as conn:
        rows = conn.execute("SELECT trial, digest FROM rule_set_trials WHERE trial > %s AND requested_at > "
                            "now() - make_interval(secs => %s) ORDER BY trial", [after, LIVE_SECONDS * 4]).fetchall()
    return [(trial, digest) for trial, digest in rows]


def last_trial(log) -> int:
    """The newest trial's number (0: none): a replica starting now answers only the trials after it."""
    with _store(log).reader() as conn:
        return conn.execute("SELECT coalesce(max(trial), 0) FROM rule_set_trials").fetchone()[0]


def answer(log, trial: int, replica: str, digest: str, result: str, reason: str = "") -> None:
    """Record `replica`'s answer to `trial` (0: a set activated without a trial) for the set `digest`."""
    with _store(log).writer("answer not recorded") as conn:
        conn.execute("INSERT INTO rule_set_acks (trial, replica, digest, result, reason) VALUES (%s, %s, %s, %s, %s) "
                     "ON CONFLICT (trial, replica) DO UPDATE SET result = EXCLUDED.result, reason = EXCLUDED.reason, "
                     "digest = EXCLUDED.digest, at = now()",
                     [trial, replica, digest, result, reason[:REASON_CHARACTERS]])


def live_replicas(log) -> list[str]:
    """The replicas seen in the last LIVE_SECONDS."""
    with _store(log).reader() as conn:
        rows = conn.execute("SELECT replica FROM replicas WHERE seen_at > now() - make_interval(secs => %s) "
                            "ORDER BY replica", [LIVE_SECONDS]).fetchall()
    return [row[0] for row in rows]


def await_answers(log, trial: int, replicas: list[str], seconds: float, poll: float = 0.2) -> list[Answer]:
    """Each of `replicas`' answers to `trial`, waiting until all answered or `seconds` passed (`silent`); a replica
    that left meanwhile (gone from `replicas` for LIVE_SECONDS) is not waited for."""
    deadline = time.monotonic() + seconds
    while True:
        with _store(log).reader() as conn:
            rows = conn.execute("SELECT replica, result, coalesce(reason, '') FROM rule_set_acks WHERE trial = %s",
                                [trial]).fetchall()
        answered = {replica: Answer(replica, result, reason) for replica, result, reason in rows}
        waiting = [r for r in replicas if r not in answered]
        if waiting and time.monotonic() < deadline:
            alive = set(live_replicas(log))
            if any(r in alive for r in waiting):
                time.sleep(poll)
                continue
            waiting = [r for r in waiting if r in alive]  # the others left: nothing to wait for
        return [answered.get(r) or Answer(r, "silent") for r in replicas if r in answered or r in waiting]


def replica_rows(log) -> list[tuple]:
    """(replica, serving, source, detail, seconds since seen) of every replica seen in the last LIVE_SECONDS."""
    with _store(log).reader() as conn:
        return conn.execute("SELECT replica, serving, source, coalesce(detail, ''), "
                            "extract(epoch FROM now() - seen_at)::float FROM replicas WHERE seen_at > now() - "
                            "make_interval(secs => %s) ORDER BY replica", [LIVE_SECONDS]).fetchall()


class Listener:
    """LISTEN on CHANNEL on a connection of its own, in a daemon thread, and keep `replica`'s heartbeat row (with
    what `status()` says it serves) on it. `on_change()` runs in a thread of its own, after each (re)connection,
    on each notification and after each quiet RECHECK_SECONDS; notifications that come while it runs make it run
    once more, so a build of many seconds never holds up the heartbeat. Stopped by `stop()`."""

    def __init__(self, log, replica: str, on_change: Callable[[], None], status: Callable[[], tuple],
                 poll_seconds: float = 0.5, recheck_seconds: float = RECHECK_SECONDS):
        self._url = _store(log).url
        self.replica = replica
        self._recheck = recheck_seconds
        self._scrub = log.safe_url
        self._psycopg = log.psycopg
        self._on_change, self._status = on_change, status
        self._poll = poll_seconds
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kentino-rule-set-listener", daemon=True)
        self._follower = threading.Thread(target=self._follow, name="kentino-rule-set-follower", daemon=True)
        self.connected = threading.Event()  # set while LISTEN is in effect (tests and /readyz wait on it)

    def start(self) -> Listener:
        self._thread.start()
        self._follower.start()
        return self

    def stop(self, seconds: float = 5.0) -> None:
        self._stopping.set()
        self._wake.set()
        self._thread.join(seconds)
        self._follower.join(seconds)

    def changed(self) -> None:
        """Have `on_change()` run (again) soon."""
        self._wake.set()

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
            self._beat(conn)
            self.connected.set()
            self.changed()  # what was published while this replica was not listening
            checked = beat = time.monotonic()
            try:
                while not self._stopping.is_set():
                    heard = any(True for _ in conn.notifies(timeout=self._poll, stop_after=1))
                    # a LISTEN connection a NAT dropped without a word hears nothing ever again: the active set is
                    # read again after each quiet RECHECK_SECONDS, so a replica follows a publish late, never not
                    if heard or time.monotonic() - checked >= self._recheck:
                        self.changed()
                        checked = time.monotonic()
                    if time.monotonic() - beat >= HEARTBEAT_SECONDS:
                        self._beat(conn)
                        beat = time.monotonic()
            finally:
                if self._stopping.is_set() and not conn.broken:
                    conn.execute("DELETE FROM replicas WHERE replica = %s", [self.replica])

    def _beat(self, conn) -> None:
        serving, source, detail = self._status()
        conn.execute("INSERT INTO replicas (replica, serving, source, detail) VALUES (%s, %s, %s, %s) "
                     "ON CONFLICT (replica) DO UPDATE SET seen_at = now(), serving = EXCLUDED.serving, "
                     "source = EXCLUDED.source, detail = EXCLUDED.detail", [self.replica, serving, source, detail])

    def _follow(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait()
            if self._stopping.is_set():
                return
            self._wake.clear()
            try:
                self._on_change()
            except Exception:  # noqa: BLE001 - logged; the next notification tries again
                _log.exception("following the published rule set failed")


@dataclass(frozen=True)
class PublishOutcome:
    """What `publish_to_replicas` did: whether the active set changed, each replica's answer as a line, why the
    set was not activated ("" when it was), the summary of a success, and the active set kept on a refusal."""
    changed: bool
    lines: tuple[str, ...] = ()
    refused: str = ""
    summary: str = ""
    serving: str | None = None


def publish_to_replicas(log, rule_set, by: str, wait_seconds: float) -> PublishOutcome:
    """Store `rule_set`, have every replica alive build it (a trial, waited for `wait_seconds`), and activate it
    only when every one answered `ok`; `wait_seconds` 0 activates it at once, as a trial of no replica."""
    from .published import activate, active_digest, store
    store(log, rule_set, by)
    if active_digest(log) == rule_set.digest:
        return PublishOutcome(False)
    alive = live_replicas(log) if wait_seconds > 0 else []
    if not alive:
        changed = activate(log, rule_set.digest, by)
        said = "replicas switch to it now (not waiting for them)" if wait_seconds == 0 else \
            "no replica is running; each builds it when it starts"
        return PublishOutcome(changed, summary=said)
    answers = await_answers(log, request_trial(log, rule_set.digest, by), alive, wait_seconds)
    lines = tuple(_answer_line(a, wait_seconds) for a in answers)
    failed = [a for a in answers if a.result != "ok"]
    if failed or not answers:
        why = f"{len(failed)} of {len(answers)} replicas did not build it" if answers else "every replica left"
        return PublishOutcome(False, lines, why, serving=active_digest(log))
    changed = activate(log, rule_set.digest, by)
    return PublishOutcome(changed, lines, summary=f"all {len(answers)} replicas built it and switch to it now")


def _answer_line(answer: Answer, seconds: float) -> str:
    if answer.result == "ok":
        return f"replica {answer.replica}: built it"
    if answer.result == "silent":
        return f"replica {answer.replica}: no answer within {seconds:g} s (--wait)"
    return f"replica {answer.replica}: refused: {(answer.reason.splitlines() or [''])[0][:300]}"
