"""Every error the service answers carries a stable code from one registry (service/error_codes.py): each code is
what some request gets, with the status the registry gives it; no status is written anywhere else in the service;
the registry's table in docs/chat-bots.md is generated from it."""
from __future__ import annotations

import ast
import json
import re
import socket
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the HTTP service needs fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from kentino_expert.decisions.connect import open_log  # noqa: E402
from kentino_expert.errors import DecisionLogError, KentinoError  # noqa: E402
from kentino_expert.service import error_codes, mcp_http  # noqa: E402
from kentino_expert.service.app import create_app  # noqa: E402
from kentino_expert.service.error_codes import REGISTRY  # noqa: E402
from live_server import start_serve, stop_server  # noqa: E402

SERVICE = Path(__file__).resolve().parent.parent / "kentino_expert" / "service"
CHAT = {"task": "inference", "model": "llama-3.1-70b"}
MCP = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
READ, ADMIN = "codes-read-token", "codes-admin-token"


def code_of(status: int, content_type: str, body: bytes) -> str:
    """The code an error response carries: its JSON's `code`, a JSON-RPC error's data.code, or an error page's
    data-error-code."""
    if content_type.startswith("text/html"):
        found = re.search(r'data-error-code="([a-z-]+)"', body.decode())
        assert found, body[:300]
        return found.group(1)
    value = json.loads(body)
    if "jsonrpc" in value:
        return value["error"]["data"]["code"]
    return value["code"]


def checked(response) -> str:
    """The code of an error response, checked against the registry: registered, with the status it says."""
    code = code_of(response.status_code, response.headers.get("content-type", ""), response.content)
    assert code in REGISTRY, f"{response.status_code} with an unregistered code {code!r}"
    assert REGISTRY[code].status == response.status_code, (code, response.status_code)
    return code


class Exploding:
    """An expert whose evaluation fails as extreme facts can make the arithmetic fail."""

    def __init__(self, expert):
        from kentino_expert.answer.cache import AnswerCache
        self._expert, self.answer_cache = expert, AnswerCache()

    def __getattr__(self, name):
        return getattr(self._expert, name)

    def recommend_traced(self, workload):
        raise OverflowError("cannot convert float infinity to integer")

    decide_parts = recommend_traced  # what decide() asks of an expert


def _in_process(tmp_path, expert, seen: dict) -> None:
    """Every code a request to the app itself can get (TestClient), each recorded in `seen` by the request."""
    def see(name, response, code):
        got = checked(response)
        assert got == code, (name, got, response.text[:300])
        seen[code] = name

    with open_log(tmp_path / "codes.db") as log:
        calls = iter([expert])

        def factory():  # the first build serves; a reload builds a rule set that does not load
            expert_now = next(calls, None)
            if expert_now is None:
                raise KentinoError("rules/fit.yaml:1:1: E001: cannot read")
            return expert_now

        app = create_app(factory, log, admin_token=ADMIN, read_token=READ)
        with TestClient(app, base_url="http://localhost", raise_server_exceptions=False) as client:
            read = {"Authorization": f"Bearer {READ}"}
            see("array body", client.post("/v1/recommend", json=[]), "invalid-json")
            see("misspelt fact", client.post("/v1/recommend", json={"task": "cooking"}), "invalid-facts")
            see("limit 0", client.get("/v1/decisions", params={"limit": 0}, headers=read), "invalid-parameter")
            see("turn -1", client.post("/v1/recommend", json={**CHAT, "turn": -1}), "invalid-parameter")
            see("no such path", client.get("/nope"), "not-found")
            see("no such decision", client.get("/v1/decisions/nope", headers=read), "decision-not-found")
            see("DELETE", client.delete("/v1/rules"), "method-not-allowed")
            see("1 MB", client.post("/v1/recommend", content=b" " * 1_000_001,
                                    headers={"content-type": "application/json"}), "body-too-large")
            see("text/plain", client.post("/v1/recommend", content=b"{}", headers={"content-type": "text/plain"}),
                "not-json")
            see("gzip", client.post("/v1/recommend", json=CHAT, headers={"content-encoding": "gzip"}), "body-encoded")
            see("evil Host", client.get("/v1/rules", headers={"host": "evil.example"}), "host-refused")
            see("no token", client.get("/v1/decisions"), "token-required")
            see("no token, a page", client.get("/ui"), "token-required")
            see("read token, reload", client.post("/v1/admin/reload", headers=read), "admin-token-required")
            see("evil Origin", client.post("/mcp", json={}, headers={"origin": "http://evil.example", **MCP}),
                "origin-refused")
            see("broken rules", client.post("/v1/admin/reload", headers={"Authorization": f"Bearer {ADMIN}"}),
                "reload-refused")
            see("wrong filter, a page", client.get("/ui", params={"kind": "cluster"}, headers=read),
                "invalid-parameter")
            see("no such decision, a page", client.get("/ui/decisions/nope", headers=read), "decision-not-found")
            for message, code in (
                    (b'{"a":1,"a":2}', "mcp-parse-error"), (b'{"jsonrpc":"1.0","id":1,"method":"ping"}',
                                                           "mcp-invalid-message"),
                    (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}', "mcp-invalid-params"),
                    (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}',
                     "mcp-unknown-tool")):
                see(message.decode(), client.post("/mcp", content=message,
                                                  headers={"content-type": "application/json", **MCP}), code)
            log._write("INSERT INTO decisions (decision_id, created_at, source, facts, answer, kind, digest, engine) "
                       "VALUES ('h-text', '2025-01-31T12:00:00+00:00', 'cli', '{}', '{not json', 'k', 'd', 'e')", [])
            see("row not JSON", client.get("/v1/decisions/h-text", headers=read), "unreadable-row")
            app.state.holder.reload = lambda *a, **k: (_ for _ in ()).throw(DecisionLogError("cannot read"))
            see("published set", client.post("/v1/admin/reload", headers={"Authorization": f"Bearer {ADMIN}"}),
                "published-set-unreadable")
            log.get = lambda decision_id: 1 / 0  # a bug
            see("a bug", client.get("/v1/decisions/x", headers=read), "internal-error")
        log.close()
        with TestClient(create_app(lambda: expert, log), base_url="http://localhost") as client:
            see("log closed", client.post("/v1/recommend", json=CHAT), "log-unavailable")
            see("log closed, ready?", client.get("/readyz"), "not-ready")
    with open_log(tmp_path / "codes-2.db") as log:
        see("reload, no admin token", TestClient(create_app(lambda: expert, log), base_url="http://localhost").post(
            "/v1/admin/reload"), "reload-off")
        see("no lifespan", TestClient(create_app(lambda: expert, log), base_url="http://localhost").post(
            "/mcp", json={}, headers=MCP), "mcp-not-running")
        with TestClient(create_app(lambda: Exploding(expert), log), base_url="http://localhost") as client:
            see("arithmetic fails", client.post("/v1/recommend", json=CHAT), "facts-not-evaluable")


def _raw(port: int, request: bytes, wait: float = 0) -> tuple[int, str, bytes]:
    """(status, content type, body) of what the server answers to raw bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request)
        data = b""
        while chunk := connection.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers.get("content-type", ""), body


def _on_the_wire(tmp_path, seen: dict) -> None:
    """The codes the service's own HTTP protocol answers before the app runs, from a real `serve`."""
    process, port = start_serve(tmp_path, "--db", str(tmp_path / "wire.db"), "--header-timeout", "0.5")
    try:
        for name, request, code in (
                ("garbage", b"\x00\x01 / HTTP/1.1\r\n\r\n", "invalid-http"),
                ("101 fields", b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n"
                 + b"".join(b"X-%d: 1\r\n" % i for i in range(101)) + b"\r\n", "head-too-large"),
                ("half a head", b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n", "request-timeout")):
            status, content_type, body = _raw(port, request)
            got = code_of(status, content_type, body)
            assert got == code and REGISTRY[code].status == status, (name, status, body[:200])
            seen[code] = name
    finally:
        stop_server(process)


def test_every_code_is_what_some_request_gets(tmp_path, expert, monkeypatch):
    """Each registered code is the answer to a request (with its registered status), and every error those
    requests got carried a registered code; client-gone, whose answer no client reads, is what reading the body of
    a client that left raises."""
    import anyio
    from starlette.requests import ClientDisconnect

    from kentino_expert.service.http_io import BadRequest, read_limited

    seen: dict[str, str] = {}
    _in_process(tmp_path, expert, seen)
    monkeypatch.setattr(mcp_http, "mcp_installed", lambda: False)
    with open_log(tmp_path / "no-mcp.db") as log, \
            TestClient(create_app(lambda: expert, log), base_url="http://localhost") as client:
        missing = client.post("/mcp", json={}, headers=MCP)
        assert checked(missing) == "mcp-not-installed"
        seen["mcp-not-installed"] = "no mcp package"
    _on_the_wire(tmp_path, seen)

    class Leaving:
        headers: dict = {}

        async def stream(self):
            raise ClientDisconnect()
            yield b""

    with pytest.raises(BadRequest) as left:
        anyio.run(read_limited, Leaving())
    seen[left.value.code.code] = "client gone"
    assert sorted(set(REGISTRY) - set(seen)) == [], "codes no request gets"


def _error_status(node) -> int | None:
    """An HTTP error status (400-599) written where a status goes: `status_code=` or `status=`, a "status" entry, an
    int key of a `responses` dict, or a comparison with a name or attribute called status or status_code."""
    def error(value):
        return value.value if isinstance(value, ast.Constant) and type(value.value) is int \
            and 400 <= value.value <= 599 else None
    named = ("status", "status_code")
    if isinstance(node, ast.keyword) and node.arg in named:
        return error(node.value)
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value in named and error(value):
                return error(value)
            if error(key):
                return error(key)
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        if any(getattr(side, "attr", getattr(side, "id", None)) in named for side in sides):
            return next((error(side) for side in sides if error(side)), None)
    return None


def test_no_status_is_written_outside_the_registry():
    """No module of the service writes an HTTP error status itself: each takes it from a code of the registry."""
    written = []
    for path in sorted(SERVICE.glob("*.py")):
        if path.name == "error_codes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if _error_status(node):
                written.append(f"{path.name}:{node.lineno}: {_error_status(node)}")
    assert written == []
    probe = ast.parse("JSONResponse(body, status_code=503)\nresponses = {404: {}}\nif response.status == 401: pass")
    assert sorted(_error_status(n) for n in ast.walk(probe) if _error_status(n)) == [401, 404, 503]


def test_the_registry_is_sound_and_in_the_docs():
    """Codes are unique kebab-case words with a meaning and a status; the JSON-RPC ones carry their JSON-RPC code;
    docs/chat-bots.md holds the generated table."""
    for code in REGISTRY.values():
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", code.code) and code.meaning.endswith(".")
        assert code.code.startswith("mcp-") == (code.jsonrpc is not None) or code.code.startswith("mcp-not-")
    with pytest.raises(ValueError, match="registered twice"):
        error_codes._register("not-found", 404, "Again.")
    guide = (SERVICE.parent.parent / "docs" / "chat-bots.md").read_text(encoding="utf-8")
    assert error_codes.codes_table() in guide
