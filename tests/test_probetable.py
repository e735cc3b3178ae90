"""knowledge/probes.yaml is loaded and checked with the catalog: a broken file fails loading at its line and column,
like every other knowledge file, instead of being ignored."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kentino_expert.answer.questions import probe_values, rank_questions
from kentino_expert.cli.main import main
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.domain.probetable import MAX_PROBE_VALUES
from kentino_expert.errors import KnowledgeError
from kentino_expert.expert import Expert
from kentino_expert.ruleset.compiler import digest_of

ROOT = Path(__file__).resolve().parent.parent


def knowledge_with(tmp_path: Path, probes: str | None) -> Path:
    """A copy of the bundled knowledge with `probes` as its probes.yaml (None: no probes.yaml)."""
    target = tmp_path / "knowledge"
    shutil.copytree(ROOT / "knowledge", target)
    if probes is None:
        (target / "probes.yaml").unlink()
    else:
        (target / "probes.yaml").write_text(probes, encoding="utf-8")
    return target


def test_the_bundled_table_is_the_files():
    """The loaded table holds every entry of the bundled probes.yaml, in its order, with its values."""
    raw = yaml.safe_load((ROOT / "knowledge" / "probes.yaml").read_text(encoding="utf-8"))["probes"]
    probes = load_knowledge(ROOT / "knowledge").probes
    assert list(probes) == list(raw)
    assert all(probes[fact] == tuple(values) for fact, values in raw.items())


BROKEN = [
    ("probes:\n  concurrancy: [1, 16]\n", r"probes.concurrancy: not a fact a question asks for "
                                          r"\(did you mean 'concurrency'\?\)", 2),
    ("probes:\n  latency: [batch]\n", "probes.latency: an enumerated fact is probed with every value", 2),
    ("probes:\n  task: [inference]\n", "probes.task: not a fact a question asks for", 2),
    ("probes:\n  concurrency: 16\n", r"probes.concurrency: expected a list of one or more values", 2),
    ("probes:\n  concurrency: []\n", r"probes.concurrency: expected a list of one or more values", 2),
    ("probes:\n  qps: [10]\n  concurrency:\n    - 1\n    - -3\n", r"probes.concurrency\[1\]: .*greater than", 5),
    ("probes:\n  model: [llama-3.1-8b, lama-3.1-70b]\n", r"probes.model\[1\]: unknown model 'lama-3.1-70b' "
                                                        r"\(did you mean 'llama-3.1-70b'\?\)", 2),
    ("probes:\n  gpu: [h100-sxm, rtx-9999]\n", r"probes.gpu\[1\]: unknown gpu 'rtx-9999'", 2),
    ("probes:\n  training_tokens: [10B, ten]\n", r"probes.training_tokens\[1\]: 'ten' is not a token count", 2),
    ("probes:\n  concurrency: [true]\n", r"probes.concurrency\[0\]: ", 2),
    ("probes: [1, 2]\n", "expected a top-level 'probes:' mapping", 1),
    ("probes:\n  concurrency: [1, 2\n", "an unclosed \\[", 2),
    ("probes:\n  concurrency: [" + ", ".join(["1"] * (MAX_PROBE_VALUES + 1)) + "]\n",
     f"probes.concurrency: {MAX_PROBE_VALUES + 1} values, at most {MAX_PROBE_VALUES}", 2),
]


@pytest.mark.parametrize("text,message,line", BROKEN, ids=[f"case{i}" for i in range(len(BROKEN))])
def test_a_broken_table_fails_loading_at_its_line(tmp_path, text, message, line):
    """Each way probes.yaml can be wrong is a KnowledgeError naming probes.yaml, the line and what is wrong."""
    root = knowledge_with(tmp_path, text)
    with pytest.raises(KnowledgeError, match=message) as caught:
        load_knowledge(root)
    assert caught.value.location.file.endswith("probes.yaml")
    assert caught.value.location.line == line


def test_catalog_aliases_are_accepted(tmp_path):
    """A model named by one of its aliases probes as the catalog entry the caller could name the same way."""
    root = knowledge_with(tmp_path, "probes:\n  model: [QWEN3-235B, llama-3.1-8b]\n")
    assert load_knowledge(root).probes["model"] == ("QWEN3-235B", "llama-3.1-8b")


def test_without_a_table_only_enumerations_and_catalog_picks_are_probed(tmp_path):
    """A knowledge dir with no probes.yaml loads; numeric facts then have no probe values, models the catalog's
    small, medium and large ones, and questions are still ranked."""
    expert = Expert(knowledge_dir=knowledge_with(tmp_path, None))
    assert expert.knowledge.probes == {}
    assert probe_values(expert, "concurrency") == ()
    assert len(probe_values(expert, "model")) == 3
    questions = rank_questions(expert, {"task": "inference"})
    assert questions and all(not q.probes for q in questions if q.fact == "concurrency")


def test_the_table_is_part_of_the_rule_sets_version(tmp_path):
    """Editing probes.yaml changes the version an answer names, as it changes the questions answers carry."""
    first = load_knowledge(knowledge_with(tmp_path / "a", "probes:\n  concurrency: [1, 16]\n"))
    second = load_knowledge(knowledge_with(tmp_path / "b", "probes:\n  concurrency: [1, 64]\n"))
    assert "probes.yaml" in first.files
    assert digest_of({}, first) != digest_of({}, second)


def test_the_cli_names_the_file_line_and_column(tmp_path):
    """`recommend` with a broken probes.yaml exits non-zero with one line naming probes.yaml:line:col, no traceback."""
    root = knowledge_with(tmp_path, "probes:\n  concurrency: [1, -3]\n")
    facts = tmp_path / "facts.yaml"
    facts.write_text("task: inference\nmodel: llama-3.1-8b\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["recommend", str(facts), "--knowledge", str(root)])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output
    assert "probes.yaml:2:" in lines[0] and "probes.concurrency[1]" in lines[0]


def test_a_reload_onto_a_broken_table_keeps_the_old_rules(tmp_path):
    """The service refuses a reload onto a broken probes.yaml (409, the error on /readyz) and keeps answering."""
    pytest.importorskip("fastapi", reason="the HTTP service needs fastapi")
    pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")
    from fastapi.testclient import TestClient

    from kentino_expert.decisions.connect import open_log
    from kentino_expert.service.app import create_app
    root = knowledge_with(tmp_path, "probes:\n  concurrency: [1, 16]\n")
    with open_log(tmp_path / "d.db") as log, \
            TestClient(create_app(expert_factory=lambda: Expert(knowledge_dir=root), log=log, admin_token="admin"),
                       base_url="http://localhost", headers={"authorization": "Bearer admin"}) as client:
        (root / "probes.yaml").write_text("probes:\n  concurrency: [1, 16]\n  qps: [0]\n", encoding="utf-8")
        assert client.post("/v1/admin/reload").status_code == 409
        assert "probes.yaml:3:" in client.get("/readyz").json()["last_reload_error"]
        answer = client.post("/v1/recommend", json={"task": "inference", "model": "llama-3.1-8b"})
        assert answer.status_code == 200
