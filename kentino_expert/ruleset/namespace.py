"""The namespace rules are checked against: facts, figures, conclusions, recommendation fields, parameters."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..domain.figures import FIGURE_SPECS
from ..domain.state import FACT_TYPES, RECOMMENDATION_PREFIX, RECOMMENDATION_TYPES, SEARCH_TYPES, WARNING_PREFIX
from ..lang.valuetypes import NUMBER, conclusion_type


@dataclass(frozen=True)
class Namespace:
    """Every name a condition may use, with its type and where it comes from."""

    types: dict  # name -> type
    origins: dict  # name -> "fact" | "figure" | "search" | "conclusion" | "recommendation" | "parameter"
    catalog: dict = field(default_factory=dict)  # catalog fact -> (ids, {alias: id})

    def type_of(self, name: str):
        return self.types.get(name)

    def names(self):
        return list(self.types)


def reserved_kind(name: str, parameters, engine_names=()) -> str | None:
    """What a name already is, when a rule may not conclude it (None when it is free); `engine_names`
    are the properties the backend that runs the rules uses itself."""
    if name in parameters:
        return "a parameter"
    if name in FACT_TYPES:
        return "a fact"
    if name in FIGURE_SPECS:
        return "a figure"
    if name in SEARCH_TYPES:
        return "a name the build search sets"
    if name in RECOMMENDATION_TYPES or name.startswith(RECOMMENDATION_PREFIX):
        return "a recommendation field"
    if name.startswith(WARNING_PREFIX):
        return f"a warning key ({WARNING_PREFIX}<code> records that a warning was given)"
    if name in engine_names:
        return "a property the engine uses itself"
    return None


def build_namespace(parameters: dict, conclusions: dict, catalog: dict | None = None) -> Namespace:
    """`conclusions` maps each concluded name to the list of literal values rules conclude for it."""
    types, origins = {}, {}
    for source, table in (("fact", FACT_TYPES), ("figure", {k: v[0] for k, v in FIGURE_SPECS.items()}),
                          ("search", SEARCH_TYPES), ("recommendation", RECOMMENDATION_TYPES)):
        for name, kind in table.items():
            types[name], origins[name] = kind, source
    for name, values in conclusions.items():
        types[name], origins[name] = conclusion_type(values), "conclusion"
    for name in parameters:
        types[name], origins[name] = NUMBER, "parameter"
    return Namespace(types, origins, catalog or {})
