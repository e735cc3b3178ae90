"""What the HTTP app answers for each exception a request can raise: an error body with its registered code
(error_codes.py) and the field concerned. A client never sees a 500 for what it sent; a bug is logged in full and
answered as `internal-error`."""
from __future__ import annotations

import logging

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import DecisionLogError, InputError, KentinoError, UnreadableRow
from .error_codes import (
    FACTS_NOT_EVALUABLE,
    INTERNAL_ERROR,
    INVALID_FACTS,
    INVALID_PARAMETER,
    LOG_UNAVAILABLE,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    UNREADABLE_ROW,
    error_response,
)
from .field_errors import field_errors
from .http_io import BadRequest, allow_with_head
from .log_failures import public_message

# the fields of an InputError that are the request's parameters, not facts (invalid-parameter, not invalid-facts)
PARAMETER_FIELDS = frozenset({"session_id", "turn", "view", "cursor", "kind", "limit", "since", "format"})
# the statuses Starlette raises an HTTPException with here, as codes: routing's 404 and 405 (FastAPI's 400 for a body
# it cannot parse needs a route that asks it to parse one: none does)
HTTP_EXCEPTION_CODES = {code.status: code for code in (NOT_FOUND, METHOD_NOT_ALLOWED)}


def install_error_handlers(app) -> None:
    """Every exception of a request as an error response with its code."""
    _request_errors(app)
    _service_errors(app)


def _request_errors(app) -> None:
    """What the request itself got wrong, or asked of a route that does not take it."""
    @app.exception_handler(BadRequest)
    async def _bad_request(request, exc: BadRequest):
        return error_response(exc.code, exc.field, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _validation(request, exc: RequestValidationError):
        items = field_errors(exc.errors(), skip=("body", "query", "path"))
        return error_response(INVALID_PARAMETER, None, "invalid request", items=items)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request, exc: StarletteHTTPException):
        code = HTTP_EXCEPTION_CODES.get(exc.status_code)
        if code is None:  # a status no route here raises: a bug
            return _internal_error(request)
        response = error_response(code, None, str(exc.detail), headers=exc.headers)  # e.g. the `Allow` of a 405
        if "allow" in response.headers:
            response.headers["allow"] = allow_with_head(response.headers["allow"])
        return response

    @app.exception_handler(InputError)
    async def _input(request, exc: InputError):
        field = exc.field or exc.name or "facts"
        return error_response(INVALID_PARAMETER if field in PARAMETER_FIELDS else INVALID_FACTS, field,
                              exc.suggested())



def _service_errors(app) -> None:
    """What the service could not do with a well-formed request: a row it cannot read, its log, the arithmetic, a
    bug."""
    @app.exception_handler(UnreadableRow)
    async def _unreadable_row(request, exc: UnreadableRow):  # a row another program wrote: for good, as a 422
        return error_response(UNREADABLE_ROW, exc.name, exc.problem)

    @app.exception_handler(DecisionLogError)
    async def _log_error(request, exc: DecisionLogError):  # its words name the database: see log_failures.py
        return error_response(LOG_UNAVAILABLE, None, public_message(exc, writing=request.method == "POST"))

    @app.exception_handler(KentinoError)
    async def _kentino(request, exc: KentinoError):
        return error_response(FACTS_NOT_EVALUABLE, "facts", f"these facts cannot be evaluated: {exc.message}")

    @app.exception_handler(Exception)
    async def _unexpected(request, exc: Exception):
        return _internal_error(request)


def _internal_error(request):
    """A bug, never the client's doing: logged in full (the exception being handled), answered in a sentence."""
    logging.getLogger("uvicorn.error").exception("internal error on %s %s", request.method, request.url.path)
    return error_response(INTERNAL_ERROR, None, "internal error (logged on the server)")
