"""The facts schema as the service shows it: JSON Schema, an LLM tool definition, the body of POST /v1/recommend
and the input of the MCP tool `recommend` (the facts plus session_id, turn and view, which are not facts); and
what `recommend` returns, from the models POST /v1/recommend declares in the OpenAPI document."""
from __future__ import annotations

import copy
import functools

from pydantic import TypeAdapter

from ..decisions.meta import MAX_SESSION_ID, MAX_TURN, NOT_TEXT
from ..ruleset.schemas import facts_schema
from .answer_size import kb_range
from .compact import MAX_COMPACT_BYTES, VIEWS, CompactDecision
from .decide import Decision

META_KEYS = ("session_id", "turn", "view")  # taken out of a request before its facts are validated


def facts_of(request: dict) -> dict:
    """A request's facts: everything but the conversation's keys (META_KEYS)."""
    return {k: v for k, v in request.items() if k not in META_KEYS}
TOOL_NAME = "kentino_recommend"
TOOL_DESCRIPTION = (
    "Recommend a GPU-server build (one node, INT4 on one node, data-parallel replicas, a multi-node "
    "InfiniBand cluster, or frontier-scale) for an AI workload, with the reasons, the rules that fired, "
    "and the questions still worth asking. Only `task` is required; give every other fact you know.")


def inline_refs(schema: dict) -> dict:
    """The schema with every local $ref replaced by its definition (LLM tool formats want no $defs)."""
    schema = copy.deepcopy(schema)
    defs = schema.pop("$defs", {})

    def walk(node, depth=0):
        if depth > 20:
            return node
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs:
                merged = {**walk(copy.deepcopy(defs[ref[8:]]), depth + 1),
                          **{k: walk(v, depth + 1) for k, v in node.items() if k != "$ref"}}
                return merged
            return {k: walk(v, depth + 1) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, depth + 1) for v in node]
        return node

    return walk(schema)


def facts_schema_for(ruleset, knowledge=None) -> dict:
    """JSON Schema of the facts, each property with its description, the question to ask (`x-ask`)
    and, given the knowledge catalog, the catalog names it accepts."""
    schema = facts_schema(ruleset, knowledge)
    schema["description"] = "Workload facts for Kentino Expert; only `task` is required."
    build = schema.get("$defs", {}).get("ProposedBuild")
    policy = ruleset.fact_policies.get("proposed_build")
    if build is not None and policy is not None:
        schema["properties"]["proposed_build"].setdefault("description", policy.description)
    return schema


def tool_definition(ruleset, knowledge=None) -> dict:
    """The facts schema as an LLM tool/function definition (no $defs, no $schema)."""
    schema = inline_refs(facts_schema_for(ruleset, knowledge))
    schema.pop("title", None)
    schema.pop("$schema", None)
    return {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": schema}


# what check_session_id takes: 1-200 characters with no control character, or an integer of 1-200 characters. The
# integers' bounds (and the turn's) are written as numbers a 64-bit float holds with room to spare: tools compare
# JSON numbers as floats, and read 2**63-1 as 2**63 (a turn above the limit would pass for one below it)
SESSION_ID_PATTERN = rf"^[^{NOT_TEXT}]{{1,{MAX_SESSION_ID}}}$"
SESSION_ID_SCHEMA = {"anyOf": [{"type": "string", "minLength": 1, "maxLength": MAX_SESSION_ID,
                                "pattern": SESSION_ID_PATTERN},
                               {"type": "integer", "minimum": -(10 ** (MAX_SESSION_ID - 2)),
                                "maximum": 10 ** (MAX_SESSION_ID - 1)},
                               {"type": "null"}],
                     "description": "Conversation id: ties the decisions of one conversation together in the log "
                                    "(1-200 characters, no control characters; null: none). Not a fact."}
FLOAT_EXACT_MAX_TURN = MAX_TURN - 1023  # 2**63 - 1024: the largest 64-bit float below 2**63
TURN_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 0, "maximum": FLOAT_EXACT_MAX_TURN}, {"type": "null"}],
               "description": "Turn of the conversation (null: none). Not a fact."}


def view_schema(sizes=None) -> dict:
    """The `view` key, its sizes measured on real answers (answer_size.Sizes; None: no sizes given)."""
    full = compact_size = ""
    if sizes is not None:
        full = f" ({kb_range(sizes.full)} in the answers to {sizes.answers} of this rule set's examples)"
        compact_size = f" ({kb_range(sizes.compact)} in those answers)"
    return {"type": "string", "enum": list(VIEWS), "default": "full",
            "description": f"'full' (default): the whole answer{full}. 'compact': status, recommendation, the first "
                           f"questions, warning codes and alternatives in at most {MAX_COMPACT_BYTES} bytes"
                           f"{compact_size}; the full answer stays in the log under decision_id. Not a fact."}


def request_schema(ruleset, knowledge=None, sizes=None) -> dict:
    """The body of POST /v1/recommend and the input of the MCP tool `recommend`: the facts schema (inlined, with
    each fact's description, question and accepted names) plus the conversation keys and the view (with the sizes of
    answer_size.served_sizes, when given)."""
    schema = inline_refs(facts_schema_for(ruleset, knowledge))
    schema.pop("$schema", None)
    schema.pop("title", None)
    schema["description"] = ("Workload facts (only `task` is required; give every other fact known), plus "
                             "session_id, turn and view, which are not facts.")
    schema["properties"].update(session_id=SESSION_ID_SCHEMA, turn=TURN_SCHEMA, view=view_schema(sizes))
    return schema


@functools.cache
def recommend_output_schema() -> dict:
    """The structured result of the MCP tool `recommend` as its outputSchema: the decision or its compact view, from
    the pydantic models (decide.Decision, compact.CompactDecision) POST /v1/recommend declares as its response in
    the OpenAPI document; `$ref`s point into its own `$defs`, and the root is an object, as MCP asks."""
    schema = TypeAdapter(Decision | CompactDecision).json_schema(mode="serialization")
    return {"type": "object", "description": "The decision (or, with view 'compact', its compact view).", **schema}
