"""POST /v1/admin/reload into a hostile rule set (FastAPI's TestClient): refused with 409 and located
diagnostics, recorded in /readyz, while the old rules keep answering; any failure of a build is a 409."""
from __future__ import annotations

import shutil
import threading

import pytest

pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")

from fastapi.testclient import TestClient  # noqa: E402

import hostile_rules as hostile  # noqa: E402
from kentino_expert.decisions.connect import open_log  # noqa: E402
from kentino_expert.errors import RuleFileError  # noqa: E402
from kentino_expert.expert import Expert  # noqa: E402
from kentino_expert.paths import bundled  # noqa: E402
from kentino_expert.service.app import create_app  # noqa: E402

CHAT = {"task": "inference", "model": "llama-3.1-70b"}


@pytest.fixture()
def log(tmp_path):
    with open_log(tmp_path / "decisions.db") as opened:
        yield opened


def _swap_in(served, hostile_set):
    """Replace the served directory's files with those of `hostile_set` (what an operator's deploy does)."""
    shutil.rmtree(served)
    shutil.copytree(hostile_set.directory, served)


def _assert_refused_and_serving(client, response, old_digest):
    assert response.status_code == 409, response.text
    assert response.json()["serving_digest"] == old_digest
    ready = client.get("/readyz").json()
    assert ready["ready"] and ready["digest"] == old_digest and ready["last_reload_error"]
    answer = client.post("/v1/recommend", json=CHAT)
    assert answer.status_code == 200 and answer.json()["ruleset"]["digest"] == old_digest
    return response.json()["diagnostics"]


@pytest.mark.parametrize("attack, code", [("or_chain", "E202"), ("overflow", "E206")])
def test_reload_into_an_attack_is_refused_where_it_is(tmp_path, log, attack, code):
    """The served directory edited into an attack: 409 naming its file:line:col; the old rules answer on."""
    served = tmp_path / "rules"
    shutil.copytree(bundled("rules"), served)
    attack_set = getattr(hostile, attack)(tmp_path / "attacks")
    with TestClient(create_app(rules_dir=served, log=log, admin_token="admin"), base_url="http://localhost",
                    headers={"authorization": "Bearer admin"}) as client:
        old_digest = client.get("/readyz").json()["digest"]
        _swap_in(served, attack_set)
        diagnostics = _assert_refused_and_serving(client, client.post("/v1/admin/reload"), old_digest)
        assert [(d["code"], d["file"], d["line"] > 0) for d in diagnostics] == [(code, f"rules/{hostile.FILE}", True)]


def test_reload_of_a_set_that_breaks_the_build_is_a_409_not_a_500(tmp_path, log):
    """A YAML integer of 5,000 digits (a ValueError while reading, not a located error) is refused, recorded."""
    served = tmp_path / "rules"
    shutil.copytree(bundled("rules"), served)
    with TestClient(create_app(rules_dir=served, log=log, admin_token="admin"), raise_server_exceptions=False,
                    base_url="http://localhost", headers={"authorization": "Bearer admin"}) as client:
        old_digest = client.get("/readyz").json()["digest"]
        flow = served / "flow.yaml"
        flow.write_text(flow.read_text().replace("priority: 320", "priority: " + "1" * 5000, 1))
        diagnostics = _assert_refused_and_serving(client, client.post("/v1/admin/reload"), old_digest)
        assert diagnostics and diagnostics[0]["severity"] == "error"


def test_a_custom_factory_that_raises_anything_is_a_409(tmp_path, log):
    """Without the sandbox (a factory of one's own), a build that raises a non-Kentino error is still refused."""
    built = []

    def factory():  # the first build serves; every later one fails the way a bug in a build would
        if built:
            raise ValueError("a build step broke")
        built.append(Expert())
        return built[0]

    with TestClient(create_app(expert_factory=factory, log=log, admin_token="admin"), base_url="http://localhost",
                    headers={"authorization": "Bearer admin"}) as client:
        old_digest = client.get("/readyz").json()["digest"]
        diagnostics = _assert_refused_and_serving(client, client.post("/v1/admin/reload"), old_digest)
        assert diagnostics[0]["code"] and "building the rule set failed" in diagnostics[0]["message"]
        assert "a build step broke" in diagnostics[0]["message"]


def test_a_reload_signalled_by_another_worker_runs_beside_the_requests(tmp_path):
    """Worker B sees worker A's reload mark: B's request is answered by its current rules at once while B
    tries the new set in a thread; a hostile set is then refused in B too, recorded in its state."""
    from kentino_expert.service.app import _default_factory
    from kentino_expert.service.holder import ExpertHolder
    served, mark = tmp_path / "rules", tmp_path / "reload-mark"
    shutil.copytree(bundled("rules"), served)
    mark.touch()
    worker_a = ExpertHolder(_default_factory(served, None), str(mark))
    worker_b = ExpertHolder(_default_factory(served, None), str(mark))
    old_digest = worker_b.serving.expert.ruleset.digest
    _swap_in(served, hostile.or_chain(tmp_path / "attack"))
    with pytest.raises(RuleFileError, match="E202"):
        worker_a.reload()  # refused: the mark is not touched, so B is not signalled
    mark.write_text("a reload elsewhere")  # what a worker's accepted reload does
    first = worker_b.snapshot()
    assert first.generation == 1 and first.expert.ruleset.digest == old_digest
    reloader = next(t for t in threading.enumerate() if t.name == "kentino-reload")
    reloader.join(timeout=60)
    assert not reloader.is_alive()
    assert worker_b.serving.generation == 1 and "E202" in worker_b.serving.last_error
    assert worker_b.snapshot().expert.ruleset.digest == old_digest
