"""The range of every name a rule set's arithmetic reads, for the interval analysis (lang/intervals.py, E206).

Each name has a range: a fact its input bounds (the facts' JSON Schema, widened by the defaults of
facts.yaml), a figure its declared range (checked where figures are computed, so the proof holds at
run time), a conclusion the numbers rules conclude for it, a recommendation field any finite number;
parameters are folded into constants before this runs.
"""
from __future__ import annotations

import functools
import math

from ..domain.figures import FIGURE_MAX, figure_range
from ..domain.state import recommendation_key
from ..domain.workload import MAX_GPUS_PER_NODE, Workload
from ..lang.fold import fold
from ..lang.intervals import ANY_FINITE, EVERYTHING, Interval, Overflow, interval_of
from ..lang.valuetypes import NUMBER
from ..lang.valuetypes import finite_number as _number

SEARCH_COUNTS = frozenset({"named_nodes", "named_gpus_per_node", "closest_nodes", "closest_gpus_per_node",
                           "closest_tp", "closest_pp", "closest_dp", "closest_replicas", "cheaper_nodes",
                           "cheaper_gpus_per_node"})
# prices the build search tells the rules (answer/search.py _price_state): whole, at least 0, at most FIGURE_MAX
SEARCH_PRICES = frozenset({"runner_up_price", "chosen_price", "cheaper_saving"})
# counts within one box: the search drops a closest plan's count above the box bound (answer/search.py)
PER_NODE_COUNTS = frozenset({"named_gpus_per_node", "closest_gpus_per_node", "closest_tp", "cheaper_gpus_per_node"})
_FLATTENED = {"proposed_nodes": ("ProposedBuild", "nodes"),
              "proposed_gpus_per_node": ("ProposedBuild", "gpus_per_node")}


@functools.cache
def _schema():
    return Workload.model_json_schema()


def _numeric_bounds(schema: dict):
    """(lo, hi, integer) of the numeric branch of a property's schema, or None for a non-number."""
    for branch in [schema] + schema.get("anyOf", []):
        if branch.get("type") in ("number", "integer"):
            lo = branch.get("minimum", branch.get("exclusiveMinimum", -math.inf))
            hi = branch.get("maximum", branch.get("exclusiveMaximum", math.inf))
            return float(lo), float(hi), branch["type"] == "integer"
        if "anyOf" in branch and branch is not schema:
            found = _numeric_bounds(branch)
            if found:
                return found
    return None


def fact_range(name: str, policies: dict | None = None) -> Interval | None:
    """A numeric fact's range: its input bounds, widened by the numeric defaults of facts.yaml."""
    schema = _schema()
    if name in _FLATTENED:
        model, field = _FLATTENED[name]
        prop = schema["$defs"][model]["properties"][field]
    else:
        prop = schema["properties"].get(name)
    found = _numeric_bounds(prop) if prop else None
    if found is None:
        return None
    interval = Interval(*found)
    policy = (policies or {}).get(name)
    for default in getattr(policy, "defaults", ()):
        if _number(default.value):
            value = float(default.value)
            interval = interval.hull(Interval(value, value, float(default.value).is_integer()))
    return interval


class Ranges:
    """The range of every name a rule set's arithmetic can read."""

    def __init__(self, namespace, conclusions: dict, policies: dict):
        self.namespace, self.policies = namespace, policies
        self.recommended: dict = {}  # recommendation field -> what the rules recommend for it
        self.concluded = {}
        for name, values in conclusions.items():
            numbers = [float(v) for v in values if _number(v)]
            if numbers and len(numbers) == len(values):
                self.concluded[name] = Interval(min(numbers), max(numbers), all(n.is_integer() for n in numbers))

    def of(self, name: str) -> Interval | None:
        """The name's range, or None when it is not a number (no arithmetic reads it)."""
        if self.namespace.type_of(name) != NUMBER:
            return None
        origin = self.namespace.origins.get(name)
        if origin == "fact":
            return fact_range(name, self.policies) or EVERYTHING
        if origin == "figure":
            return Interval(*figure_range(name))
        if origin == "conclusion":
            return self.concluded.get(name, EVERYTHING)
        if origin == "recommendation":
            return self.recommended.get(name, ANY_FINITE)
        if name in PER_NODE_COUNTS:
            return Interval(1.0, float(MAX_GPUS_PER_NODE), True)
        if name in SEARCH_COUNTS:  # the build search's counts of a plan it weighed: whole, at least one
            return Interval(1.0, FIGURE_MAX, True)
        if name in SEARCH_PRICES:
            return Interval(0.0, FIGURE_MAX, True)
        return EVERYTHING

    def learn_recommendations(self, rules, params: dict) -> None:
        """The range of each numeric recommendation field: the hull of what every rule recommends for
        it (a value that is not proven finite is refused where it is, so it counts as any finite one)."""
        found: dict = {}
        for rule in rules:
            for key, value in rule.then.recommend:
                node = getattr(value, "node", None)
                try:
                    interval = (interval_of(fold(node, params), self) if node is not None
                                else Interval(float(value), float(value), float(value).is_integer())
                                if _number(value) else None)
                except (Overflow, KeyError, TypeError, ValueError, ArithmeticError, RecursionError):
                    interval = ANY_FINITE
                if interval is not None:
                    name = recommendation_key(key)
                    found[name] = found[name].hull(interval) if name in found else interval
        self.recommended = found
