"""The decision browser for auditors: a read-only page at /ui listing the logged decisions (filters: kind, since,
session; paged by the log's cursor), each opening its explain report at /ui/decisions/{id}.

Server-rendered with Jinja2 (autoescape on: every value from the log is text, never markup), one page of
inline CSS, no scripts, nothing fetched from elsewhere; the Content-Security-Policy says so to the browser.
Access is the guard's (guard.py): the read scope, with the token given as a bearer token or, since a browser
cannot send one, as the password of HTTP Basic (see docs/threat-model.md).
"""
from __future__ import annotations

from urllib.parse import urlencode

from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined

from ..answer.explain import explain_html
from ..decisions.meta import check_session_id, normalise_time
from ..domain.vocabulary import KINDS, check_kind
from ..errors import DecisionLogError, InputError, UnreadableRow
from .error_codes import DECISION_NOT_FOUND, INVALID_PARAMETER, LOG_UNAVAILABLE, UNREADABLE_ROW, ErrorCode
from .log_failures import public_message

PAGE_SIZE = 50
MAX_FILTER_CHARS = 200
NOSNIFF = {"x-content-type-options": "nosniff"}  # a browser takes the content type as given, never guesses
# what the pages may load and do: their own inline CSS, nothing else (no script, no frame, no remote resource); the
# explanation at /v1/decisions/{id}/explain?format=html is sent with them too
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-frame-options": "DENY", **NOSNIFF, "referrer-policy": "no-referrer",
    "cache-control": "no-store"}

_templates = Environment(loader=PackageLoader("kentino_expert.service", "templates"), autoescape=True,
                         undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def page(html: str, code: ErrorCode | None = None) -> HTMLResponse:
    """An HTML response with the pages' security headers (with `code`: an error page, with the code's status)."""
    return HTMLResponse(html, status_code=code.status if code else 200, headers=SECURITY_HEADERS)


# each filter of the form with the check the log applies to it (the form's names: "session", not "session_id")
_FILTER_CHECKS = (("kind", check_kind), ("since", lambda since: normalise_time(since, clamp=True)),
                  ("session", check_session_id))


def _filters(kind: str | None, since: str | None, session: str | None) -> tuple[dict, tuple[str, str] | None]:
    """The filters as given (blank ones dropped), and the first wrong one as (field, message)."""
    given = {name: value.strip() for name, value in (("kind", kind), ("since", since), ("session", session))
             if value and value.strip()}
    for name, value in given.items():
        if len(value) > MAX_FILTER_CHARS:
            return given, (name, f"at most {MAX_FILTER_CHARS} characters")
    for name, check in _FILTER_CHECKS:
        if name in given:
            try:
                check(given[name])
            except (DecisionLogError, InputError) as exc:  # named by the filter, not by the log's own field
                return given, (name, exc.message)
    return given, None


def _row(summary: dict) -> dict:
    """A listed decision as the table shows it."""
    created = summary["created_at"]
    return {**summary, "when": created[:19].replace("T", " "), "digest_short": (summary.get("digest") or "")[:12],
            "href": f"/ui/decisions/{summary['decision_id']}"}


def decisions_page(decision_log, kind=None, since=None, session=None, cursor=None) -> HTMLResponse:
    """The list page: one page of decisions under the filters, or the form with the wrong filter named (422)."""
    given, wrong = _filters(kind, since, session)
    rows, next_cursor = [], None
    if wrong is None:
        try:
            found = decision_log.page(since=given.get("since"), kind=given.get("kind"), limit=PAGE_SIZE,
                                      cursor=cursor or None, session_id=given.get("session"))
            rows, next_cursor = [_row(summary) for summary in found.decisions], found.next_cursor
        except InputError as exc:  # a cursor the log did not give
            wrong = (exc.field or "cursor", exc.message)
        except DecisionLogError as exc:  # the server's trouble: its words (which name the database) to its log
            return message_page(LOG_UNAVAILABLE, "The decision log cannot be read", public_message(exc, writing=False))
    html = _templates.get_template("decisions.html").render(
        kinds=KINDS, filters=given, rows=rows, error=wrong, code=INVALID_PARAMETER.code, paged=bool(cursor),
        next_href="/ui?" + urlencode({**given, "cursor": next_cursor}) if next_cursor else None,
        first_href="/ui?" + urlencode(given) if given else "/ui")
    return page(html, INVALID_PARAMETER if wrong else None)


def message_page(code: ErrorCode, title: str, message: str) -> HTMLResponse:
    """A page that only says what went wrong (no such decision, the log unreadable), with its code."""
    return page(_templates.get_template("message.html").render(title=title, message=message, code=code.code), code)


def add_ui_routes(app, holder, decision_log) -> None:
    """GET /ui and GET /ui/decisions/{id} (out of the OpenAPI document: pages for people, not tools)."""
    @app.get("/ui", include_in_schema=False)
    def ui_decisions(kind: str | None = None, since: str | None = None, session: str | None = None,
                     cursor: str | None = None):
        return decisions_page(decision_log, kind, since, session, cursor)

    @app.get("/ui/decisions/{decision_id}", include_in_schema=False)
    def ui_decision(decision_id: str):
        try:
            row = decision_log.get(decision_id) if len(decision_id) <= 200 else None
        except UnreadableRow as exc:  # a row another program wrote: for good, like one of another shape below
            return message_page(UNREADABLE_ROW, "This decision cannot be explained",
                                f"Its stored row cannot be read: {exc.problem}")
        except DecisionLogError as exc:
            return message_page(LOG_UNAVAILABLE, "The decision log cannot be read", public_message(exc, writing=False))
        if row is None:
            return message_page(DECISION_NOT_FOUND, "No such decision",
                                f"There is no decision '{decision_id[:200]}' in the log.")
        try:
            return page(explain_html(holder.current(), row))
        except InputError as exc:  # a row another program wrote, not in the shape the log writes
            return message_page(UNREADABLE_ROW, "This decision cannot be explained",
                                f"Its stored row is not in the shape the log writes: {exc}")
