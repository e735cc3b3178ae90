"""JSON Schemas for editors and tools: the rule files and the input facts."""
from __future__ import annotations

from ..domain.vocabulary import KINDS, PRECISIONS, TASKS
from ..domain.workload import Workload
from .rulefile import RECOMMEND_KEYS
from .selection import CRITERIA, KIND_CLASSES

_EXPR = {"type": "string", "description": "an expression of the rule language"}


def _rule_schema() -> dict:
    value = {"oneOf": [{"type": "number"}, _EXPR]}
    recommend = {"type": "object", "additionalProperties": False,
                 "properties": {key: value for key in RECOMMEND_KEYS}, "required": ["kind"]}
    recommend["properties"]["kind"] = {"enum": list(KINDS)}
    recommend["properties"]["precision"] = {"enum": list(PRECISIONS)}
    return {
        "type": "object", "additionalProperties": False, "required": ["id", "heuristics", "when", "then"],
        "properties": {
            "id": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
            "heuristics": {"type": "array", "items": {"type": "string", "pattern": "^H-[A-Z0-9-]+$"}},
            "description": {"type": "string"}, "priority": {"type": "number"},
            "when": {"oneOf": [_EXPR, {"type": "array", "items": _EXPR, "minItems": 1}]},
            "then": {"type": "object", "additionalProperties": False, "minProperties": 1, "properties": {
                "conclude": {"type": "object", "additionalProperties": {"type": ["boolean", "number", "string"]}},
                "recommend": recommend,
                "warn": {"type": "object", "additionalProperties": False, "required": ["code", "message"],
                         "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
            "because": {"type": "string"}, "example": {"type": "object"},
        },
    }


def _selection_schema() -> dict:
    names = {"type": "array", "items": {"type": "string"}}
    works = {"type": "object", "additionalProperties": False, "required": ["id", "when", "figure", "says"],
             "properties": {"id": {"type": "string"}, "heuristics": names, "when": _EXPR,
                            "figure": {"type": "string"}, "says": {"type": "string"}}}
    return {"type": "object", "additionalProperties": False, "required": ["order", "kinds", "cards"], "properties": {
        "order": {"type": "array", "items": {"enum": list(CRITERIA)}},
        "kinds": {"type": "array", "items": {"enum": list(KIND_CLASSES)}},
        "cards": names,
        "precisions": {"type": "object", "additionalProperties": False,
                       "properties": {task: {"type": "array", "items": {"enum": list(PRECISIONS)}} for task in TASKS}},
        "works": {"type": "array", "items": works},
        "shown": names}}


def rules_schema() -> dict:
    """One schema for every file of rules/: a rules list, the parameters, the facts policy, or the build
    search's selection policy."""
    parameter = {"type": "object", "additionalProperties": False, "required": ["value"], "properties": {
        "value": {"type": "number"}, "unit": {"type": "string"}, "description": {"type": "string"},
        "heuristics": {"type": "array", "items": {"type": "string"}}}}
    default = {"type": "object", "additionalProperties": False, "required": ["value"],
               "properties": {"when": _EXPR, "value": {}, "why": {"type": "string"}}}
    fact = {"type": "object", "additionalProperties": False, "properties": {
        "description": {"type": "string"}, "ask": {"type": "string"},
        "tasks": {"type": "array", "items": {"type": "string"}},
        "answered_by": {"type": "array", "items": {"type": "string"}},
        "default": {"type": "array", "items": default}}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Kentino Expert rule file",
        "type": "object", "additionalProperties": False,
        "properties": {"rules": {"type": "array", "items": _rule_schema()},
                       "parameters": {"type": "object", "additionalProperties": parameter},
                       "facts": {"type": "object", "additionalProperties": fact},
                       "selection": _selection_schema()},
    }


def facts_schema(ruleset=None, knowledge=None) -> dict:
    """The input contract as JSON Schema, with the question to ask for each fact (`x-ask`).

    With a knowledge catalog, `model`, `gpu`, `interconnect` and `proposed_build.gpu` list the
    catalog's ids and aliases (`enum`): an editor or an LLM tool then offers only names that resolve.
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
