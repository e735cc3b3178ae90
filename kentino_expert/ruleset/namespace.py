"""The namespace rules are checked against: facts, figures, conclusions, recommendation fields, parameters."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..domain.derive import BOOL, FACT_TYPES, FIGURE_SPECS, NUMBER, TEXT
from ..engine.durable.terms import ENGINE_NAMES
from ..domain.workload import PRECISIONS
from .rulefile import KINDS

RECOMMENDATION_TYPES = {
    "recommended_kind": ("enum", KINDS), "recommended_precision": ("enum", PRECISIONS),
    "recommended_nodes": NUMBER, "recommended_replicas": NUMBER, "recommended_tp": NUMBER,
    "recommended_pp": NUMBER, "recommended_dp": NUMBER, "recommended_interconnect": TEXT,
    "recommended_gpu": TEXT, "recommended_gpus_per_node": NUMBER,
}


def warning_key(code: str) -> str:
    """The state property that records a warning was given."""
    return "warn__" + code.replace("-", "_")


def recommendation_key(field: str) -> str:
    return "recommended_" + field


@dataclass(frozen=True)
class Namespace:
    """Every name a condition may use, with its type and where it comes from."""

    types: dict  # name -> type
    origins: dict  # name -> "fact" | "figure" | "conclusion" | "recommendation" | "parameter"
    catalog: dict = field(default_factory=dict)  # catalog fact -> (ids, {alias: id})

    def type_of(self, name: str):
        return self.types.get(name)

    def names(self):
        return list(self.types)


CATALOG_FACTS = {"model": "models", "gpu": "gpus", "proposed_gpu": "gpus", "interconnect": "links"}


def catalog_of(knowledge) -> dict:
    """fact -> (ids, {alias: id}) for the facts that hold a catalog id."""
    out = {}
    for fact, table in CATALOG_FACTS.items():
        specs = getattr(knowledge, table)
        out[fact] = (frozenset(specs), {alias: spec.id for spec in specs.values() for alias in spec.aliases})
    return out


def reserved_kind(name: str, parameters) -> str | None:
    """What a name already is, when a rule may not conclude it (None when it is free)."""
    if name in parameters:
        return "a parameter"
    if name in FACT_TYPES:
        return "a fact"
    if name in FIGURE_SPECS:
        return "a figure"
    if name in RECOMMENDATION_TYPES or name.startswith("recommended_"):
        return "a recommendation field"
    if name.startswith("warn__"):
        return "a warning key (warn__<code> records that a warning was given)"
    if name in ENGINE_NAMES:
        return "a property the engine uses itself"
    return None


def build_namespace(parameters: dict, conclusions: dict, catalog: dict | None = None) -> Namespace:
    """`conclusions` maps each concluded name to the list of literal values rules conclude for it."""
    types, origins = {}, {}
    for source, table in (("fact", FACT_TYPES), ("figure", {k: v[0] for k, v in FIGURE_SPECS.items()}),
                          ("recommendation", RECOMMENDATION_TYPES)):
        for name, kind in table.items():
            types[name], origins[name] = kind, source
    for name, values in conclusions.items():
        types[name], origins[name] = conclusion_type(values), "conclusion"
    for name in parameters:
        types[name], origins[name] = NUMBER, "parameter"
    return Namespace(types, origins, catalog or {})


def conclusion_type(values):
    if all(isinstance(v, bool) for v in values):
        return BOOL
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return NUMBER
    if all(isinstance(v, str) for v in values):
        return ("enum", tuple(sorted(set(values))))
    return "mixed"
