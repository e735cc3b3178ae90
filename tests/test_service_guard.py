"""The service's guard: Host allowlist, read/admin tokens, JSON-only POST bodies, and the OpenAPI security."""
from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the HTTP service needs fastapi")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")

from fastapi.testclient import TestClient  # noqa: E402

from kentino_expert.decisions.connect import open_log  # noqa: E402
from kentino_expert.service.app import create_app  # noqa: E402
from kentino_expert.service.guard import (  # noqa: E402
    check_host_entry,
    default_allowed_hosts,
    host_allowed,
    is_json_media_type,
    is_loopback,
)

CHAT = {"task": "inference", "model": "llama-3.1-70b"}
LOG_READS = ["/v1/decisions", "/v1/decisions/{id}", "/v1/decisions/{id}/explain",
             "/v1/decisions/{id}/explain?format=html"]


@pytest.fixture()
def log(tmp_path):
    """A fresh SQLite decision log holding nothing yet."""
    with open_log(tmp_path / "decisions.db") as opened:
        yield opened


def client_for(log, **access) -> TestClient:
    """A TestClient calling as http://localhost, over an app with the given tokens / allowed hosts."""
    return TestClient(create_app(log=log, **{"read_token": "", "admin_token": "", **access}),
                      base_url="http://localhost")


def _one_decision(client) -> str:
    return client.post("/v1/recommend", json={**CHAT, "session_id": "customer-7"}).json()["decision_id"]


# -- Host -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("host, allowed", [
    ("localhost", True), ("localhost:8765", True), ("LOCALHOST:1", True), ("127.0.0.1:8765", True),
    ("[::1]:8765", True), ("[::1]", True), ("evil.example", False), ("evil.example:8765", False),
    ("localhost.evil.example", False), ("127.0.0.1.nip.io", False), ("", False), ("[::2]:80", False),
    ("localhost:65535", True), ("localhost:99999999999", False), ("localhost:65536", False), ("localhost:0", False),
    ("localhost:abc", False), ("localhost:", False), ("localhost:\u0663", False), ("[::1]:abc", False),
    ("[::1]:99999", False), ("[::1]x", False)])
def test_default_host_allowlist(host, allowed):
    """The loopback names are allowed with or without a port; any other name (a rebound DNS name) is not, nor a
    port that cannot be one (out of 1-65535, not ASCII digits, empty)."""
    assert host_allowed(host, ("localhost", "127.0.0.1", "[::1]")) is allowed


def test_host_entries_with_port_and_wildcard():
    """An entry with a port allows only that port; '*' allows any Host, even none."""
    assert host_allowed("api.example.com:443", ("api.example.com:443",))
    assert not host_allowed("api.example.com:8443", ("api.example.com:443",))
    assert host_allowed("anything", ("*",)) and host_allowed("", ("*",))


@pytest.mark.parametrize("entry", ["http://api.example.com", "api.example.com/v1", "", "a b", "fe80::1",
                                   "api.example.com:99999", "api.example.com:https", "[::1]:0"])
def test_bad_allowed_host_entries(entry):
    """A URL, a path, an empty name, an unbracketed IPv6 address or a port out of 1-65535 is refused with a
    message."""
    with pytest.raises(ValueError, match="not a host name"):
        check_host_entry(entry)


@pytest.mark.parametrize("bind, loopback", [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                            ("localhost", True), ("0.0.0.0", False), ("::", False),
                                            ("10.1.2.3", False), ("example.com", False)])
def test_loopback_binds(bind, loopback):
    """Only a loopback bind gets a default allowlist (which names the bound address too)."""
    assert is_loopback(bind) is loopback
    default = default_allowed_hosts(bind)
    assert (default is not None) is loopback
    if bind == "127.0.0.2":
        assert "127.0.0.2" in default and "localhost" in default


def test_foreign_host_reads_nothing(log):
    """`Host: evil.example` (DNS rebinding) gets a 400 naming the host field, on every route."""
    with client_for(log) as client:
        _one_decision(client)
        for path in ("/v1/decisions", "/healthz", "/openapi.json"):
            response = client.get(path, headers={"host": "evil.example"})
            assert response.status_code == 400 and response.json()["detail"][0]["field"] == "host"
        assert client.post("/v1/recommend", json=CHAT, headers={"host": "evil.example"}).status_code == 400
        assert client.get("/v1/decisions", headers={"host": "localhost:8765"}).status_code == 200
        for port in ("99999999999", "65536", "x"):
            refused = client.get("/v1/rules", headers={"host": f"localhost:{port}"})
            assert refused.status_code == 400 and refused.json()["detail"][0]["field"] == "host", port


def test_two_host_headers_are_refused(log):
    """A request with two Host headers is refused rather than judged by one of them."""
    app = create_app(log=log, read_token="", admin_token="")
    with TestClient(app, base_url="http://localhost") as client:
        response = client.get("/healthz", headers=[("host", "localhost"), ("host", "evil.example")])
        same = client.get("/healthz", headers=[("host", "localhost"), ("host", "localhost")])
    assert response.status_code == 400
    assert same.status_code == 400
    assert same.json()["detail"] == [{"field": "host", "message": "more than one Host header"}]


def test_a_meta_key_in_both_the_body_and_the_query_is_refused(log):
    """session_id in the body and the query is a 422 naming it (which was meant cannot be known), and logs nothing."""
    with client_for(log) as client:
        response = client.post("/v1/recommend?session_id=from-query", json={**CHAT, "session_id": "from-body"})
        turn = client.post("/v1/recommend?turn=7", json={**CHAT, "turn": 7})
    assert response.status_code == 422 and response.json()["detail"][0]["field"] == "session_id"
    assert turn.status_code == 422 and turn.json()["detail"][0]["field"] == "turn"
    assert log.list() == []


def test_a_misspelt_kind_filter_is_refused(log):
    """GET /v1/decisions?kind=single-nod is a 422 naming the kinds, not an empty page."""
    with client_for(log) as client:
        _one_decision(client)
        wrong = client.get("/v1/decisions", params={"kind": "single-nod"})
        right = client.get("/v1/decisions", params={"kind": "single-node"})
    assert wrong.status_code == 422 and wrong.json()["detail"][0]["field"] == "kind"
    assert "single-node-int4" in wrong.json()["detail"][0]["message"]
    assert right.status_code == 200 and len(right.json()["decisions"]) == 1


# -- tokens -----------------------------------------------------------------------------------------

def test_no_token_configured_reads_are_open_and_reload_is_off(log):
    """With no token at all the log reads (loopback use), and HTTP reload answers 403 saying how to enable it."""
    with client_for(log) as client:
        decision = _one_decision(client)
        for path in LOG_READS:
            assert client.get(path.replace("{id}", decision)).status_code == 200
        refused = client.post("/v1/admin/reload")
        assert refused.status_code == 403 and "KENTINO_ADMIN_TOKEN" in refused.json()["detail"][0]["message"]
        assert client.get("/readyz").json()["generation"] == 1


@pytest.mark.parametrize("configured", [{"read_token": "r-token"}, {"admin_token": "a-token"},
                                        {"read_token": "r-token", "admin_token": "a-token"}])
def test_any_token_configured_makes_every_log_read_need_one(log, configured):
    """With either token configured, listing, showing and explaining without a token are 401 with a challenge."""
    with client_for(log, **configured) as client:
        decision = _one_decision(client)
        for path in LOG_READS:
            for header in ({}, {"authorization": "Bearer wrong"}, {"authorization": "Basic r-token"}):
                response = client.get(path.replace("{id}", decision), headers=header)
                assert response.status_code == 401, (path, header)
                assert response.headers["www-authenticate"].startswith('Bearer realm="kentino-expert"')
                assert "customer-7" not in response.text and decision not in response.text
            assert client.head(path.replace("{id}", decision)).status_code == 401


def test_read_token_reads_but_does_not_reload(log):
    """The read token reads the log and explanations; on reload it is a 403 with insufficient_scope."""
    with client_for(log, read_token="r-token", admin_token="a-token") as client:
        decision = _one_decision(client)
        reader = {"authorization": "Bearer r-token"}
        for path in LOG_READS:
            assert client.get(path.replace("{id}", decision), headers=reader).status_code == 200
        refused = client.post("/v1/admin/reload", headers=reader)
        assert refused.status_code == 403
        assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]


def test_admin_token_reloads_and_reads(log):
    """The admin token implies read; without it reload is a 401 whose challenge names the admin scope."""
    with client_for(log, read_token="r-token", admin_token="a-token") as client:
        decision = _one_decision(client)
        admin = {"authorization": "Bearer a-token"}
        assert client.get(f"/v1/decisions/{decision}", headers=admin).json()["session_id"] == "customer-7"
        missing = client.post("/v1/admin/reload")
        assert missing.status_code == 401 and 'scope="admin"' in missing.headers["www-authenticate"]
        assert client.post("/v1/admin/reload", headers=admin).json()["generation"] == 2


def test_tokens_come_from_the_environment(log, monkeypatch):
    """KENTINO_READ_TOKEN and KENTINO_ADMIN_TOKEN configure an app built without explicit tokens."""
    monkeypatch.setenv("KENTINO_READ_TOKEN", "env-read")
    monkeypatch.setenv("KENTINO_ADMIN_TOKEN", "env-admin")
    with TestClient(create_app(log=log), base_url="http://localhost") as client:
        assert client.get("/v1/decisions").status_code == 401
        assert client.get("/v1/decisions", headers={"authorization": "Bearer env-read"}).status_code == 200
        assert client.post("/v1/admin/reload", headers={"authorization": "Bearer env-admin"}).status_code == 200


def test_the_public_routes_need_no_token(log):
    """Recommending, the schema, the rules, health and the OpenAPI document stay open when tokens are set."""
    with client_for(log, read_token="r-token", admin_token="a-token") as client:
        assert client.post("/v1/recommend", json=CHAT).status_code == 200
        for path in ("/v1/schema/facts", "/v1/rules", "/healthz", "/readyz", "/openapi.json"):
            assert client.get(path).status_code == 200, path


# -- content type -----------------------------------------------------------------------------------

@pytest.mark.parametrize("value, ok", [
    ("application/json", True), ("application/json; charset=utf-8", True), ("Application/JSON;charset=\"UTF-8\"", True),
    ("application/problem+json", True), ("application/json; charset=latin-1", False), ("text/plain", False),
    ("application/x-www-form-urlencoded", False), ("multipart/form-data; boundary=x", False), ("", False),
    ("text/json", False), ("application/jsonp", False)])
def test_json_media_types(value, ok):
    """application/json and application/*+json (UTF-8 only) are JSON; the types a form can send are not."""
    assert is_json_media_type(value) is ok


@pytest.mark.parametrize("headers", [{"content-type": "text/plain"},
                                     {"content-type": "application/x-www-form-urlencoded"},
                                     {}, {"content-type": "multipart/form-data; boundary=x"}])
def test_recommend_takes_json_only(log, headers):
    """A body labelled as anything but JSON, or not labelled, is a 415 naming content-type, and nothing is logged."""
    with client_for(log) as client:
        response = client.post("/v1/recommend", content=b'{"task": "inference"}', headers=headers)
        assert response.status_code == 415 and response.json()["detail"][0]["field"] == "content-type"
        assert client.get("/v1/decisions").json()["decisions"] == []


def test_cross_site_reload_is_refused(log):
    """The issue's request (text/plain from a foreign Origin) cannot reload, with or without an admin token."""
    attack = {"content-type": "text/plain", "origin": "http://evil.example"}
    with client_for(log) as client:
        assert client.post("/v1/admin/reload", content=b"x", headers=attack).status_code == 403
    with client_for(log, admin_token="a-token") as client:
        assert client.post("/v1/admin/reload", content=b"x", headers=attack).status_code == 401
        with_token = {**attack, "authorization": "Bearer a-token"}
        assert client.post("/v1/admin/reload", content=b"x", headers=with_token).status_code == 415
        assert client.get("/readyz").json()["generation"] == 1


# -- OpenAPI ----------------------------------------------------------------------------------------

def test_openapi_declares_the_security(log):
    """Bearer schemes, per-operation security (read; anonymous only when no token is set) and 401 on log reads."""
    with client_for(log, read_token="r-token") as client:
        spec = client.get("/openapi.json").json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["readToken"] == {**schemes["readToken"], "type": "http", "scheme": "bearer"}
    assert schemes["adminToken"]["scheme"] == "bearer"
    for path in ("/v1/decisions", "/v1/decisions/{decision_id}", "/v1/decisions/{decision_id}/explain"):
        operation = spec["paths"][path]["get"]
        assert operation["security"] == [{"readToken": []}, {"adminToken": []}] and "401" in operation["responses"]
    assert "/v1/admin/reload" not in spec["paths"]  # for operators, not for tool importers
    assert spec["paths"]["/v1/recommend"]["post"]["security"] == []  # public, said so
    error = spec["paths"]["/v1/decisions"]["get"]["responses"]["401"]["content"]["application/json"]["schema"]
    assert error == {"$ref": "#/components/schemas/Error"}
    with client_for(log) as client:
        open_spec = client.get("/openapi.json").json()
    assert {} in open_spec["paths"]["/v1/decisions"]["get"]["security"]


# -- scopes by declaration --------------------------------------------------------------------------

def test_a_route_without_a_declared_scope_stops_the_app(log):
    """A route added without a scope in scopes.ROUTES (here under no protected prefix, where it used to be public by
    default) makes the app refuse to start, naming it; so does a declaration no route serves."""
    from kentino_expert.service.scopes import ROUTES, Scope, UndeclaredRoute, check_routes

    app = create_app(log=log)
    app.add_api_route("/v1/customers", lambda: {"everything": "leaked"})
    with pytest.raises(UndeclaredRoute, match="route /v1/customers has no scope"), \
            TestClient(app, base_url="http://localhost"):
        pass
    with pytest.raises(UndeclaredRoute, match="declares /v1/gone, which no route serves"):
        check_routes(create_app(log=log).router.routes, {**ROUTES, "/v1/gone": Scope("admin", "gone")})


def test_each_route_gets_the_scope_it_declares(log):
    """With both tokens configured, every declared route without a token is refused by its declaration alone (a read
    route 401, the admin route 401, a page 401 with a Basic challenge) and a public one is not; the OpenAPI
    document's security of every operation is the one its declaration gives."""
    from kentino_expert.service.scopes import ADMIN, PUBLIC, READ, ROUTES, security_of

    with client_for(log, read_token="r-token", admin_token="a-token") as client:
        spec = client.get("/openapi.json").json()
        for path, declared in ROUTES.items():
            url = path.replace("{decision_id}", "d" * 32)
            response = client.post(url, json={"task": "inference"}) if path in ("/v1/admin/reload", "/mcp") \
                else client.get(url)
            refused = response.status_code in (401, 403) and response.headers.get("www-authenticate")
            assert bool(refused) == (declared.needs != PUBLIC), (path, response.status_code)
            if declared.page:
                assert response.headers["www-authenticate"].startswith("Basic ")
            for operation in spec["paths"].get(path, {}).values():
                assert operation["security"] == security_of(declared, True), path
    assert {scope.needs for scope in ROUTES.values()} == {PUBLIC, READ, ADMIN}
    assert set(spec["paths"]) <= set(ROUTES)
