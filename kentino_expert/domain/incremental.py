"""Derivation for what-if probes: a turn's facts derived once, with what each step read and wrote, so that a
probe (the same facts with one fact set) recomputes only the steps that read what it changed.

Every step (the defaults, the catalog lookup, each group of figures: figures.figure_groups) reads the facts
and the figures through mappings that record each name looked up. A step that read none of the names a probe
changed gives what it gave for the turn's facts, so its figures are reused; a step that did is run again,
and the figures it changes are changed names for the steps after it. A step that walked over every name
(iteration, a copy) is always run again.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..lang import nodes
from .catalog import Knowledge
from .derive import prepare
from .figures import _checked, figure_groups
from .state import FACT_TYPES, flatten_facts
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

    given: dict  # the facts as the rules see them, before defaults
    facts: dict  # after defaults and the catalog
    steps: tuple  # Step per figure group, in order
    groups: tuple  # the figure groups themselves (figures.figure_groups), bound to this model, card and link
    state: dict  # facts + checked figures: the state the rules start from
    fixed: frozenset | None  # facts a probe may not change without deriving anew (defaults' and catalog's reads)


def default_reads(policies: Mapping) -> frozenset:
    """The facts the conditions of the facts' defaults read (a probe of one is derived anew)."""
    names = set()
    for policy in policies.values():
        for default in policy.defaults:
            if default.when is not None:
                names.update(node.id for node in nodes.names_in(default.when.node))
    return frozenset(names)


def derive_recorded(workload: Workload, knowledge: Knowledge, policies: Mapping, parameters: Mapping,
                    defaults_read: frozenset | None = None) -> Derivation:
    """Derive `workload`'s facts (as derive.derive_state does), recording what each step read; `defaults_read`
    is default_reads(policies) when the caller keeps it."""
    recorded = []

    def lookup(facts):
        recorded.append(Recorder(facts))
        return recorded[0]

    ready = prepare(workload, knowledge, policies, parameters, lookup)
    catalog, facts = recorded[0], ready.facts  # what the catalog and Little's law read is fixed: derived anew
    groups = figure_groups(facts, ready.model, ready.gpu, ready.link, knowledge, parameters)
    values, steps = {}, []
    for group in groups:
        steps.append(_run(group, values, facts))
    state = {**facts, **{name: _checked(name, value) for name, value in values.items()}}
    fixed = None
    if not catalog.everything:  # figure_groups reads the node shape itself
        read = default_reads(policies) if defaults_read is None else defaults_read
        fixed = frozenset(catalog.read) | read | {"gpus_per_node"}
    return Derivation(flatten_facts(workload.known()), facts, tuple(steps), tuple(groups), state, fixed)


def _run(group, values: dict, facts: dict) -> Step:
    seen_facts, seen_values = Recorder(facts), Recorder(values)
    group(seen_values, seen_facts)
    values.update(seen_values.written)
    everything = seen_facts.everything or seen_values.everything
    return Step(None if everything else frozenset(seen_facts.read | seen_values.read), dict(seen_values.written))


def probe_state(base: Derivation, fact: str, value) -> dict | None:
    """The state of the base's facts with `fact` set to `value` (as validated), recomputing only the figure
    groups that read a changed name; None when the probe changes what only a new derivation can redo (a fact
    the defaults or the catalog read, the node shape) or is not one plain fact."""
    if base.fixed is None or fact in base.fixed or isinstance(value, (dict, list)) or fact not in _PLAIN_FACTS:
        return None
    facts = {**base.facts, fact: value}
    changed, values = {fact}, Writes()
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
    state[fact] = value
    for name in changed - {fact}:
        if name in values:
            state[name] = _checked(name, values[name])
        else:
            state.pop(name, None)
    return state


_ABSENT = object()
_PLAIN_FACTS = frozenset(FACT_TYPES)  # what a probe may set without deriving anew (nested facts are not)
