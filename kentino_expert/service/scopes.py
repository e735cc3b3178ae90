"""Who may call each route, declared in one table (ROUTES) the app is built from: public, read (the decision log) or
admin (the rules in service). The app refuses to start with a route the table does not name, or a declaration no
route answers (check_routes, at build and at start: a route added later is caught too); the guard (guard.py) takes a
request's scope from its route's declaration, never from a path prefix; and the OpenAPI document's `security` of
each operation is derived from it (document_access)."""
from __future__ import annotations

import json
from dataclasses import dataclass

from .error_codes import ADMIN_TOKEN_REQUIRED, NOT_JSON, REGISTRY, RELOAD_OFF, TOKEN_REQUIRED, responses_for

PUBLIC, READ, ADMIN = "public", "read", "admin"


@dataclass(frozen=True)
class Scope:
    """What a route needs, and why. `page`: a page for a browser, which cannot send a bearer token, so the token may
    come as the password of HTTP Basic and a refusal is a page; `origin`: a request carrying an Origin header (a
    browser's) must come from an allowed host (MCP's defence against DNS rebinding)."""
    needs: str
    why: str
    page: bool = False
    origin: bool = False


_LOG = "reads the decision log: customers' facts and conversations"
ROUTES: dict[str, Scope] = {
    "/v1/recommend": Scope(PUBLIC, "a decision, logged; open to whoever passes the Host check (rate-limit at the "
                                   "proxy)"),
    "/v1/schema/facts": Scope(PUBLIC, "the facts a decision takes"),
    "/v1/rules": Scope(PUBLIC, "the rules in service and their digest"),
    "/mcp": Scope(PUBLIC, "the MCP tools: `recommend` as POST /v1/recommend; `explain` of a logged decision asks for "
                          "the read scope itself", origin=True),
    "/v1/decisions": Scope(READ, _LOG),
    "/v1/decisions/{decision_id}": Scope(READ, _LOG),
    "/v1/decisions/{decision_id}/explain": Scope(READ, _LOG),
    "/ui": Scope(READ, f"the decision browser: {_LOG}", page=True),
    "/ui/decisions/{decision_id}": Scope(READ, f"the decision browser: {_LOG}", page=True),
    "/metrics": Scope(READ, "traffic volumes and rule versions"),
    "/v1/admin/reload": Scope(ADMIN, "swaps the rules every customer is told (off without an admin token)"),
    "/healthz": Scope(PUBLIC, "liveness"),
    "/readyz": Scope(PUBLIC, "readiness: the digest served, the worker pid, the last reload error"),
    "/openapi.json": Scope(PUBLIC, "the API's OpenAPI document"),
    "/docs": Scope(PUBLIC, "the API's documentation page"),
    "/docs/oauth2-redirect": Scope(PUBLIC, "part of the documentation page"),
    "/redoc": Scope(PUBLIC, "the API's documentation page"),
}


class UndeclaredRoute(RuntimeError):
    """The app has a route ROUTES does not declare (or declares a route it does not have): it must not start."""


def check_routes(routes, table: dict[str, Scope] = ROUTES) -> list[tuple[object, Scope]]:
    """(route, its scope) for every route; UndeclaredRoute naming each route without a declaration, and each
    declaration without a route."""
    paths = [getattr(route, "path", None) for route in routes]
    undeclared = sorted({path for path in paths if path not in table}, key=str)
    unserved = sorted(set(table) - set(paths))
    if undeclared or unserved:
        raise UndeclaredRoute("; ".join(
            [f"route {path} has no scope: declare it (public, read or admin) in service/scopes.py ROUTES"
             for path in undeclared] + [f"ROUTES declares {path}, which no route serves" for path in unserved]))
    return [(route, table[route.path]) for route in routes]


def routes_table() -> str:
    """The declaration as a Markdown table (docs/threat-model.md)."""
    def needs(scope: Scope) -> str:
        return scope.needs + (", a page: the token also as an HTTP Basic password" if scope.page else "") + \
            (", an Origin header must name an allowed host" if scope.origin else "")
    rows = [f"| `{path}` | {needs(scope)} | {scope.why} |" for path, scope in ROUTES.items()]
    return "\n".join(["| route | scope | why |", "|---|---|---|", *rows])


# -- the OpenAPI document ---------------------------------------------------------------------------

ERROR_SCHEMA = {"type": "object", "required": ["code", "detail"], "description": "What was wrong, field by field.",
                "properties": {"code": {"type": "string", "enum": [c.code for c in REGISTRY.values() if not c.jsonrpc],
                                        "description": "What went wrong, as a stable code (the table in "
                                                       "docs/chat-bots.md says what each means)."},
                               "detail": {
                    "type": "array", "minItems": 1, "description": "One item per problem.",
                    "items": {"type": "object", "required": ["field", "message"], "properties": {
                        "field": {"type": ["string", "null"], "description": "The field, fact or header concerned "
                                                                             "(null: the request as a whole)."},
                        "message": {"type": "string", "description": "What is wrong, and what would do."}}}}}}
SECURITY_SCHEMES = {
    "readToken": {"type": "http", "scheme": "bearer",
                  "description": "KENTINO_READ_TOKEN: reads the decision log and its explanations."},
    "adminToken": {"type": "http", "scheme": "bearer",
                   "description": "KENTINO_ADMIN_TOKEN: reloads the rules, and reads what the read token reads."}}
AUTH_RESPONSES = {PUBLIC: {}, READ: responses_for(TOKEN_REQUIRED),
                  ADMIN: responses_for(TOKEN_REQUIRED, ADMIN_TOKEN_REQUIRED, RELOAD_OFF)}


def security_of(scope: Scope, tokens_configured: bool) -> list[dict]:
    """An operation's OpenAPI `security`: none for a public route; the read or admin token for a read route (or none,
    while no token is configured); the admin token for an admin route."""
    if scope.needs == READ:
        return [{"readToken": []}, {"adminToken": []}] + ([] if tokens_configured else [{}])
    return [{"adminToken": []}] if scope.needs == ADMIN else []


def document_access(spec: dict, tokens_configured: bool, table: dict[str, Scope] = ROUTES) -> dict:
    """The OpenAPI document with the bearer schemes, each operation's security from its route's declaration, and the
    error bodies."""
    components = spec.setdefault("components", {})
    components["securitySchemes"] = SECURITY_SCHEMES
    schemas = components.setdefault("schemas", {})
    schemas["Error"] = ERROR_SCHEMA
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, operations in spec.get("paths", {}).items():
        scope = table.get(path)
        if scope is None:
            raise UndeclaredRoute(f"route {path} has no scope: declare it in service/scopes.py ROUTES")
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            operation["security"] = security_of(scope, tokens_configured)
            for status, response in AUTH_RESPONSES[scope.needs].items():
                responses.setdefault(str(status), dict(response))
            if method == "post":
                responses.setdefault(str(NOT_JSON.status), responses_for(NOT_JSON)[NOT_JSON.status])
            for status, response in responses.items():
                content = response.get("content", {})
                if status[0] in "45" and (not content or "HTTPValidationError" in json.dumps(content)):
                    response["content"] = error
    for unused in ("HTTPValidationError", "ValidationError"):
        if unused not in json.dumps(spec.get("paths", {})):
            schemas.pop(unused, None)
    return spec
