"""The steps of more demand the monotone grids share (tests/test_monotone_grid.py, tests/test_price_grid.py): each a
base of facts, the fact that grows and its values, from less demand to more."""
from __future__ import annotations


def batch_steps(base: dict) -> list[tuple[dict, str, tuple]]:
    """A larger corpus by the same deadline, and the same corpus by a shorter deadline."""
    return [({**base, "deadline_days": 2}, "corpus_tokens", (10**8, 10**9, 10**10, 10**11)),
            ({**base, "corpus_tokens": 10**10}, "deadline_days", (60, 7, 2, 0.5))]


def training_steps(base: dict) -> list[tuple[dict, str, tuple]]:
    """More training tokens by the same deadline, and the same tokens by a shorter deadline."""
    return [({**base, "deadline_days": 30}, "training_tokens", (10**9, 10**11, 10**12, 15 * 10**12)),
            ({**base, "training_tokens": 10**11}, "deadline_days", (365, 30, 7, 1))]


def key(facts: dict) -> tuple:
    """The facts as a key (the same facts, the same key)."""
    return tuple(sorted(facts.items()))
