"""The OpenAPI document as a tool importer reads it: explicit operation ids, descriptions on every operation and
field, real response schemas that real responses match, and the operators' routes left out."""
from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the HTTP service needs fastapi")
jsonschema = pytest.importorskip("jsonschema", reason="validating responses needs jsonschema")

from fastapi.testclient import TestClient  # noqa: E402

from kentino_expert.decisions.connect import open_log  # noqa: E402
from kentino_expert.service.app import create_app  # noqa: E402

OPERATIONS = {("post", "/v1/recommend"): "recommend", ("get", "/v1/schema/facts"): "getFactsSchema",
              ("get", "/v1/rules"): "listRules", ("get", "/v1/decisions"): "listDecisions",
              ("get", "/v1/decisions/{decision_id}"): "getDecision",
              ("get", "/v1/decisions/{decision_id}/explain"): "explainDecision"}
FACTS = {"task": "full-finetune", "model": "llama-3.1-70b"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(client, OpenAPI document) of an app with a read token."""
    with open_log(tmp_path_factory.mktemp("openapi") / "d.db") as log, \
            TestClient(create_app(log=log, read_token="t"), base_url="http://localhost",
                       headers={"authorization": "Bearer t"}) as client:
        yield client, client.get("/openapi.json").json()


def _operations(spec):
    return {(method, path): operation for path, item in spec["paths"].items() for method, operation in item.items()}


def test_every_operation_has_its_id_a_description_and_a_real_200_schema(served):
    """The six tools, each with its explicit operation id, summary and description, and a 200 response whose
    schema is not empty; health, readiness, reload, MCP and the browser are not offered as tools."""
    spec = served[1]
    operations = _operations(spec)
    assert {key: op["operationId"] for key, op in operations.items()} == OPERATIONS
    for operation in operations.values():
        assert operation["summary"] and len(operation["description"]) > 40
        content = operation["responses"]["200"]["content"]
        assert content and all(media["schema"] for media in content.values()), operation["operationId"]
    for path in ("/healthz", "/readyz", "/v1/admin/reload", "/mcp", "/ui", "/ui/decisions/{decision_id}"):
        assert path not in spec["paths"]
    assert {"readToken", "adminToken"} <= set(spec["components"]["securitySchemes"])


def test_every_field_of_every_response_schema_is_described(served):
    """Each property of each component schema (the answer, questions, why-not, the compact view, listings) says
    what it is, and so does each query parameter."""
    schemas = served[1]["components"]["schemas"]
    assert {"Decision", "CompactDecision", "Question", "WhyNot", "Answer", "DecisionListing", "LoggedDecision",
            "RuleListing"} <= set(schemas)
    undescribed = [f"{name}.{field}" for name, schema in schemas.items()
                   for field, spec in schema.get("properties", {}).items() if not spec.get("description")]
    assert undescribed == []
    for operation in _operations(served[1]).values():
        for parameter in operation.get("parameters", []):
            assert parameter.get("description"), (operation["operationId"], parameter["name"])


def _validate(spec, method: str, path: str, response) -> None:
    """The response body against the schema the document declares for its status (refs into the components)."""
    declared = _operations(spec)[(method, path)]["responses"][str(response.status_code)]
    schema = declared["content"]["application/json"]["schema"]
    jsonschema.Draft202012Validator({**schema, "components": spec["components"]}).validate(response.json())


def test_real_responses_match_their_declared_schemas(served):
    """A full and a compact decision, the logged decision, a listing, the rules and both facts schemas match what
    the document declares (schemathesis checks the same on generated requests)."""
    client, spec = served
    full = client.post("/v1/recommend", json={**FACTS, "session_id": "s", "turn": 1})
    compact = client.post("/v1/recommend?view=compact", json=FACTS)
    decision_id = full.json()["decision_id"]
    for method, path, response in [
            ("post", "/v1/recommend", full), ("post", "/v1/recommend", compact),
            ("get", "/v1/decisions/{decision_id}", client.get(f"/v1/decisions/{decision_id}")),
            ("get", "/v1/decisions", client.get("/v1/decisions", params={"limit": 1})),
            ("get", "/v1/rules", client.get("/v1/rules")),
            ("get", "/v1/schema/facts", client.get("/v1/schema/facts")),
            ("get", "/v1/schema/facts", client.get("/v1/schema/facts", params={"format": "tool"})),
            ("get", "/v1/decisions/{decision_id}", client.get("/v1/decisions/nope"))]:
        assert response.status_code in (200, 404)
        _validate(spec, method, path, response)


def test_a_response_that_breaks_its_schema_is_caught(served):
    """The check can fail: a decision with a status outside the vocabulary, or a listing without its cursor, is
    refused by the declared schemas."""
    client, spec = served
    response = client.post("/v1/recommend", json=FACTS)

    class Broken:
        status_code = 200

        def __init__(self, body):
            self.body = body

        def json(self):
            return self.body

    with pytest.raises(jsonschema.ValidationError):
        _validate(spec, "post", "/v1/recommend", Broken({**response.json(), "status": "maybe"}))
    with pytest.raises(jsonschema.ValidationError):
        _validate(spec, "get", "/v1/decisions", Broken({"decisions": []}))
