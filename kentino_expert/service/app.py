"""The HTTP service: FastAPI app factory, served by uvicorn (`kentino-expert serve`).

Every POST /v1/recommend is written to the decision log before its response is sent. The rule set
can be reloaded (POST /v1/admin/reload or SIGHUP): the new Expert is built first and swapped in
atomically only if it loads; a broken rule directory is refused with its diagnostics (409) while the
old rules keep answering. Each request takes one snapshot of the expert, so a decision never mixes
rule-set versions, and it records the digest it actually used. Nothing a client sends produces a 500:
bad input is a 422 whose detail names the field.

No request holds the event loop: a decision (parsing, deciding, committing, rendering) runs in a
worker thread under its own limiter, and decision-log reads are bounded apart from it (see
service_guard, which also checks the Host, the bearer tokens and the JSON content type).
"""
from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import threading
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from ..decisions.connect import open_log
from ..decisions.log import default_instance
from ..errors import DecisionLogError, KentinoError, RuleFileError
from ..version import __version__
from .api_routes import add_answer_routes, add_decision_routes
from .error_codes import NOT_READY, PUBLISHED_SET_UNREADABLE, RELOAD_REFUSED, error_response
from .error_handlers import install_error_handlers
from .follower import holder_for, sandboxed_factory
from .guard import Access, Guard, authorise
from .http_io import HeadAsGet
from .mcp_http import mcp_missing, mount_mcp
from .metrics import install as install_metrics
from .scopes import check_routes, document_access
from .ui import add_ui_routes


def _diagnostics(exc: KentinoError) -> list[dict]:
    if isinstance(exc, RuleFileError):
        return [d.as_dict() for d in exc.diagnostics]
    where = exc.location
    return [{"file": getattr(where, "file", None), "line": getattr(where, "line", 0),
             "column": getattr(where, "column", 0), "code": type(exc).__name__, "severity": "error",
             "message": exc.message, "rule": None, "suggestion": exc.suggestion}]


# -- the app ----------------------------------------------------------------------------------------

_default_factory = sandboxed_factory  # the name tests and older callers use


def create_app(expert_factory=None, log=None, *, rules_dir=None, knowledge_dir=None, db=None,
               reload_file: str | None = None, admin_token: str | None = None, read_token: str | None = None,
               allowed_hosts=None, instance: str | None = None) -> FastAPI:
    """The FastAPI app. `expert_factory()` builds an Expert (at start and on each reload); `log` is a
    DecisionLog (default: connect.open_log(db), i.e. KENTINO_DB or ./kentino-decisions.db).

    Tokens and allowed Host names not given come from KENTINO_ADMIN_TOKEN, KENTINO_READ_TOKEN and
    KENTINO_ALLOWED_HOSTS; the Host names default to the loopback ones (see service_guard.Access). The
    instance label recorded in each decision: `instance`, else KENTINO_INSTANCE, else the host's name.
    """
    access = Access.resolve(read_token, admin_token, allowed_hosts)
    factory = expert_factory or sandboxed_factory(rules_dir, knowledge_dir)
    decision_log = log if log is not None else open_log(db)
    decision_log.instance = instance or decision_log.instance or default_instance()
    holder = holder_for(decision_log, factory, reload_file)  # PostgreSQL: the published set (follower.py)

    mcp = mount_mcp(holder.current, decision_log, may_read=lambda headers: _log_read_refused(headers, access))
    app = FastAPI(title="Kentino Expert", version=__version__, description=API_DESCRIPTION,
                  lifespan=_lifespan(holder, mcp))
    app.state.holder = holder
    app.state.log = decision_log
    app.state.access = access
    install_metrics(app, holder, decision_log, decision_log.instance)  # innermost
    app.add_middleware(HeadAsGet)
    app.add_middleware(Guard, access=access, routes=app.router.routes)  # outermost: before HEAD becomes GET
    install_error_handlers(app)
    add_answer_routes(app, holder, decision_log)
    add_decision_routes(app, holder, decision_log)
    _add_operations_routes(app, holder, decision_log)
    add_ui_routes(app, holder, decision_log)
    # MCP over streamable HTTP; the mcp package is a dependency, but an install without it says so (501)
    app.add_route("/mcp", mcp if mcp is not None else mcp_missing, include_in_schema=False)
    check_routes(app.router.routes)  # every route declares its scope (and again at start, for routes added since)
    _document_access(app, access)
    return app


API_DESCRIPTION = (
    "What GPU server to buy for an AI workload, and why. POST the workload facts to `/v1/recommend` (the "
    "`recommend` operation; `GET /v1/schema/facts` describes them); every decision is logged before it is "
    "answered, and the log is read with the read token. The same tools are served over MCP (streamable HTTP) "
    "at `/mcp`. Errors are `{detail: [{field, message}]}` naming the field.")


def _log_read_refused(headers, access) -> str | None:
    """Why a caller with these HTTP headers may not read the decision log (None: it may); for the MCP tool explain."""
    header = headers.get("authorization")
    denied = authorise("read", header.encode("latin-1", "replace") if header is not None else None, access)
    return denied[1] if denied else None


def _document_access(app, access) -> None:
    """The OpenAPI document, built once, with the security schemes, each operation's security and the error bodies
    (scopes.py)."""
    build = app.openapi

    def openapi():
        if app.openapi_schema is None:
            app.openapi_schema = document_access(build(), bool(access.read_token or access.admin_token))
        return app.openapi_schema
    app.openapi = openapi


def _lifespan(holder, mcp=None):
    """The app's lifespan: SIGHUP reloads the rules (in the main thread's event loop only); the MCP
    endpoint runs; on a PostgreSQL log the holder follows the published rule set while the app runs."""
    def reload_logged(origin: str):
        try:
            result = holder.reload(trigger=origin.lower())
            logging.getLogger("uvicorn.error").info("%s: rules reloaded, digest %s", origin, result["digest"][:16])
        except KentinoError as exc:
            logging.getLogger("uvicorn.error").error("%s: reload refused, still serving %s:\n%s", origin,
                                                     holder.expert.ruleset.digest[:16], exc)

    @asynccontextmanager
    async def lifespan(app):
        check_routes(app.router.routes)  # a route added after create_app without a declared scope: no start
        loop = asyncio.get_running_loop()
        installed = False
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGHUP"):
            try:
                # a daemon thread, not the loop's executor: shutting down waits for the executor's threads, and a
                # reload must never be what keeps SIGTERM from stopping the process
                loop.add_signal_handler(signal.SIGHUP, lambda: threading.Thread(
                    target=reload_logged, args=("SIGHUP",), name="kentino-sighup-reload", daemon=True).start())
                installed = True
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        holder.start_following()  # a PostgreSQL log: switch to each rule set published (in a thread)
        try:
            async with mcp.running() if mcp is not None else contextlib.nullcontext():
                yield
        finally:
            holder.stop_following()
            if installed:
                loop.remove_signal_handler(signal.SIGHUP)

    return lifespan


def _add_operations_routes(app, holder, decision_log) -> None:
    """Liveness, readiness and the admin reload: for operators, out of the OpenAPI document (not tools)."""
    @app.get("/healthz", include_in_schema=False)
    def healthz():
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    def readyz():
        serving = holder.snapshot()
        expert = serving.expert
        loaded = expert is not None and bool(expert.ruleset.rules)
        writable = decision_log.writable()
        body = {"ready": loaded and writable, "rules_loaded": loaded, "log_writable": writable,
                "digest": expert.ruleset.digest if expert else None, "generation": serving.generation,
                "worker_pid": os.getpid(), "last_reload_error": serving.last_error,
                "instance": decision_log.instance, "rule_source": serving.source,
                "published_digest": serving.published_digest, "behind_published": serving.behind}
        if body["ready"]:
            return JSONResponse(body)
        return JSONResponse({"code": NOT_READY.code, **body}, status_code=NOT_READY.status)

    @app.post("/v1/admin/reload", include_in_schema=False)
    async def admin_reload():  # the admin token is checked by service_guard.Guard
        try:
            result = await run_in_threadpool(holder.reload)
        except DecisionLogError as exc:  # a PostgreSQL log whose published rule set cannot be read just now
            logging.getLogger("uvicorn.error").error("POST /v1/admin/reload: %s", exc)
            return error_response(PUBLISHED_SET_UNREADABLE, None, "the published rule set cannot be read; the old one "
                                  f"is still serving: {exc.message}", serving_digest=holder.expert.ruleset.digest)
        except KentinoError as exc:
            logging.getLogger("uvicorn.error").error("POST /v1/admin/reload: reload refused, still serving %s:\n%s",
                                                     holder.expert.ruleset.digest[:16], exc)
            return error_response(RELOAD_REFUSED, "rules", "the new rule set does not load; the old one is still "
                                  "serving", diagnostics=_diagnostics(exc), error=str(exc),
                                  serving_digest=holder.expert.ruleset.digest)
        logging.getLogger("uvicorn.error").info("POST /v1/admin/reload: rules reloaded, digest %s",
                                                result["digest"][:16])
        return result

def tune_gc_for_serving(gen0: int = 20_000) -> None:
    """Fewer, cheaper collections in a serving process (measured: p99 at 16 clients 48 -> 35 ms).

    Everything loaded so far (rules, catalog, libraries) is frozen out of the collector's scans,
    and the youngest generation is collected every `gen0` allocations instead of 700: a request
    allocates thousands of short-lived objects, almost none of them in cycles.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(gen0, 50, 100)


def app_from_env() -> FastAPI:
    """Factory for `uvicorn --factory kentino_expert.service.app:app_from_env` (and --workers > 1).

    Reads KENTINO_RULES, KENTINO_KNOWLEDGE, KENTINO_DB and KENTINO_RELOAD_FILE, and (create_app)
    KENTINO_READ_TOKEN, KENTINO_ADMIN_TOKEN, KENTINO_ALLOWED_HOSTS and KENTINO_INSTANCE.
    """
    app = create_app(rules_dir=os.environ.get("KENTINO_RULES") or None,
                     knowledge_dir=os.environ.get("KENTINO_KNOWLEDGE") or None,
                     reload_file=os.environ.get("KENTINO_RELOAD_FILE") or None)  # the log: open_log() reads KENTINO_DB
    tune_gc_for_serving()
    return app
