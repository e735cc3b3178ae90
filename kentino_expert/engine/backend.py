"""What a backend is: it runs a compiled rule set, says which version answered, which names it reserves
for itself, and which rule shapes it cannot run (checked before it is built: `rules check`, E201-E205)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol

MAX_STEPS = 100_000  # firings of one evaluation at most: a rule set that never settles is an EngineError

# apply(rule, state) -> the properties a firing of `rule` adds to `state` (chaining.py)
Apply = Callable[[object, dict], dict]


@dataclass(frozen=True)
class ShapeProblem:
    """A rule a backend would refuse: which condition (index into `rule.conditions`, None for the whole
    rule) and the offset in it, so `rules check` can point at the culprit's column; `code` says which
    limit (ruleset/diagnostics.py)."""

    rule: object
    message: str
    condition: int | None = None
    pos: int = 0
    code: str = "E201"


class Backend(Protocol):
    """One engine a compiled rule set runs on, built for that rule set (`backend_class(name)(ruleset)`)."""

    name: ClassVar[str]  # the registry's key: "durable", "reference"
    version: ClassVar[str]  # what answers name in ruleset.engine
    reserved_names: ClassVar[tuple[str, ...]]  # state properties the backend uses itself: no rule may write them

    @classmethod
    def shape_problems(cls, rules) -> list[ShapeProblem]:
        """Every compiled rule this backend would refuse (or could not run safely), with where."""

    def run(self, state: dict, apply: Apply, max_steps: int = MAX_STEPS) -> tuple[list[str], dict]:
        """Forward-chain from `state`: (the ids of the rules fired in order, the final state)."""

    def close(self) -> None:
        """Release what the backend holds (idempotent)."""
