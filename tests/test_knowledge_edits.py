"""Knowledge edits a product manager could make by mistake: each is refused when the knowledge loads, with one line
at the file, line and column of the value to fix, never a traceback nor a changed answer."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kentino_expert.authoring.scenarios import load_scenarios
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.errors import InputError, KnowledgeError
from kentino_expert.rulecheck import check_directory

ROOT = Path(__file__).resolve().parent.parent


def edited(tmp_path: Path, filename: str, old: str, new: str) -> Path:
    """A copy of knowledge/ with the first `old` of `filename` replaced by `new`."""
    root = tmp_path / "knowledge"
    shutil.copytree(ROOT / "knowledge", root)
    path = root / filename
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return root


def refused(root: Path, match: str) -> KnowledgeError:
    with pytest.raises(KnowledgeError, match=match) as caught:
        load_knowledge(root)
    return caught.value


def refused_at(root: Path, filename: str, match: str, text: str) -> KnowledgeError:
    """The error loading `root` raises (matching `match`), checked to stand in `filename` at the line holding
    `text`: the line to fix, not the entry's first."""
    error = refused(root, match)
    assert error.location.file.endswith(filename), error.location
    assert error.location.line == line_of(root, filename, text), error.location
    return error


def line_of(root: Path, filename: str, text: str) -> int:
    """The 1-based line of the first line of `filename` that holds `text`."""
    lines = (root / filename).read_text(encoding="utf-8").splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def test_bytes_that_are_not_utf8_are_located(tmp_path):
    """A Latin-1 byte in a knowledge file is refused at its line and column (it was a UnicodeDecodeError
    traceback in `recommend`)."""
    root = edited(tmp_path, "gpus.yaml", "    name: NVIDIA L40", "    name: NVIDIA L@40")
    path = root / "gpus.yaml"
    path.write_bytes(path.read_bytes().replace(b"L@40", b"L\xe940"))  # Latin-1's e-acute
    error = refused(root, r"not UTF-8 text: byte 0xe9")
    line = path.read_bytes().split(b"\n").index(b"    name: NVIDIA L\xe940") + 1
    assert (error.location.line, error.location.column) == (line, len("    name: NVIDIA L") + 1)


def test_a_scenario_file_that_is_not_utf8_is_located(tmp_path):
    """A scenario file with a byte that is not UTF-8 names the line and column of that byte."""
    path = tmp_path / "s.yaml"
    path.write_bytes(b"- name: ok\n  facts: {task: inference, model: caf\xe9}\n  expect: {}\n")
    with pytest.raises(InputError, match="not UTF-8 text") as caught:
        load_scenarios([path])
    where = caught.value.location
    assert (where.line, where.column) == (2, len("  facts: {task: inference, model: caf") + 1)


def test_a_field_error_is_at_the_fields_line(tmp_path):
    """A wrong value is reported at its own line, not at the first line of its entry."""
    root = edited(tmp_path, "gpus.yaml", "memory_gb: 48", "memory_gb: 48GB")
    refused_at(root, "gpus.yaml", r"gpus\[2\]\.memory_gb: Input should be a valid number", "memory_gb: 48GB")


def test_an_unknown_intra_node_link_is_located(tmp_path):
    """A misspelt intra_node_link is refused at its line, with the link meant (it had no line at all)."""
    root = edited(tmp_path, "gpus.yaml", "intra_node_link: pcie-gen4-p2p", "intra_node_link: pcie-gen4-pp")
    error = refused_at(root, "gpus.yaml", r"gpus\[2\]\.intra_node_link: unknown link 'pcie-gen4-pp'", "pcie-gen4-pp")
    assert error.suggestion and "pcie-gen4-p2p" in error.suggestion


def test_a_check_shows_the_knowledge_suggestion(tmp_path):
    """`rules check` keeps a knowledge error's suggestion (it printed the message alone)."""
    root = edited(tmp_path, "gpus.yaml", "intra_node_link: pcie-gen4-p2p", "intra_node_link: pcie-gen4-pp")
    (diagnostic,) = check_directory(knowledge_dir=root).diagnostics
    assert "did you mean 'pcie-gen4-p2p'" in str(diagnostic)


def test_an_inter_node_link_inside_the_box_is_refused(tmp_path):
    """A card whose in-box link is a network link is refused: the box's own traffic would be sized at the
    network's speed and the answers would move without a word."""
    root = edited(tmp_path, "gpus.yaml", "intra_node_link: pcie-gen4-p2p", "intra_node_link: roce-100gbe")
    refused_at(root, "gpus.yaml", r"gpus\[2\]\.intra_node_link: 'roce-100gbe' is an inter-node link", "roce-100gbe")


def test_a_shipped_card_without_shapes_is_located(tmp_path):
    """A card Kentino ships with `node_shapes: []` is refused at that line (it had no line at all)."""
    root = edited(tmp_path, "gpus.yaml", "node_shapes: [8]\n    source: NVIDIA L40",
                  "node_shapes: []\n    source: NVIDIA L40")
    refused_at(root, "gpus.yaml", r"gpus\[2\]\.node_shapes: 'l40' is a card Kentino ships", "node_shapes: []")


def test_swapped_head_counts_are_refused(tmp_path):
    """More KV heads than attention heads (the two figures swapped) is refused at kv_heads: it was accepted and
    turned a single node for a 70B chat into data-parallel replicas."""
    root = edited(tmp_path, "models.yaml", "attention_heads: 64\n    kv_heads: 8",
                  "attention_heads: 8\n    kv_heads: 64")
    refused_at(root, "models.yaml", r"models\[1\]\.kv_heads: 64 KV heads is more than the 8 attention_heads",
               "kv_heads: 64")


def test_more_experts_per_token_than_experts_is_refused(tmp_path):
    """A token routed to more experts than the model has is refused at the model's `moe`."""
    root = edited(tmp_path, "models.yaml", "moe: {experts: 8, experts_per_token: 2,",
                  "moe: {experts: 2, experts_per_token: 8,")
    refused_at(root, "models.yaml", r"moe: experts_per_token \(8\) is more than experts \(2\)",
               "experts: 2, experts_per_token: 8")


def test_a_one_gpu_calibration_point_is_refused(tmp_path):
    """A TP calibration point of one GPU is refused at sizing.yaml: it used to divide by zero in every rule
    example, reported at the rules."""
    root = edited(tmp_path, "sizing.yaml", "tp_in_node: {gpus: 8,", "tp_in_node: {gpus: 1,")
    refused_at(root, "sizing.yaml", r"scaling\.calibration\.tp_in_node: gpus: a TP point spans two GPUs or more",
               "tp_in_node: {gpus: 1,")


@pytest.mark.parametrize("old, new, point, scope", [
    ("link: hdr-200g-ib", "link: pcie-gen5-p2p", "tp_across_nodes", "intra-node"),
    ("link: pcie-gen5-p2p", "link: hdr-200g-ib", "tp_in_node", "inter-node")])
def test_a_calibration_link_of_the_wrong_scope_is_refused(tmp_path, old, new, point, scope):
    """The in-node point is calibrated on an in-box link and the across-nodes point on a network."""
    root = edited(tmp_path, "sizing.yaml", old, new)
    refused_at(root, "sizing.yaml", rf"scaling\.calibration\.{point}\.link: '.*' is an {scope} link", f"{point}: ")


def test_a_misspelt_heuristic_key_is_refused_at_its_line(tmp_path):
    """`sectoin:` in heuristics.yaml is refused at its line with the key meant (it was dropped, and the heuristic
    lost its section in every rule page)."""
    root = edited(tmp_path, "heuristics.yaml", "  section: Capacity and fit", "  sectoin: Capacity and fit")
    error = refused_at(root, "heuristics.yaml", r"heuristic 'H-FIT-CAPACITY': unknown key 'sectoin'", "sectoin:")
    assert error.suggestion and "section" in error.suggestion


def test_an_empty_heuristic_section_is_no_section(tmp_path):
    """`section:` left empty is no section, not the text "None" in every page that quotes the heuristic."""
    root = edited(tmp_path, "heuristics.yaml", "  section: Capacity and fit", "  section:")
    assert load_knowledge(root).heuristics["H-FIT-CAPACITY"]["section"] == ""


@pytest.mark.parametrize("filename, old, new, field", [
    ("gpus.yaml", "memory_gb: 48", "memory_gb: true", r"gpus\[2\]\.memory_gb"),
    ("models.yaml", "layers: 80", "layers: true", r"\.layers"),
    ("gpus.yaml", "node_shapes: [", "node_shapes: [true, ", r"\.node_shapes"),
    ("sizing.yaml", "kv_cache_bytes: 2.0", "kv_cache_bytes: true", r"kv_cache_bytes"),
])
def test_true_or_false_where_a_number_goes_is_refused(tmp_path, filename, old, new, field):
    """YAML's true where a number goes is refused at its line: pydantic had read it as 1, a 1 GB card or a
    one-layer model, sized without a word."""
    root = edited(tmp_path, filename, old, new)
    refused_at(root, filename, field + r".*expected a number, not true or false", new)


def test_replay_of_a_decision_whose_model_left_the_knowledge(tmp_path, expert):
    """Replay under knowledge without the decision's model is one line naming the digest drift, the directories
    read and the fact that no longer evaluates, and exits 1 (changed)."""
    from click.testing import CliRunner

    from kentino_expert.cli.main import main
    from kentino_expert.decisions.connect import open_log
    facts = {"task": "inference", "model": "qwen2.5-14b"}
    db = str(tmp_path / "log.db")
    with open_log(db) as log:
        decision_id = log.record(facts, expert.recommend(facts), "cli")
    text = (ROOT / "knowledge" / "models.yaml").read_text(encoding="utf-8")
    start = text.index("  - id: qwen2.5-14b")
    root = edited(tmp_path, "models.yaml", text[start:text.index("  - id:", start + 1)], "")
    result = CliRunner().invoke(main, ["decisions", "replay", decision_id, "--db", db, "--knowledge", str(root)])
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1, result.output
    assert result.output.startswith("changed (digest drift: ") and f"knowledge: {root})" in result.output
    assert "no longer evaluate: model: unknown model 'qwen2.5-14b'" in result.output


def test_commands_that_load_the_knowledge_show_its_code(tmp_path):
    """`test`, `rules diff` and `rules list` print a knowledge error with its documented code E001, as `rules
    check` does (they printed the location and message without a code)."""
    from click.testing import CliRunner

    from kentino_expert.cli.main import main
    root = edited(tmp_path, "gpus.yaml", "memory_gb: 96", "memory_gb: 0")
    line = line_of(root, "gpus.yaml", "memory_gb: 0")
    for command in (["test"], ["rules", "diff", "--base", str(ROOT / "rules")], ["rules", "list"]):
        result = CliRunner().invoke(main, [*command, "--knowledge", str(root)])
        assert result.exit_code == 2, result.output
        assert f"gpus.yaml:{line}:16: E001: gpus[0].memory_gb: Input should be greater than 0" in result.output


def test_a_heuristic_no_rule_encodes_is_warned_at_its_entry(tmp_path):
    """W304 stands at the new heuristic's own line in the knowledge directory checked, not at 1:1 of the
    repository's knowledge/heuristics.yaml."""
    root = edited(tmp_path, "heuristics.yaml", "heuristics:\n",
                  "heuristics:\n- id: H-NEW-ADVICE\n  section: Capacity and fit\n  text: Advice no rule encodes yet.\n")
    root = root.rename(tmp_path / "k-copy")
    found = [d for d in check_directory(ROOT / "rules", root).diagnostics if d.code == "W304"]
    line = line_of(root, "heuristics.yaml", "H-NEW-ADVICE")
    assert [str(d.location) for d in found] == [f"k-copy/heuristics.yaml:{line}:3"]
