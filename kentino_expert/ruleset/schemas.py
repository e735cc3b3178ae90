"""JSON Schemas for editors and tools: the rule files and the input facts."""
from __future__ import annotations

from ..domain.vocabulary import KINDS, PRECISIONS, TASKS
from ..domain.workload import Workload
from .policies import DEFAULT_KEYS, DEFAULT_REQUIRED, FACT_KEYS, FACT_REQUIRED, PARAMETER_KEYS, PARAMETER_REQUIRED
from .prices import LINE_KEYS, PRICES_KEYS
from .rulefile import (
    KEBAB,
    MAX_PRIORITY,
    RECOMMEND_KEYS,
    RECOMMEND_REQUIRED,
    RULE_KEYS,
    RULE_REQUIRED,
    SNAKE,
    THEN_KEYS,
    WARN_KEYS,
)
from .selection import CRITERIA, KIND_CLASSES, SELECTION_KEYS, WORKS_KEYS

# What each key of the reader's tables holds, in JSON Schema: the reader's own checks of each (rulefile.py,
# policies.py). A key added to a table without a kind here fails to generate: the two stay in step.
_TEXT = {"type": "string"}
_OPTIONAL_TEXT = {"type": ["string", "null"]}  # the reader takes an empty optional text as none given
_CONDITION = {"type": ["string", "boolean"], "description": "an expression of the rule language"}
_IDS = {"oneOf": [_TEXT, {"type": "array", "items": _TEXT}]}  # one id alone is taken too
_NUMBER_OR_EXPRESSION = {"oneOf": [{"type": "number"}, {**_TEXT, "description": "an expression of the rule language"}]}


def _object(keys, required, kinds: dict, **extra) -> dict:
    """A mapping of exactly the reader's `keys`, its `required` ones required."""
    return {"type": "object", "additionalProperties": False, "properties": {key: kinds[key] for key in keys},
            "required": list(required), **extra}


def _then() -> dict:
    recommend = {key: _NUMBER_OR_EXPRESSION for key in RECOMMEND_KEYS}
    # a precision, or the name of a figure that holds one (four_bit_precision): the compiler checks its values
    precision = {"oneOf": [{"enum": list(PRECISIONS)},
                           {**_TEXT, "pattern": "^[a-z][a-z0-9]*(_[a-z0-9]+)+$",
                            "description": "a figure whose values are precisions"}]}
    recommend.update(kind={"enum": list(KINDS)}, precision=precision)
    plain = {"type": ["boolean", "number", "string"]}
    kinds = {
        "conclude": {"type": "object", "minProperties": 1, "propertyNames": {"pattern": SNAKE},
                     "additionalProperties": plain},
        "recommend": _object(RECOMMEND_KEYS, RECOMMEND_REQUIRED, recommend),
        "warn": _object(WARN_KEYS, WARN_KEYS, {"code": {**_TEXT, "pattern": KEBAB}, "message": _TEXT}),
    }
    return _object(THEN_KEYS, (), kinds, minProperties=1)


def _rule_schema() -> dict:
    kinds = {
        "id": {**_TEXT, "pattern": KEBAB},
        "heuristics": {"oneOf": [_TEXT, {"type": "array", "items": _TEXT, "minItems": 1}]},
        "description": _OPTIONAL_TEXT, "because": _TEXT,
        "priority": {"type": "number", "minimum": -MAX_PRIORITY, "maximum": MAX_PRIORITY},
        "when": {"oneOf": [_CONDITION, {"type": "array", "items": _CONDITION, "minItems": 1}]},
        "then": _then(),
        "example": {"type": ["object", "null"], "description": "facts that fire the rule (the facts schema)"},
    }
    return _object(RULE_KEYS, RULE_REQUIRED, kinds)


def _parameter_schema() -> dict:
    kinds = {"value": {"type": "number"}, "unit": _OPTIONAL_TEXT, "heuristics": _IDS, "description": _OPTIONAL_TEXT}
    return {"oneOf": [{"type": "number", "description": "the value alone (`name: 0.70`)"},
                      _object(PARAMETER_KEYS, PARAMETER_REQUIRED, kinds)]}


def _fact_schema() -> dict:
    default = _object(DEFAULT_KEYS, DEFAULT_REQUIRED, {"when": _CONDITION, "value": {}, "why": _OPTIONAL_TEXT})
    task = {"enum": list(TASKS)}
    tasks = {"oneOf": [task, {"type": "array", "items": task}]}  # one task alone is taken too
    kinds = {"description": _TEXT, "ask": _TEXT, "tasks": tasks, "answered_by": _IDS,
             "default": {"type": "array", "items": default}}
    return _object(FACT_KEYS, FACT_REQUIRED, kinds)


def _selection_schema() -> dict:
    names = {"type": "array", "items": _TEXT}
    works = _object(WORKS_KEYS, ("id", "when", "figure", "says"),
                    {"id": _TEXT, "heuristics": _IDS, "when": _CONDITION, "figure": _TEXT, "says": _TEXT})
    precisions = {"type": "object", "additionalProperties": False,
                  "properties": {task: {"type": "array", "items": {"enum": list(PRECISIONS)}} for task in TASKS}}
    kinds = {"order": {"type": "array", "items": {"enum": list(CRITERIA)}},
             "kinds": {"type": "array", "items": {"enum": list(KIND_CLASSES)}},
             "cards": names, "precisions": precisions, "works": {"type": "array", "items": works}, "shown": names}
    return _object(SELECTION_KEYS, ("order", "kinds", "cards"), kinds)


def _prices_schema() -> dict:
    positive = {"type": "number", "exclusiveMinimum": 0}
    line = _object(LINE_KEYS, ("part", "price", "source"),
                   {"part": _TEXT, "price": positive, "currency": {**_TEXT, "pattern": "^[A-Z]{3}$"},
                    "source": _TEXT, "public_estimate": {"type": "boolean"}})
    kinds = {"currency": {**_TEXT, "pattern": "^[A-Z]{3}$"},
             "date": {**_TEXT, "format": "date", "description": "the day the prices were read (2026-12-01)"},
             "max_age_days": {"type": "integer", "minimum": 1}, "amortization_years": positive,
             "energy_price_per_kwh": positive, "lines": {"type": "array", "items": line}}
    return _object(PRICES_KEYS, PRICES_KEYS, kinds)


def rules_schema() -> dict:
    """One schema for every file of rules/: a rules list, the parameters, the facts policy, the build search's
    selection policy, or the price list (one of the five top-level keys; the schema cannot tell which file it is
    in, `rules check` can)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Kentino Expert rule file",
        "description": "Generated from the rule reader's own tables (kentino-expert schema rules).",
        "type": "object", "additionalProperties": False, "minProperties": 1, "maxProperties": 1,
        "properties": {"rules": {"type": "array", "items": _rule_schema()},
                       "parameters": {"type": "object", "additionalProperties": _parameter_schema()},
                       "facts": {"type": "object", "additionalProperties": _fact_schema()},
                       "selection": _selection_schema(), "prices": _prices_schema()},
    }


def facts_schema(ruleset=None, knowledge=None) -> dict:
    """The input contract as JSON Schema, with the question to ask for each fact (`x-ask`).

    With a knowledge catalog, `model`, `gpu`, `interconnect` and `proposed_build.gpu` list the
    catalog's ids and aliases (`enum`): an editor or an LLM tool then offers names that resolve (the lookup
    also takes a name as people write it, "Llama 3.1 70B", which a bot need not offer).
    """
    schema = Workload.model_json_schema()
    schema["title"] = "Kentino Expert workload facts"
    if ruleset is not None:
        for name, prop in schema.get("properties", {}).items():
            policy = ruleset.fact_policies.get(name)
            if policy:
                prop.setdefault("description", policy.description)
                prop["x-ask"] = policy.ask
    if knowledge is not None:
        _catalog_enums(schema, knowledge)
    return schema


def _names(table: dict) -> list[str]:
    return sorted({*table, *(alias for spec in table.values() for alias in spec.aliases)})


def _catalog_enums(schema: dict, knowledge) -> None:
    links = {k: v for k, v in knowledge.links.items() if v.scope == "inter-node"}
    choices = {"model": _names(knowledge.models), "gpu": _names(knowledge.gpus), "interconnect": _names(links)}
    targets = [(schema.get("properties", {}), name) for name in choices]
    build = schema.get("$defs", {}).get("ProposedBuild", {}).get("properties", {})
    targets.append((build, "gpu"))
    for properties, name in targets:
        for option in properties.get(name, {}).get("anyOf", [properties.get(name, {})]):
            if option.get("type") == "string":
                option["enum"] = choices[name]
