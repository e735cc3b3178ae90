"""JSON Schemas for editors and tools: the rule files and the input facts."""
from __future__ import annotations

from .facts import PRECISIONS, Workload
from .rulefile import KINDS, RECOMMEND_KEYS

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


def rules_schema() -> dict:
    """One schema for every file of rules/: a rules list, the parameters, or the facts policy."""
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
                       "facts": {"type": "object", "additionalProperties": fact}},
    }


def facts_schema(ruleset=None) -> dict:
    """The input contract as JSON Schema, with the question to ask for each fact (`x-ask`)."""
    schema = Workload.model_json_schema()
    schema["title"] = "Kentino Expert workload facts"
    if ruleset is not None:
        for name, prop in schema.get("properties", {}).items():
            policy = ruleset.fact_policies.get(name)
            if policy:
                prop.setdefault("description", policy.description)
                prop["x-ask"] = policy.ask
    return schema
