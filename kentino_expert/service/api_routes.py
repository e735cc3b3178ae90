"""The API's routes for tools, as the OpenAPI document offers them: recommend, the facts schema, the rules, and the
logged decisions (list, one, explained), each with its operation id, description and response model.

The routes return their JSON as built: the models document it (and tests check it against them) without
re-validating rows an older version logged.
"""
from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from ..answer.explain import explain_html, explain_markdown
from ..decisions.log import MAX_HTTP_PAGE
from ..decisions.meta import CURSOR_PATTERN, MAX_SESSION_ID, normalise_time
from ..domain.vocabulary import KINDS, check_kind
from ..errors import DecisionLogError
from .answer_size import served_sizes
from .compact import CompactDecision
from .decide import Decision
from .error_codes import (
    BODY_ENCODED,
    BODY_TOO_LARGE,
    DECISION_NOT_FOUND,
    FACTS_NOT_EVALUABLE,
    INVALID_FACTS,
    INVALID_JSON,
    INVALID_PARAMETER,
    LOG_UNAVAILABLE,
    NOT_JSON,
    UNREADABLE_ROW,
    error_response,
    responses_for,
)
from .http_io import BadRequest, check_encoding, decide_off_loop, read_limited
from .responses import DecisionListing, LoggedDecision, RuleListing, ToolDefinition
from .tool_schema import SESSION_ID_PATTERN, facts_schema_for, request_schema, tool_definition
from .ui import NOSNIFF, SECURITY_HEADERS

JSON_SCHEMA_DOC = {"type": "object", "description": "A JSON Schema (2020-12) of the facts: each property with its "
                                                    "description, `x-ask` and the catalog names it accepts."}


class MarkdownResponse(PlainTextResponse):
    media_type = "text/markdown"


def _json(value) -> JSONResponse:
    """JSON as built (not re-validated: a row an older version logged must not become a 500)."""
    return JSONResponse(value)


# what the server takes, said exactly, so that the document allows nothing it refuses
SINCE_SCHEMA = {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "format": "date-time"}]}
FactsSchemaFormat = Literal["json-schema", "schema", "json", "tool"]
ExplainFormat = Literal["markdown", "html"]


def add_answer_routes(app, holder, decision_log) -> None:
    """POST /v1/recommend, the facts schema and the rule listing."""
    _add_recommend(app, holder, decision_log)
    _add_schema_and_rules(app, holder)


def _add_recommend(app, holder, decision_log) -> None:
    @app.post("/v1/recommend", operation_id="recommend", tags=["answers"],
              summary="Recommend a build for workload facts (the decision is logged first)",
              description="The body is a JSON object of workload facts (only `task` is required), optionally with "
                          "`session_id`, `turn` and `view`. The answer is the decision: its id in the log, status, "
                          "the questions still worth asking, why not the other kinds, and the answer (recommendation, "
                          "figures, warnings, assumptions, why-trace, rule set). With `view=compact`, the compact "
                          "view instead (at most 2 KB). While the status is provisional, ask the first question and "
                          "send every fact again with its answer added. session_id, turn and view may come in the "
                          "query string instead, each at most once and not also in the body (the document shows "
                          "them in the body only: given in both places they are refused).",
              response_model=Decision | CompactDecision,
              response_description="The decision (or its compact view with view=compact)",
              openapi_extra={"requestBody": {
                  "required": True, "description": "Workload facts, plus session_id, turn and view (not facts).",
                  "content": {"application/json": {"schema": request_schema(
                      holder.expert.ruleset, holder.expert.knowledge, served_sizes(holder.expert))}}}},
              responses=responses_for(BODY_TOO_LARGE, NOT_JSON, BODY_ENCODED, INVALID_JSON, INVALID_FACTS,
                                      INVALID_PARAMETER, FACTS_NOT_EVALUABLE, LOG_UNAVAILABLE))
    async def recommend(request: Request):
        check_encoding(request)
        raw = await read_limited(request)
        # all the CPU work and the commit in one worker thread: the event loop stays free for other
        # requests however long a decision takes (concurrent commits still group)
        body = await decide_off_loop(holder, decision_log, raw, request.query_params)
        return Response(body, media_type="application/json")


def _add_schema_and_rules(app, holder) -> None:
    @app.get("/v1/schema/facts", operation_id="getFactsSchema", tags=["answers"],
             summary="JSON Schema of the facts (format=tool: an LLM tool definition)",
             description="The facts `recommend` takes: each property with its description, the question to ask for "
                         "it (`x-ask`) and the catalog names it accepts. `format=tool` gives it as an LLM tool "
                         "(function) definition: name, description and parameters, without $defs.",
             responses={200: {"description": "The facts schema, or the tool definition", "content": {
                 "application/json": {"schema": {"anyOf": [ToolDefinition.model_json_schema(), JSON_SCHEMA_DOC]}}}},
                 **responses_for(INVALID_PARAMETER)})
    def schema_facts(format: Annotated[FactsSchemaFormat, Query(description="'json-schema' (default; also 'schema' "
                                                                            "or 'json') or 'tool'.")] = "json-schema"):
        expert = holder.current()
        if format == "tool":
            return _json(tool_definition(expert.ruleset, expert.knowledge))
        return _json(facts_schema_for(expert.ruleset, expert.knowledge))

    @app.get("/v1/rules", operation_id="listRules", tags=["rules"], summary="The rules in the order they are tried",
             description="Every rule of the rule set in service, with its heuristics, description, file:line and "
                         "priority, and the rule set's digest (as each answer's ruleset.digest).",
             response_model=RuleListing, response_description="The rules and the digest")
    def rules():
        ruleset = holder.current().ruleset
        return _json({"digest": ruleset.digest, "rules": [
            {"id": r.id, "heuristics": list(r.heuristics), "description": r.description, "file": r.location.file,
             "line": r.location.line, "priority": r.priority} for r in ruleset.rules]})


def add_decision_routes(app, holder, decision_log) -> None:
    """The logged decisions: list, one, explained."""
    _add_listing(app, decision_log)
    _add_decision(app, holder, decision_log)


def _add_listing(app, decision_log) -> None:
    @app.get("/v1/decisions", operation_id="listDecisions", tags=["decisions"],
             summary="Logged decisions, newest first", response_description="One page of decisions",
             description="One page of logged decisions (their columns, not the stored answers), newest first, "
                         "optionally since a time, of one kind or of one conversation. Follow `next_cursor` "
                         "(as `cursor`) until it is null.",
             response_model=DecisionListing, responses=responses_for(INVALID_PARAMETER, LOG_UNAVAILABLE))
    def decisions(since: str = Query(None, description="ISO-8601 date or time (UTC when no zone); "
                                                              "decisions at or after it.",
                                            json_schema_extra=SINCE_SCHEMA),
                  kind: str = Query(None, description="Only decisions recommending this kind.",
                                           json_schema_extra={"enum": list(KINDS)}),
                  session_id: str = Query(None, description="Only the decisions of this conversation.",
                                                 json_schema_extra={"minLength": 1, "maxLength": MAX_SESSION_ID,
                                                                    "pattern": SESSION_ID_PATTERN}),
                  limit: int = Query(100, description=f"Decisions per page, 1 to {MAX_HTTP_PAGE}.",
                                     json_schema_extra={"minimum": 1, "maximum": MAX_HTTP_PAGE}),
                  cursor: str = Query(None, description="The next_cursor of the page before (a cursor of "
                                                               "another form is refused).",
                                             json_schema_extra={"pattern": CURSOR_PATTERN})):
        if not 1 <= limit <= MAX_HTTP_PAGE:
            raise BadRequest(INVALID_PARAMETER, "limit", f"must be between 1 and {MAX_HTTP_PAGE} (follow next_cursor "
                                                         f"for more)")
        check_kind(kind)
        if since:
            try:  # here, so that a since out of range is the client's 422 and a log failure stays a 503
                normalise_time(since, clamp=True)
            except DecisionLogError as exc:
                raise BadRequest(INVALID_PARAMETER, "since", exc.message) from None
        # a cursor the log did not give, or a session id no decision can have: an InputError, the client's 422
        page = decision_log.page(since=since, kind=kind, limit=limit, cursor=cursor, session_id=session_id)
        return _json({"decisions": [_summary(row) for row in page.decisions], "next_cursor": page.next_cursor})



def _add_decision(app, holder, decision_log) -> None:
    @app.get("/v1/decisions/{decision_id}", operation_id="getDecision", tags=["decisions"],
             summary="One logged decision",
             description="The decision as logged: when, through which edge, the facts as given and the whole answer.",
             response_model=LoggedDecision, response_description="The decision as logged",
             responses=responses_for(DECISION_NOT_FOUND, UNREADABLE_ROW, LOG_UNAVAILABLE))
    def decision(decision_id: str = Path(description="The decision_id of a recommend answer.")):
        row = decision_log.get(decision_id) if len(decision_id) <= 200 else None
        if row is None:
            return error_response(DECISION_NOT_FOUND, "decision_id", f"no decision '{decision_id[:200]}'")
        return _json(row)

    @app.get("/v1/decisions/{decision_id}/explain", operation_id="explainDecision", tags=["decisions"],
             summary="A logged decision explained (markdown or html)",
             description="A report for people: the plan, each rule that fired with the actual values against the "
                         "thresholds and the heuristic in the source document's words, the assumptions, why not "
                         "the other kinds and the rule set.",
             response_class=MarkdownResponse,
             responses={200: {"description": "The report", "content": {
                 "text/markdown": {"schema": {"type": "string"}}, "text/html": {"schema": {"type": "string"}}}},
                 **responses_for(DECISION_NOT_FOUND, INVALID_PARAMETER, UNREADABLE_ROW, LOG_UNAVAILABLE)})
    def decision_explain(decision_id: str = Path(description="The decision_id of a recommend answer."),
                         format: Annotated[ExplainFormat, Query(description="'markdown' (default) or 'html'.")]
                         = "markdown"):
        row = decision_log.get(decision_id) if len(decision_id) <= 200 else None
        if row is None:
            return error_response(DECISION_NOT_FOUND, "decision_id", f"no decision '{decision_id[:200]}'")
        expert = holder.current()
        if format == "html":  # a page a browser may open: no script, no remote resource, no framing (as /ui's)
            return HTMLResponse(explain_html(expert, row), headers=SECURITY_HEADERS)
        return MarkdownResponse(explain_markdown(expert, row), headers=NOSNIFF)


def _summary(row: dict) -> dict:
    """A listed decision: its columns only (the stored answer is not read to list it)."""
    return {k: row[k] for k in ("decision_id", "created_at", "session_id", "turn", "source", "kind", "digest",
                                "status", "summary")}
