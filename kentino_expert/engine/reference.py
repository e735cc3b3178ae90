"""The reference evaluator: the same compiled rules, the same semantics, in plain Python (the test oracle)."""
from __future__ import annotations

from ..errors import EngineError
from ..lang.semantics import truth_of
from .backend import MAX_STEPS, Apply, ShapeProblem


class ReferenceEngine:
    """Fires, again and again, the first rule (by order) whose conditions hold, until none does."""

    name = "reference"
    version = "kentino-expert/0.1 reference"
    reserved_names: tuple[str, ...] = ()  # the state is a plain dict: every name is the rules'

    def __init__(self, ruleset):
        self.ruleset = ruleset

    @classmethod
    def shape_problems(cls, rules) -> list[ShapeProblem]:
        return []  # every condition the language allows has a meaning here

    def close(self) -> None:
        pass

    def run(self, state: dict, apply: Apply, max_steps: int = MAX_STEPS) -> tuple[list[str], dict]:
        fired = []
        for _ in range(max_steps):
            rule = next((r for r in self.ruleset.rules if all(truth_of(c, state) for c in r.conditions)), None)
            if rule is None:
                return fired, state
            state = {**state, **apply(rule, state)}
            fired.append(rule.id)
        raise EngineError(f"no quiescence after {max_steps} firings")
