"""Recent decisions of one Expert, keyed by their facts: identical facts are not decided twice.

Chat bots send the same facts again and again (first turns, retries, several bots on one
workload). An Expert never changes once built (a reload builds a new one, with an empty cache), and
deciding is deterministic, so a repeat can reuse the evaluation. It is still a new decision: it
gets its own id and its own committed row in the decision log. The cache is bounded (LRU).
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict

DEFAULT_SIZE = 512  # entries; one is ~30 KB of Python objects, so the cache stays under ~16 MB


class AnswerCache:
    """LRU of `evaluate(facts)` results keyed by the canonical JSON of the facts (size 0: no caching)."""

    def __init__(self, size: int = DEFAULT_SIZE):
        self._size = size
        self._entries: OrderedDict[str, tuple] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, facts: dict, evaluate) -> tuple:
        """evaluate(facts), from the cache when these exact facts were decided recently.

        What `evaluate` returns is shared between callers: they must not mutate it.
        """
        if self._size <= 0:
            return evaluate(facts)
        try:
            key = json.dumps(facts, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError):
            return evaluate(facts)  # not JSON-shaped: validation will say why
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return found
        result = evaluate(facts)  # errors propagate and are not cached
        with self._lock:
            self.misses += 1
            self._entries[key] = result
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return result

    def __len__(self) -> int:
        return len(self._entries)
