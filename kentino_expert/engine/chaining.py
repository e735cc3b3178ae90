"""Forward chaining of a compiled rule set on a backend: the effects of a firing, and the record of what fired.

A backend (backend.py) decides which rule fires next; this module decides what a firing adds.
"""
from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass

from ..domain.state import recommendation_key, warning_key
from ..lang.semantics import MISSING, value_of
from ..lang.templates import render_layers


@dataclass(frozen=True)
class Firing:
    """One rule firing: what it read, what it added, and why, in words."""

    rule: object  # CompiledRule
    matched: dict
    added: dict
    because: str


def effects_of(rule, state: dict, params: dict) -> dict:
    """The properties a firing of `rule` adds to `state`."""
    added = {name: value for name, value in rule.source.then.conclude}
    if rule.recommend:
        env = ChainMap(state, params)  # a view, not a copy: a firing reads only a few names
        for key, value in rule.recommend:
            computed = value_of(value, env) if hasattr(value, "pos") else value
            if computed is not MISSING:
                added[recommendation_key(key)] = _whole(computed)
    if rule.source.then.warn:
        added[warning_key(rule.source.then.warn[0])] = True
    return added


def _whole(value):
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def run_rules(ruleset, state: dict, backend) -> tuple[list[Firing], dict]:
    """Forward-chain `ruleset` on `state` with `backend`; return the firings in order and the final state."""
    params = ruleset.parameter_values
    firings: list[Firing] = []

    def apply(rule, current):
        added = effects_of(rule, current, params)
        matched = {name: current[name] for name in rule.reads if name in current}
        firings.append(Firing(rule, matched, added, render_layers(rule.source.because, (added, current, params))))
        return added

    _, final = backend.run(dict(state), apply)
    return firings, final


def final_state(ruleset, state: dict, backend) -> dict:
    """Forward-chain without recording a trace (what-if probes need only the conclusions)."""
    params = ruleset.parameter_values
    return backend.run(dict(state), lambda rule, current: effects_of(rule, current, params))[1]
