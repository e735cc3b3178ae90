"""A deadline on a PostgreSQL connection's work: past it the connection's socket is shut down, so a server that keeps
its socket open but never answers (a frozen process, a host stalled on its disk) fails the request instead of
holding it, and every decision queued behind it, for as long as the server stays silent."""
from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time


class Watchdog:
    """One thread per log that shuts down the socket of each connection still armed past its deadline.

    The server cancels a slow statement itself (statement_timeout) and says so; a silent server cannot, and
    TCP cannot tell it from a busy one (its kernel still acknowledges every packet), so only the client's own
    clock can end the wait. Shutting the socket down wakes libpq's blocked read with an end of file: psycopg
    raises OperationalError, the connection is broken and the pool replaces it."""

    def __init__(self):
        self._cond = threading.Condition()
        self._armed: dict[int, object] = {}  # token -> connection, while its work runs
        self._heap: list[tuple[float, int]] = []  # (deadline, token); disarmed tokens are dropped when met
        self._tokens = itertools.count()
        self._severed: set[int] = set()
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, conn, seconds: float) -> int:
        """Watch `conn` for `seconds` from now; the token disarms it."""
        with self._cond:
            token = next(self._tokens)
            self._armed[token] = conn
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="kentino-log-watchdog", daemon=True)
                self._thread.start()
            elif self._heap[0][1] == token:  # the earliest deadline now: the thread must wake for it
                self._cond.notify()
        return token

    def disarm(self, token: int) -> bool:
        """Stop watching; True when the deadline had passed and the connection was shut down."""
        with self._cond:
            self._armed.pop(token, None)
            if token in self._severed:
                self._severed.discard(token)
                return True
            return False

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                while self._heap and self._heap[0][1] not in self._armed:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, token = self._heap[0]
                left = deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)
                self._severed.add(token)
                sever(self._armed.pop(token))


def sever(conn) -> None:
    """Shut down `conn`'s socket (a duplicate of its descriptor: libpq still owns and closes the original)."""
    # a connection already closed has no socket left to shut
    with contextlib.suppress(Exception), socket.socket(fileno=os.dup(conn.pgconn.socket)) as duplicate:
        duplicate.shutdown(socket.SHUT_RDWR)
