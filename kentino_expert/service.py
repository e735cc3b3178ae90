"""The HTTP service: FastAPI app factory, served by uvicorn (`kentino-expert serve`).

Every POST /v1/recommend is written to the decision log before its response is sent. The rule set
can be reloaded (POST /v1/admin/reload or SIGHUP): the new Expert is built first and swapped in
atomically only if it loads; a broken rule directory is refused with its diagnostics (409) while the
old rules keep answering. Each request takes one snapshot of the expert, so a decision never mixes
rule-set versions, and it records the digest it actually used. Nothing a client sends produces a 500:
bad input is a 422 whose detail names the field.
"""
from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import signal
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from .errors import DecisionLogError, EngineError, InputError, KentinoError, RuleFileError

log = logging.getLogger("kentino_expert.service")

MAX_BODY = 1_000_000
META_KEYS = ("session_id", "turn")
TOOL_NAME = "kentino_recommend"
TOOL_DESCRIPTION = (
    "Recommend a GPU-server build (one node, INT4 on one node, data-parallel replicas, a multi-node "
    "InfiniBand cluster, or frontier-scale) for an AI workload, with the reasons, the rules that fired, "
    "and the questions still worth asking. Only `task` is required; give every other fact you know.")


class BadRequest(Exception):
    """A client mistake, answered with 422 and the field it concerns."""

    def __init__(self, field: str | None, message: str, status: int = 422):
        super().__init__(message)
        self.field, self.message, self.status = field, message, status


def _detail(field, message, status=422, **extra) -> JSONResponse:
    return JSONResponse({"detail": [{"field": field, "message": message}], **extra}, status_code=status)


def input_error_message(exc: KentinoError) -> str:
    text = exc.message
    if exc.suggestion:
        text += f" (did you mean '{exc.suggestion}'?)"
    return text


# -- the expert, swapped atomically ---------------------------------------------------------------

class ExpertHolder:
    """The expert in service; `reload` builds a new one and swaps it in only when it loads.

    With several worker processes a reload in one worker touches `reload_file`; the others see its
    new mtime on their next request and reload themselves (refusing, as here, a broken rule set).
    """

    def __init__(self, factory, reload_file: str | None = None):
        self.factory = factory
        self._lock = threading.Lock()
        self.reload_file = Path(reload_file) if reload_file else None
        self._seen_mark = self._mark()
        self.expert = factory()
        self.generation = 1
        self.loaded_at = time.time()
        self.last_error: str | None = None

    def _mark(self):
        try:
            return self.reload_file.stat().st_mtime_ns if self.reload_file else None
        except OSError:
            return None

    def current(self):
        """The expert to use for one whole request (a snapshot: later swaps do not affect it)."""
        if self.reload_file is not None:
            mark = self._mark()
            if mark != self._seen_mark:
                self._seen_mark = mark
                try:
                    self.reload(propagate=False)
                except KentinoError as exc:
                    log.error("reload signalled by another worker refused: %s", exc)
        return self.expert

    def reload(self, propagate: bool = True) -> dict:
        """Build a new expert from the same factory; raise its KentinoError and keep the old one if it fails."""
        with self._lock:
            old = self.expert
            try:
                new = self.factory()
            except KentinoError as exc:
                self.last_error = str(exc)
                raise
            self.expert = new  # one reference assignment: atomic for every reader
            self.generation += 1
            self.loaded_at = time.time()
            self.last_error = None
            if propagate and self.reload_file is not None:
                try:
                    self.reload_file.touch()
                    self._seen_mark = self._mark()
                except OSError as exc:
                    log.warning("cannot signal the other workers through %s: %s", self.reload_file, exc)
        # the old expert's engine is closed by its finaliser once the last request using it is done
        return {"reloaded": True, "digest": new.ruleset.digest, "previous_digest": old.ruleset.digest,
                "rules": len(new.ruleset.rules), "generation": self.generation}


def _diagnostics(exc: KentinoError) -> list[dict]:
    if isinstance(exc, RuleFileError):
        return [d.as_dict() for d in exc.diagnostics]
    where = exc.location
    return [{"file": getattr(where, "file", None), "line": getattr(where, "line", 0),
             "column": getattr(where, "column", 0), "code": type(exc).__name__, "severity": "error",
             "message": exc.message, "rule": None, "suggestion": exc.suggestion}]


# -- request parsing --------------------------------------------------------------------------------

def _reject_constant(token):
    raise ValueError(f"{token} is not a number")


def parse_body(raw: bytes):
    """Strict JSON: UTF-8, no NaN/Infinity, no duplicate keys, bounded nesting."""
    if not raw.strip():
        raise BadRequest("facts", "empty body: expected a JSON object of facts such as {\"task\": \"inference\"}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("facts", "the body is not UTF-8 text") from None

    def no_duplicates(pairs):
        out = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"duplicate key '{key}'")
            out[key] = value
        return out

    try:
        return json.loads(text, object_pairs_hook=no_duplicates, parse_constant=_reject_constant)
    except RecursionError:
        raise BadRequest("facts", "the JSON nests too deeply") from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            raise BadRequest("facts", "invalid JSON: a number has more than 4300 digits") from None
        raise BadRequest("facts", f"invalid JSON: {exc}") from None


def split_meta(data, query) -> tuple[dict, str | None, int | None]:
    """(facts, session_id, turn): the meta keys come from the body's top level or the query string."""
    if not isinstance(data, dict):
        kind = "null" if data is None else {list: "an array", str: "a string", bool: "a boolean",
                                            int: "a number", float: "a number"}.get(type(data), type(data).__name__)
        raise BadRequest("facts", f"expected a JSON object of facts, got {kind}")
    facts = {k: v for k, v in data.items() if k not in META_KEYS}
    session_id = data.get("session_id", query.get("session_id"))
    turn = data.get("turn", query.get("turn"))
    if session_id is not None:
        if isinstance(session_id, bool) or not isinstance(session_id, (str, int)):
            raise BadRequest("session_id", "must be a string")
        session_id = str(session_id)
        if not session_id or len(session_id) > 200:
            raise BadRequest("session_id", "must be 1 to 200 characters")
    if turn is not None:
        if isinstance(turn, str) and turn.strip().lstrip("-").isdigit() and len(turn.strip()) < 12:
            turn = int(turn)
        if isinstance(turn, bool) or not isinstance(turn, int):
            raise BadRequest("turn", "must be an integer")
        if not 0 <= turn <= 1_000_000_000:
            raise BadRequest("turn", "must be between 0 and 1000000000")
    return facts, session_id, turn


async def read_limited(request: Request) -> bytes:
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > MAX_BODY:
        raise BadRequest("facts", f"the body is larger than {MAX_BODY} bytes", 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise BadRequest("facts", f"the body is larger than {MAX_BODY} bytes", 413)
        chunks.append(chunk)
    return b"".join(chunks)


# -- schemas ----------------------------------------------------------------------------------------

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


def facts_schema_for(ruleset) -> dict:
    """JSON Schema of the facts, each property with its description and the question to ask (`x-ask`)."""
    from .schemas import facts_schema
    schema = facts_schema(ruleset)
    schema["description"] = "Workload facts for Kentino Expert; only `task` is required."
    build = schema.get("$defs", {}).get("ProposedBuild")
    policy = ruleset.fact_policies.get("proposed_build")
    if build is not None and policy is not None:
        schema["properties"]["proposed_build"].setdefault("description", policy.description)
    return schema


def tool_definition(ruleset) -> dict:
    schema = inline_refs(facts_schema_for(ruleset))
    schema.pop("title", None)
    schema.pop("$schema", None)
    return {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": schema}


def _request_schema() -> dict:
    from .facts import Workload
    schema = inline_refs(Workload.model_json_schema())
    schema["properties"]["session_id"] = {"type": "string", "maxLength": 200,
                                          "description": "Conversation id (stripped before validation)."}
    schema["properties"]["turn"] = {"type": "integer", "minimum": 0,
                                    "description": "Turn of the conversation (stripped before validation)."}
    return schema


# -- the app ----------------------------------------------------------------------------------------

def _default_factory(rules_dir=None, knowledge_dir=None):
    from .api import Expert

    def build():
        return Expert(rules_dir, knowledge_dir)
    return build


def create_app(expert_factory=None, log=None, *, rules_dir=None, knowledge_dir=None, db=None,
               reload_file: str | None = None, admin_token: str | None = None) -> FastAPI:
    """The FastAPI app. `expert_factory()` builds an Expert (at start and on each reload); `log` is a
    DecisionLog (default: DecisionLog.open(db), i.e. KENTINO_DB or ./kentino-decisions.db)."""
    from .decisions import DecisionLog, decide
    factory = expert_factory or _default_factory(rules_dir, knowledge_dir)
    holder = ExpertHolder(factory, reload_file)
    decision_log = log if log is not None else DecisionLog.open(db)
    token = admin_token if admin_token is not None else os.environ.get("KENTINO_ADMIN_TOKEN") or None

    def reload_logged(origin: str):
        try:
            result = holder.reload()
            logging.getLogger("uvicorn.error").info("%s: rules reloaded, digest %s", origin, result["digest"][:16])
        except KentinoError as exc:
            logging.getLogger("uvicorn.error").error("%s: reload refused, still serving %s:\n%s", origin,
                                                     holder.expert.ruleset.digest[:16], exc)

    @asynccontextmanager
    async def lifespan(app):
        loop = asyncio.get_running_loop()
        installed = False
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGHUP"):
            try:
                loop.add_signal_handler(signal.SIGHUP, lambda: loop.run_in_executor(None, reload_logged, "SIGHUP"))
                installed = True
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        try:
            yield
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGHUP)

    app = FastAPI(title="Kentino Expert", version=_version(),
                  description="What GPU server to buy for an AI workload, and why. Every decision is logged.",
                  lifespan=lifespan)
    app.state.holder = holder
    app.state.log = decision_log

    # -- errors: a client never sees a 500 for what it sent
    @app.exception_handler(BadRequest)
    async def _bad_request(request, exc: BadRequest):
        return _detail(exc.field, exc.message, exc.status)

    @app.exception_handler(RequestValidationError)
    async def _validation(request, exc: RequestValidationError):
        items = [{"field": ".".join(str(p) for p in e.get("loc", ()) if p not in ("body", "query", "path")) or None,
                  "message": str(e.get("msg", "invalid"))} for e in exc.errors()]
        return JSONResponse({"detail": items or [{"field": None, "message": "invalid request"}]}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request, exc: StarletteHTTPException):
        return _detail(None, str(exc.detail), exc.status_code)

    @app.exception_handler(InputError)
    async def _input(request, exc: InputError):
        return _detail(exc.field or exc.name or "facts", input_error_message(exc))

    @app.exception_handler(DecisionLogError)
    async def _log_error(request, exc: DecisionLogError):
        return _detail(None, f"the decision could not be recorded, so it is not given: {exc.message}", 503)

    @app.exception_handler(KentinoError)
    async def _kentino(request, exc: KentinoError):
        return _detail("facts", f"these facts cannot be evaluated: {exc.message}")

    @app.exception_handler(Exception)
    async def _unexpected(request, exc: Exception):  # a bug, never the client's doing: logged in full
        logging.getLogger("uvicorn.error").exception("internal error on %s %s", request.method, request.url.path)
        return _detail(None, "internal error (logged on the server)", 500)

    # -- endpoints
    @app.post("/v1/recommend", summary="Recommend a build for workload facts (the decision is logged first)",
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                  "schema": _request_schema()}}}},
              responses={200: {"description": "{decision_id, status, questions, why_not, ...the Answer}"},
                         422: {"description": "{detail: [{field, message}]}"},
                         503: {"description": "the decision log cannot be written"}})
    async def recommend(request: Request):
        data = parse_body(await read_limited(request))
        facts, session_id, turn = split_meta(data, request.query_params)
        expert = holder.current()  # one snapshot for the whole decision
        body = await run_in_threadpool(_decide_checked, decide, expert, decision_log, facts, session_id, turn)
        return JSONResponse(body)

    @app.get("/v1/schema/facts", summary="JSON Schema of the facts (format=tool: an LLM tool definition)")
    def schema_facts(format: str = "json-schema"):
        ruleset = holder.current().ruleset
        if format == "tool":
            return tool_definition(ruleset)
        if format not in ("json-schema", "schema", "json"):
            raise BadRequest("format", "must be 'json-schema' or 'tool'")
        return facts_schema_for(ruleset)

    @app.get("/v1/rules", summary="The rules in the order they are tried")
    def rules():
        ruleset = holder.current().ruleset
        return {"digest": ruleset.digest, "rules": [
            {"id": r.id, "heuristics": list(r.heuristics), "description": r.description, "file": r.location.file,
             "line": r.location.line, "priority": r.priority} for r in ruleset.rules]}

    @app.get("/v1/decisions", summary="Logged decisions, newest first")
    def decisions(since: str | None = None, kind: str | None = None, limit: int = 100):
        if not 1 <= limit <= 1000:
            raise BadRequest("limit", "must be between 1 and 1000")
        try:
            rows = decision_log.list(since=since, kind=kind, limit=limit)
        except DecisionLogError as exc:
            if since and "ISO-8601" in exc.message:
                raise BadRequest("since", exc.message) from None
            raise
        return {"decisions": [_summary(row) for row in rows]}

    @app.get("/v1/decisions/{decision_id}", summary="One logged decision")
    def decision(decision_id: str):
        row = decision_log.get(decision_id) if len(decision_id) <= 200 else None
        if row is None:
            return _detail("decision_id", f"no decision '{decision_id[:200]}'", 404)
        return row

    @app.get("/v1/decisions/{decision_id}/explain", summary="A logged decision explained (markdown or html)")
    def decision_explain(decision_id: str, format: str = "markdown"):
        from .explain import explain_html, explain_markdown
        if format not in ("markdown", "html"):
            raise BadRequest("format", "must be 'markdown' or 'html'")
        row = decision_log.get(decision_id) if len(decision_id) <= 200 else None
        if row is None:
            return _detail("decision_id", f"no decision '{decision_id[:200]}'", 404)
        expert = holder.current()
        if format == "html":
            return HTMLResponse(explain_html(expert, row))
        return PlainTextResponse(explain_markdown(expert, row), media_type="text/markdown; charset=utf-8")

    @app.get("/healthz", summary="Liveness")
    def healthz():
        return {"status": "ok"}

    @app.get("/readyz", summary="Readiness: rule set loaded and decision log writable")
    def readyz():
        expert = holder.current()
        loaded = expert is not None and bool(expert.ruleset.rules)
        writable = decision_log.writable()
        body = {"ready": loaded and writable, "rules_loaded": loaded, "log_writable": writable,
                "digest": expert.ruleset.digest if expert else None, "generation": holder.generation,
                "last_reload_error": holder.last_error}
        return JSONResponse(body, status_code=200 if body["ready"] else 503)

    @app.post("/v1/admin/reload", summary="Reload the rules; a broken rule set is refused (409)")
    async def admin_reload(request: Request):
        if token and request.headers.get("authorization") != f"Bearer {token}":
            return _detail("authorization", "a valid 'Authorization: Bearer <KENTINO_ADMIN_TOKEN>' is required", 401)
        try:
            result = await run_in_threadpool(holder.reload)
        except KentinoError as exc:
            return JSONResponse({"detail": [{"field": "rules", "message": "the new rule set does not load; the "
                                             "old one is still serving"}],
                                 "diagnostics": _diagnostics(exc), "error": str(exc),
                                 "serving_digest": holder.expert.ruleset.digest}, status_code=409)
        return result

    return app


def _decide_checked(decide, expert, decision_log, facts, session_id, turn):
    """decide(), with failures of the arithmetic on extreme (but valid) facts reported as the client's 422."""
    try:
        return decide(expert, decision_log, facts, "http", session_id=session_id, turn=turn)
    except (KentinoError, BadRequest):
        raise
    except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:
        logging.getLogger("uvicorn.error").exception("facts that cannot be evaluated: %r", facts)
        raise EngineError(f"{type(exc).__name__}: {exc}") from None


def _summary(row: dict) -> dict:
    answer = row.get("answer") or {}
    return {k: row[k] for k in ("decision_id", "created_at", "session_id", "turn", "source", "kind", "digest")} | {
        "status": answer.get("status"), "summary": (answer.get("recommendation") or {}).get("summary")}


def _version() -> str:
    from . import __version__
    return __version__


def app_from_env() -> FastAPI:
    """Factory for `uvicorn --factory kentino_expert.service:app_from_env` (and --workers > 1).

    Reads KENTINO_RULES, KENTINO_KNOWLEDGE, KENTINO_DB and KENTINO_RELOAD_FILE.
    """
    return create_app(rules_dir=os.environ.get("KENTINO_RULES") or None,
                      knowledge_dir=os.environ.get("KENTINO_KNOWLEDGE") or None,
                      db=os.environ.get("KENTINO_DB") or None,
                      reload_file=os.environ.get("KENTINO_RELOAD_FILE") or None)
