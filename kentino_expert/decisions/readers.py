"""A few read connections of the decision log, kept for reuse, so that reading never waits on the write connection.

Each connection is used by one thread at a time. Readers wait for each other (at most `size` read
at once, for at most `wait_seconds`), never for a write; a connection that failed is closed, not
reused, and the next read opens a fresh one.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager

from ..errors import LogUnavailable


class ReaderPool:
    """Up to `size` connections from `connect()`; `usable(conn)` says whether an idle one may be reused."""

    def __init__(self, connect: Callable[[], object], name: str, size: int = 2, wait_seconds: float = 30.0,
                 usable: Callable[[object], bool] = lambda conn: True):
        self._connect = connect
        self._name = name
        self._usable = usable
        self._wait_seconds = wait_seconds
        self._slots = threading.BoundedSemaphore(size)
        self._guard = threading.Lock()
        self._idle: list = []
        self._closed = False

    @contextmanager
    def connection(self):
        """A read connection for the duration of the block."""
        if self._closed:
            raise LogUnavailable(f"decision log {self._name} is closed")
        if not self._slots.acquire(timeout=self._wait_seconds):
            raise LogUnavailable(f"decision log {self._name}: too many reads at once; try again")
        try:
            conn = self._take()
            healthy = False
            try:
                yield conn
                healthy = True
            finally:
                self._give_back(conn, healthy)
        finally:
            self._slots.release()

    def close(self) -> None:
        """Close the idle connections now and the busy ones when their reads end."""
        with self._guard:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _take(self):
        with self._guard:
            while self._idle:
                conn = self._idle.pop()
                if self._usable(conn):
                    return conn
                conn.close()
        return self._connect()

    def _give_back(self, conn, healthy: bool) -> None:
        with self._guard:
            if healthy and not self._closed and self._usable(conn):
                self._idle.append(conn)
                return
        conn.close()
