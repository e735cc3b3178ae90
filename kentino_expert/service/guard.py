"""Who may ask what: the Host allowlist, bearer tokens with scopes, JSON-only POST bodies, and a bounded
number of decision-log reads at once, as one ASGI middleware in front of the app.

- Host: a request whose Host header is not allowed is a 400 before anything else runs, so a web
  page that rebinds its own DNS name to 127.0.0.1 reaches nothing (the browser sends that name).
- Scopes: each route needs what scopes.ROUTES declares for it (public, read or admin; a route not declared
  stops the app from starting); the admin token also reads. With no token configured the log is open
  (loopback use); with any token configured every log read needs one. With no admin token, HTTP
  reload is off (403). A browser cannot send a bearer token: on a route declared a page (the decision
  browser's) the token may also come as the password of HTTP Basic, and a refusal there is a page with a
  Basic challenge (the browser asks for it).
- MCP over HTTP (/mcp, declared `origin`): a request with an Origin header must come from an allowed host (the
  MCP transport's own defence against DNS rebinding, beside the Host check).
- POST bodies must be labelled JSON (415 otherwise): a page cannot send one cross-origin without a
  CORS preflight, which this service never grants.
- Log reads run at most `log_readers` at a time; the others wait on the event loop, so readers
  cannot take the threads and the CPU decisions need.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import ipaddress
import os
import re
import weakref
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.routing import Match

from .error_codes import (
    ADMIN_TOKEN_REQUIRED,
    HOST_REFUSED,
    NOT_JSON,
    ORIGIN_REFUSED,
    RELOAD_OFF,
    TOKEN_REQUIRED,
    ErrorCode,
    error_bytes,
)
from .scopes import ADMIN, PUBLIC, READ, Scope, check_routes

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
ANY_HOST = "*"
PORT, MAX_PORT = re.compile(r"[0-9]{1,5}"), 65535  # RFC 3986: a port is digits; TCP's are 1 to 65535
REALM = "kentino-expert"


@dataclass(frozen=True)
class Access:
    """Tokens and allowed Host names of one app (None: that token is not configured)."""
    read_token: str | None = None
    admin_token: str | None = None
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    log_readers: int = 2

    @classmethod
    def resolve(cls, read_token=None, admin_token=None, allowed_hosts=None, log_readers: int = 2) -> Access:
        """Given values first, else KENTINO_READ_TOKEN, KENTINO_ADMIN_TOKEN, KENTINO_ALLOWED_HOSTS (comma-separated)."""
        read = read_token if read_token is not None else os.environ.get("KENTINO_READ_TOKEN")
        admin = admin_token if admin_token is not None else os.environ.get("KENTINO_ADMIN_TOKEN")
        if allowed_hosts is None:
            listed = os.environ.get("KENTINO_ALLOWED_HOSTS", "")
            allowed_hosts = [h for h in (part.strip() for part in listed.split(",")) if h] or LOOPBACK_HOSTS
        return cls(read or None, admin or None, tuple(check_host_entry(h) for h in allowed_hosts), log_readers)


# -- Host -------------------------------------------------------------------------------------------

def check_host_entry(entry: str) -> str:
    """An --allowed-host value, lower-cased; ValueError for what is not a host name, address or '*'."""
    entry = entry.strip().lower()
    if not entry or any(c in entry for c in "/ \t@?#,") or entry.count(":") > 1 and not entry.startswith("[") \
            or entry != ANY_HOST and split_host(entry) is None:
        raise ValueError(f"'{entry}' is not a host name (give e.g. api.example.com, 10.0.0.5 or [::1], "
                         f"optionally with :port, a port from 1 to {MAX_PORT})")
    return entry


def _port(text: str) -> str | None:
    """A Host header's port as its number's text (1-65535, ASCII digits: '٣'.isdigit() is true too), else None."""
    return str(int(text)) if PORT.fullmatch(text) and 1 <= int(text) <= MAX_PORT else None


def split_host(value: str) -> tuple[str, str | None] | None:
    """('name', 'port' or None) of a Host header value or an allowlist entry; None when it names a port that
    cannot be one (not a number from 1 to 65535, or an empty one after the colon)."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value.partition("]")
        if not rest:
            return name + "]", None
        port = _port(rest[1:]) if rest.startswith(":") else None
        return (name + "]", port) if port is not None else None
    name, colon, port = value.rpartition(":")
    if not colon:
        return value, None
    return (name, _port(port)) if _port(port) is not None else None


def host_allowed(header: str | None, allowed: tuple[str, ...]) -> bool:
    """The Host header names an allowed host (an entry without a port allows any port, 1 to 65535)."""
    if ANY_HOST in allowed:
        return True
    given = split_host(header) if header else None
    if given is None:
        return False
    name, port = given
    for entry in allowed:
        allowed_name, allowed_port = split_host(entry) or (None, None)
        if name == allowed_name and (allowed_port is None or allowed_port == port):
            return True
    return False


def is_loopback(bind_host: str) -> bool:
    """Whether `serve --host` only listens on this machine (127.0.0.0/8, ::1, localhost)."""
    if bind_host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind_host.strip("[]")).is_loopback
    except ValueError:
        return False


def default_allowed_hosts(bind_host: str) -> tuple[str, ...] | None:
    """The loopback names (and the bound address) for a loopback bind; None: the operator must say."""
    if not is_loopback(bind_host):
        return None
    own = f"[{bind_host}]" if ":" in bind_host else bind_host.lower()
    return LOOPBACK_HOSTS + (() if own in LOOPBACK_HOSTS else (own,))


# -- tokens -----------------------------------------------------------------------------------------

def bearer_credentials(header: bytes | None) -> bytes | None:
    """The token of `Authorization: Bearer <token>` (the scheme in any case, RFC 7235), else None."""
    scheme, _, credentials = (header or b"").strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    return credentials.strip()


def basic_password(header: bytes | None) -> bytes | None:
    """The password of `Authorization: Basic <base64 user:password>` (the user is ignored), else None."""
    scheme, _, credentials = (header or b"").strip().partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, colon, password = decoded.partition(b":")
    return password if colon else None


def origin_allowed(origin: str, allowed: tuple[str, ...]) -> bool:
    """An Origin header names an allowed host ('null', from a file or a sandbox, names none)."""
    try:
        parts = urlsplit(origin.strip())
        host = parts.netloc if parts.scheme in ("http", "https") and not parts.username else ""
    except ValueError:
        return False
    return bool(host) and host_allowed(host, allowed)


def token_matches(given: bytes | None, token: str | None) -> bool:
    """Constant-time comparison; a token that is not configured matches nothing."""
    if given is None or not token:
        return False
    return hmac.compare_digest(given, token.encode("utf-8", "surrogateescape"))


def authorise(needed: str, header: bytes | None, access: Access,
              basic: bool = False) -> tuple[ErrorCode, str, str] | None:
    """None if allowed, else (error code, message, WWW-Authenticate value or ''); with `basic` the token may also be
    the password of HTTP Basic (the decision browser's pages), and the challenge asks for that."""
    if needed == ADMIN and not access.admin_token:
        return RELOAD_OFF, ("HTTP reload is off: no admin token is configured (set KENTINO_ADMIN_TOKEN; SIGHUP to the "
                     "server still reloads)"), ""
    if needed == READ and not (access.read_token or access.admin_token):
        return None
    given = bearer_credentials(header)
    if given is None and basic:
        given = basic_password(header)
    is_admin = token_matches(given, access.admin_token)
    is_reader = token_matches(given, access.read_token)
    if is_admin or (needed == READ and is_reader):
        return None
    if basic:  # a browser: it asks for the password when challenged with Basic
        return TOKEN_REQUIRED, ("sign in with the read token (KENTINO_READ_TOKEN or KENTINO_ADMIN_TOKEN) as the "
                                "password, any user name"), f'Basic realm="{REALM}", charset="UTF-8"'
    token_name = "KENTINO_ADMIN_TOKEN" if needed == ADMIN else "KENTINO_READ_TOKEN or KENTINO_ADMIN_TOKEN"
    if is_reader:  # a valid read token on an admin route
        return ADMIN_TOKEN_REQUIRED, "this needs the admin token; the read token only reads", \
            f'Bearer realm="{REALM}", error="insufficient_scope", scope="{needed}"'
    error = ', error="invalid_token"' if given is not None else ""
    return TOKEN_REQUIRED, f"a valid 'Authorization: Bearer <{token_name}>' is required", \
        f'Bearer realm="{REALM}"{error}, scope="{needed}"'


# -- content type -----------------------------------------------------------------------------------

def not_json(label: str) -> str:
    """The 415 message for a body labelled `label` (the guard's, and /mcp's for a POST with no label)."""
    return f"the body must be JSON (Content-Type: application/json), not '{label[:60] or 'unlabelled'}'"


def is_json_media_type(value: str) -> bool:
    """application/json or application/*+json, with no charset but UTF-8."""
    media_type, *params = [part.strip() for part in value.split(";")]
    media_type = media_type.lower()
    if media_type != "application/json" and not (media_type.startswith("application/")
                                                 and media_type.endswith("+json")):
        return False
    for param in params:
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and val.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return False
    return True


def has_body(headers: dict) -> bool:
    """The request says a body follows (a Content-Length above 0, or any Transfer-Encoding)."""
    length = headers.get(b"content-length")
    if b"transfer-encoding" in headers:
        return True
    try:
        return length is not None and int(length) > 0
    except ValueError:
        return True


# -- the middleware ---------------------------------------------------------------------------------

UI_REFUSAL = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sign in</title></head>"
              "<body><h1>Sign in</h1><p>The decision log is read with the service's read token: give it as the "
              "password (any user name).</p><p class=\"code\" data-error-code=\"{code}\">Error code: {code}</p>"
              "</body></html>\n")


def refusal(send, code: ErrorCode, field: str | None, message: str, extra_headers=(), html: bool = False):
    """Answer an error with its code (error_codes.py) before the app runs: the API's JSON body, or with `html` a page
    for a browser (the decision browser's), with nothing of the request echoed."""
    if html:
        body, media_type = UI_REFUSAL.format(code=code.code).encode(), b"text/html; charset=utf-8"
    else:
        body, media_type = error_bytes(code, field, message), b"application/json"
    headers = [(b"content-type", media_type), (b"content-length", str(len(body)).encode()), *extra_headers]

    async def respond():
        await send({"type": "http.response.start", "status": code.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    return respond()


class Guard:
    """ASGI middleware enforcing an `Access` in front of `app`; `routes` are the app's routes, each with the scope
    scopes.ROUTES declares for it (the app checked them all when it started)."""

    def __init__(self, app, access: Access, routes):
        self.app, self.access, self._routes = app, access, routes
        self._declared = None
        self._gates: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _scope_of(self, scope) -> Scope | None:
        """The declared scope of the route a request goes to (None: no route, a 404 anyone may get)."""
        if self._declared is None:  # once every route is registered
            self._declared = check_routes(self._routes)
        for route, declared in self._declared:
            if route.matches(scope)[0] is not Match.NONE:
                return declared
        return None

    def _gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Semaphore(self.access.log_readers)
        return gate

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {}
        for name, value in scope["headers"]:
            headers.setdefault(name, value)  # the first, as Starlette reads them
        declared = self._scope_of(scope)
        refused = self._refused(scope, headers, declared)
        if refused is not None:
            code, field, message, extra, html = refused
            await refusal(send, code, field, message, extra, html=html)
        elif declared is not None and declared.needs == READ:  # a log read waits for one of its places
            async with self._gate():
                await self.app(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _refused(self, scope, headers: dict, declared: Scope | None) -> tuple | None:
        """(code, field, message, extra headers, as a page) of the refusal a request gets before the app, or None."""
        host = headers.get(b"host", b"").decode("latin-1")
        if sum(name == b"host" for name, _ in scope["headers"]) > 1:  # which one a proxy routed by is not known
            return HOST_REFUSED, "host", "more than one Host header", (), False
        if not host_allowed(host, self.access.allowed_hosts):
            return HOST_REFUSED, "host", f"this service does not answer to the Host '{host[:100]}' (see " \
                                         f"--allowed-host)", (), False
        if declared is not None and declared.origin and b"origin" in headers \
                and not origin_allowed(headers[b"origin"].decode("latin-1"), self.access.allowed_hosts):
            return ORIGIN_REFUSED, "origin", "MCP requests from a web page of another host are refused", (), False
        if declared is not None and declared.needs != PUBLIC:
            denied = authorise(declared.needs, headers.get(b"authorization"), self.access, basic=declared.page)
            if denied is not None:
                code, message, challenge = denied
                extra = [(b"www-authenticate", challenge.encode())] if challenge else []
                return code, "authorization", message, extra, declared.page
        if scope["method"] == "POST":
            content_type = headers.get(b"content-type")
            label = (content_type or b"").decode("latin-1")
            if (content_type is not None or has_body(headers)) and not is_json_media_type(label):
                return NOT_JSON, "content-type", not_json(label), (), False
        return None
