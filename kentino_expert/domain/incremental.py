"""Derivation for what-if probes: a turn's facts derived once, with what each step read and wrote, so that a
probe (the same facts with some set otherwise) recomputes only the steps that read what it changed.

A probe's facts are prepared anew (defaults, catalog, Little's law: derive.prepare, cheap next to the
figures); the facts that differ from the base's are the changed names. Each group of figures
(figures.figure_groups) reads the facts and the figures through mappings that record each name looked up. A
group that read none of the changed names gives what it gave for the turn's facts, so its figures are reused;
a group that did is run again, and the figures it changes are changed names for the groups after it. A group
that walked over every name (iteration, a copy) is always run again.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .catalog import Knowledge
from .derive import Prepared, prepare
from .figures import _checked, figure_groups
from .state import FACT_TYPES
from .workload import Workload


class Writes(dict):
    """A dict that records what is written to it (item and update writes) in `written`; reads stay at dict
    speed. A probe's figures are one: a probe needs what a step changed, not what it read."""

    def __init__(self, data: Mapping = ()):
        super().__init__(data)
        self.written: dict = {}

    # dict's own methods called directly, not through super(): a derivation makes ~100 of these calls
    def __setitem__(self, key, value):
        self.written[key] = value
        dict.__setitem__(self, key, value)

    def update(self, *args, **kwargs):
        added = dict(*args, **kwargs)
        self.written.update(added)
        dict.update(self, added)


class Recorder(Writes):
    """A mapping that records the names looked up (get, [], in) and written; a walk over every name (iteration,
    a copy, len) records that everything was read."""

    def __init__(self, data: Mapping):
        super().__init__(data)
        self.read: set = set()
        self.everything = False

    def get(self, key, default=None):
        self.read.add(key)
        return dict.get(self, key, default)

    def __getitem__(self, key):
        self.read.add(key)
        return dict.__getitem__(self, key)

    def __contains__(self, key):
        self.read.add(key)
        return dict.__contains__(self, key)

    def _all(self, method, *args):
        self.everything = True
        return getattr(super(), method)(*args)

    def __iter__(self):
        return self._all("__iter__")

    def keys(self):
        return self._all("keys")

    def items(self):
        return self._all("items")

    def values(self):
        return self._all("values")

    def copy(self):
        return self._all("copy")

    def __len__(self):
        return self._all("__len__")


@dataclass(frozen=True)
class Step:
    """One group of figures as it ran for the turn's facts: what it read and what it wrote (unrounded)."""

    reads: frozenset | None  # facts and figures looked up; None: it walked over every name
    wrote: dict


@dataclass(frozen=True)
class Derivation:
    """The turn's facts derived, with what each step read: the base every probe of the turn starts from."""

    facts: dict  # after defaults, the catalog and Little's law
    steps: tuple  # Step per figure group, in order
    groups: tuple  # the figure groups themselves (figures.figure_groups), bound to this model, card and link
    state: dict  # facts + checked figures: the state the rules start from
    entries: tuple  # the catalog's (model, card, link) the groups are bound to


def derive_recorded(workload: Workload, knowledge: Knowledge, policies: Mapping, parameters: Mapping) -> Derivation:
    """Derive `workload`'s facts (as derive.derive_state does), recording what each figure group read."""
    ready = prepare(workload, knowledge, policies, parameters)
    facts = ready.facts
    groups = figure_groups(facts, ready.model, ready.gpu, ready.link, knowledge, parameters)
    values, steps = {}, []
    for group in groups:
        steps.append(_run(group, values, facts))
    state = {**facts, **{name: _checked(name, value) for name, value in values.items()}}
    return Derivation(facts, tuple(steps), tuple(groups), state, (ready.model, ready.gpu, ready.link))


def _run(group, values: dict, facts: dict) -> Step:
    seen_facts, seen_values = Recorder(facts), Recorder(values)
    group(seen_values, seen_facts)
    values.update(seen_values.written)
    everything = seen_facts.everything or seen_values.everything
    return Step(None if everything else frozenset(seen_facts.read | seen_values.read), dict(seen_values.written))


def probe_state(base: Derivation, ready: Prepared) -> dict | None:
    """The state of a probe (the base's facts with some set otherwise) from its own preparation `ready` (defaults,
    catalog, Little's law: cheap next to the figures), recomputing only the figure groups that read a fact that
    changed or a figure a recomputed group changed; None when the probe needs groups bound otherwise (another
    model, card, link or node shape) or changes a fact that is not one plain value."""
    facts = ready.facts
    if (ready.model, ready.gpu, ready.link) != base.entries or facts.get("gpus_per_node") != base.facts.get(
            "gpus_per_node"):
        return None
    moved = [name for name in facts.keys() | base.facts.keys()
             if facts.get(name, _ABSENT) != base.facts.get(name, _ABSENT)]
    if any(name not in _PLAIN_FACTS or isinstance(facts.get(name), (dict, list)) for name in moved):
        return None
    changed, values = set(moved), Writes()
    for group, step in zip(base.groups, base.steps, strict=True):
        before = step.wrote
        if step.reads is not None and step.reads.isdisjoint(changed):
            dict.update(values, before)
            continue
        values.written = wrote = {}
        group(values, facts)
        changed.update([name for name, value in wrote.items() if before.get(name, _ABSENT) != value])
        if wrote.keys() != before.keys():  # a name the base wrote is not written now
            changed.update(before.keys() - wrote.keys())
    state = dict(base.state)  # the base's facts and checked figures, with only what the probe changed redone
    for name in changed:
        if name in facts:
            state[name] = facts[name]
        elif name in values:
            state[name] = _checked(name, values[name])
        else:
            state.pop(name, None)
    return state


_ABSENT = object()
_PLAIN_FACTS = frozenset(FACT_TYPES)  # what a probe may set without deriving anew (nested facts are not)
