"""Bounded caches of one Expert's results: whole decisions keyed by their facts, and the what-ifs.

Chat bots send the same facts again and again (first turns, retries, several bots on one
workload). An Expert never changes once built (a reload builds a new one, with empty caches), and
deciding is deterministic, so a repeat can reuse the evaluation. A repeated decision is still a new
decision: it gets its own id and its own committed row in the decision log.
"""
from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict

DEFAULT_SIZE = 512  # decisions; one is ~30 KB of Python objects, so the cache stays under ~16 MB


def facts_key(facts) -> str | None:
    """The canonical JSON of a mapping of facts (key order does not matter), or None if it is not JSON."""
    try:
        return json.dumps(facts, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None


_PLAIN = frozenset({str, int, type(None)})  # equal only to their own kind among the facts' values
_TAGGED = frozenset({float, bool})  # 1, 1.0 and true are equal in Python, different facts in JSON


def flat_facts_key(facts) -> tuple | str | None:
    """A key of a mapping of facts as `facts_key` tells them apart, cheaper for flat facts (a what-if turn makes
    ~60): one flat tuple of the sorted names and values, a float or a flag followed by its type (never a name or a
    value, so the tuple reads one way only), when every value is a string, a whole number, a finite float or a
    flag; else `facts_key`, None where that is None (a non-finite number). Flat, it is no larger than the JSON."""
    try:
        items = sorted(facts.items())
    except TypeError:  # names of mixed types
        return facts_key(facts)
    key = []
    for name, value in items:
        kind = type(value)
        if type(name) is not str or kind not in _PLAIN and (kind not in _TAGGED or not math.isfinite(value)):
            return facts_key(facts)
        key += (name, value, kind) if kind in _TAGGED else (name, value)
    return tuple(key)


_MISSING = object()  # no entry (a cached value may be anything)


class LruCache:
    """A thread-safe least-recently-used map from hashable keys to computed values (size 0: off)."""

    def __init__(self, size: int):
        self._size = size
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get_or_compute(self, key, compute):
        """The value cached under `key`, else `compute()` (cached unless it raises; a None or
        unhashable key is never cached)."""
        if self._size <= 0 or key is None:
            return compute()
        try:
            found = self._hit(key)
        except TypeError:  # an unhashable value inside the key
            return compute()
        if found is not _MISSING:
            return found
        value = compute()
        with self._lock:
            self.misses += 1
            self._entries[key] = value
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value

    def lookup(self, key):
        """The value cached under `key` (counted a hit, made most recent), or None (counted a miss; a None or
        unhashable key is never cached): get_or_compute for a caller that computes many misses together."""
        if self._size <= 0 or key is None:
            return None
        try:
            found = self._hit(key)
        except TypeError:  # an unhashable value inside the key
            return None
        return None if found is _MISSING else found

    def _hit(self, key):
        """The value under `key` (counted a hit, made most recent), or _MISSING; TypeError for an unhashable key."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key]
        return _MISSING

    def put(self, key, value) -> None:
        """Cache `value` under `key` (counted a miss: it was computed), as get_or_compute does after computing."""
        if self._size <= 0 or key is None:
            return
        try:
            with self._lock:
                self.misses += 1
                self._entries[key] = value
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)
        except TypeError:  # an unhashable value inside the key
            return

    def peek(self, key):
        """The value cached under `key`, or None (no computing, no change of the order)."""
        try:
            with self._lock:
                return self._entries.get(key) if key is not None else None
        except TypeError:  # an unhashable value inside the key
            return None

    def __len__(self) -> int:
        return len(self._entries)


class AnswerCache(LruCache):
    """Whole decisions keyed by their facts."""

    def __init__(self, size: int = DEFAULT_SIZE):
        super().__init__(size)

    def get(self, facts: dict, evaluate) -> tuple:
        """evaluate(facts), from the cache when these exact facts were decided recently.

        What `evaluate` returns is shared between callers: they must not mutate it.
        """
        return self.get_or_compute(facts_key(facts), lambda: evaluate(facts))
