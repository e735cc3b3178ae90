"""Group commit: rows from concurrent callers share one transaction, so one fsync serves them all.

The first caller to find no write in progress becomes the leader: it takes every row queued so far,
writes them in one transaction and wakes the others. Each caller returns only after the
transaction holding its row has committed (or raises that transaction's error), so a decision is
still acknowledged only once it is durable. A batch that fails is retried row by row, so one bad
row cannot take its neighbours down with it.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

from ..errors import DecisionLogError, LogUnavailable


class _Slot:
    __slots__ = ("row", "done", "error")

    def __init__(self, row):
        self.row, self.done, self.error = row, False, None


class GroupCommit:
    """Commit rows through `write_batch(rows)` (one transaction per call), batching concurrent callers."""

    def __init__(self, write_batch: Callable[[list], None], max_batch: int = 256,
                 on_batch: Callable[[int], None] | None = None):
        self._write_batch = write_batch
        self._on_batch = on_batch  # told the size of each batch tried (the service's metrics)
        self._max_batch = max_batch
        self._ready = threading.Condition()
        self._queue: list[_Slot] = []
        self._writing = False
        self.batches = 0  # transactions committed or tried (rows / batches: how well commits group)
        self.rows = 0

    def commit(self, row) -> None:
        """Return once `row` is committed; raise DecisionLogError if its transaction failed."""
        slot = _Slot(row)
        with self._ready:
            self._queue.append(slot)
            while not slot.done:
                if self._writing:
                    self._ready.wait()
                    continue
                batch, self._queue = self._queue[:self._max_batch], self._queue[self._max_batch:]
                self._writing = True
                self._ready.release()
                try:
                    self._write(batch)
                finally:
                    self._ready.acquire()
                    self._writing = False
                    for each in batch:
                        each.done = True
                    self._ready.notify_all()
        if slot.error is not None:
            raise slot.error

    def _write(self, batch: list[_Slot]) -> None:
        self.batches += 1
        self.rows += len(batch)
        if self._on_batch is not None:
            self._on_batch(len(batch))
        for slot in batch:  # until a commit says otherwise (an interrupted write acknowledges nothing)
            slot.error = DecisionLogError("decision not recorded: the write was interrupted")
        try:
            self._write_batch([slot.row for slot in batch])
        except Exception as exc:  # any error: the driver raises OverflowError etc. for a value it cannot bind
            if len(batch) == 1 or isinstance(exc, LogUnavailable):  # no row on its own would fare better
                for slot in batch:
                    slot.error = _as_log_error(exc)
                return
        else:
            for slot in batch:
                slot.error = None
            return
        for slot in batch:  # which row broke the batch: each alone
            try:
                self._write_batch([slot.row])
                slot.error = None
            except Exception as exc:
                slot.error = _as_log_error(exc)


def _as_log_error(exc: Exception) -> DecisionLogError:
    """What a waiting caller is told: a DecisionLogError, whatever the writer raised."""
    if isinstance(exc, DecisionLogError):
        return exc
    return DecisionLogError(f"decision not recorded: {type(exc).__name__}: {exc}")
