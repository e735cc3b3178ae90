"""Running a compiled rule set on derived facts: effects of a firing, and the record of what fired."""
from __future__ import annotations

import functools
import string
from collections import ChainMap
from dataclasses import dataclass

from ..lang.semantics import MISSING, value_of
from ..ruleset.namespace import recommendation_key, warning_key


@dataclass(frozen=True)
class Firing:
    """One rule firing: what it read, what it added, and why, in words."""

    rule: object  # CompiledRule
    matched: dict
    added: dict
    because: str


class _Formatter(string.Formatter):
    def __init__(self, env):
        super().__init__()
        self.env = env

    def get_value(self, key, args, kwargs):
        return self.env.get(key, MISSING)

    def format_field(self, value, format_spec):
        if value is MISSING:
            return "?"
        try:
            return format(value, format_spec)
        except (ValueError, TypeError):
            return str(value)


def render(template: str, env: dict) -> str:
    """Fill `{name:spec}` fields from env; unknown values print as '?'."""
    return render_layers(template, (env,))


def render_layers(template: str, layers: tuple) -> str:
    """`render` with the values looked up in `layers`, the first that has a name winning (no merged copy)."""
    parts = _compiled(template)
    if parts is None:
        env = {}
        for layer in reversed(layers):
            env.update(layer)
        try:
            return _Formatter(env).format(template)
        except (ValueError, IndexError, KeyError, AttributeError, TypeError):
            return template
    out = []
    for literal, name, spec in parts:
        out.append(literal)
        if name is not None:
            value = MISSING
            for layer in layers:
                if name in layer:
                    value = layer[name]
                    break
            if value is MISSING:
                out.append("?")
                continue
            try:
                out.append(format(value, spec))
            except (ValueError, TypeError):
                out.append(str(value))
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def _compiled(template: str):
    """(literal, name, spec) parts of a template of plain `{name:spec}` fields, else None.

    Templates are few and rendered on every firing: parsing each once took a third of a request.
    Anything unusual (a conversion, an index, a nested spec) goes to the general formatter.
    """
    parts = []
    try:
        for literal, name, spec, conversion in string.Formatter().parse(template):
            if name is not None and (conversion or not name.isidentifier() or "{" in (spec or "")):
                return None
            parts.append((literal, name, spec or ""))
    except ValueError:
        return None
    return tuple(parts)


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
