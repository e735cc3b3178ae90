"""knowledge/sizing.yaml is checked against the constants the sizing reads when it is loaded: a missing, misspelt or
out-of-range constant, or a name the catalog lacks, is an error at its line, never a KeyError in a request."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.domain.sizing_schema import SizingConstants
from kentino_expert.errors import KnowledgeError

ROOT = Path(__file__).resolve().parent.parent
SIZING = (ROOT / "knowledge" / "sizing.yaml").read_text(encoding="utf-8")


def knowledge_with_sizing(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the bundled knowledge whose sizing.yaml has its first `old` replaced by `new`."""
    assert old in SIZING, old
    target = tmp_path / "knowledge"
    shutil.copytree(ROOT / "knowledge", target)
    (target / "sizing.yaml").write_text(SIZING.replace(old, new, 1), encoding="utf-8")
    return target


def test_the_bundled_file_has_every_constant():
    """The bundled sizing.yaml validates, and the schema names every constant it has (nothing unchecked)."""
    data = yaml.safe_load(SIZING)
    checked = SizingConstants.model_validate(data).model_dump(exclude_none=True)
    assert checked.keys() == data.keys()
    assert {k: v.keys() for k, v in checked.items() if isinstance(v, dict)} == \
        {k: v.keys() for k, v in data.items() if isinstance(v, dict)}


BROKEN = [
    ("kv_cache_bytes: 2.0", "kv_cache_bytez: 2.0",
     r"kv_cache_bytez: not a constant the sizing reads \(did you mean 'kv_cache_bytes'\?\)", "kv_cache_bytez"),
    ("  mfu: 0.40", "  mfu: 1.40", r"training.mfu: Input should be less than or equal to 1", "mfu"),
    ("  lora_rank: 16", "  lora_rank: sixteen", r"training.lora_rank: Input should be a valid integer", "lora_rank"),
    ("  lora_rank: 16", "  lora_rnak: 16", r"training.lora_rnak: .* \(did you mean 'lora_rank'\?\)", "lora_rnak"),
    ("  reference_gpu: rtx-pro-6000", "  reference_gpu: rtx-pro-600",
     r"serving.reference_gpu: unknown gpu 'rtx-pro-600' \(did you mean 'rtx-pro-6000'\?\)", "reference_gpu"),
    ("  reference_precision: fp8", "  reference_precision: fp3", r"serving.reference_precision: ",
     "reference_precision"),
    ("interactive: 500,", "interactiv: 500,", r"serving: tokens_per_s_by_latency: unknown latency class 'interactiv'",
     "reference_model"),
    ("link: hdr-200g-ib", "link: hdr-999g-ib", r"tp_across_nodes.link: unknown link 'hdr-999g-ib'", "tp_across_nodes"),
    ("tp_across_nodes: {gpus: 8, nodes: 2,", "tp_across_nodes: {gpus: 8, nodes: 1,",
     r"scaling.calibration: tp_across_nodes: the across-nodes point spans two nodes", "tp_in_node"),
]


@pytest.mark.parametrize("old,new,message,at", BROKEN, ids=[case[3] for case in BROKEN])
def test_a_broken_constant_is_refused_at_its_line(tmp_path, old, new, message, at):
    """Each way a constant can be wrong fails loading at the line of the constant (a section's own check, at the
    section's first line)."""
    root = knowledge_with_sizing(tmp_path, old, new)
    with pytest.raises(KnowledgeError, match=message) as caught:
        load_knowledge(root)
    assert caught.value.location.file.endswith("sizing.yaml")
    assert caught.value.location.line == line_in(root, at)


def line_in(root: Path, text: str) -> int:
    """The 1-based line of `root`'s sizing.yaml that starts with `text` after its indentation."""
    lines = (root / "sizing.yaml").read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if line.lstrip().startswith(text))


def test_a_missing_section_names_it(tmp_path):
    """A whole section removed is named as missing."""
    start = SIZING.index("\nestimation:")
    target = tmp_path / "knowledge"
    shutil.copytree(ROOT / "knowledge", target)
    (target / "sizing.yaml").write_text(SIZING[:start + 1], encoding="utf-8")
    with pytest.raises(KnowledgeError, match=r"estimation: missing \(the sizing reads it\)"):
        load_knowledge(target)


def test_the_cli_says_it_in_one_line(tmp_path):
    """`recommend` on a knowledge dir with a misspelt constant: exit 2, one error line at sizing.yaml's line, no
    traceback (it was a KeyError traceback)."""
    root = knowledge_with_sizing(tmp_path, "kv_cache_bytes: 2.0", "kv_cache_bytez: 2.0")
    result = subprocess.run([sys.executable, "-m", "kentino_expert", "recommend", "-", "--knowledge", str(root)],
                            input="task: inference\n", text=True, capture_output=True, timeout=120)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and f"sizing.yaml:{line_in(root, 'kv_cache_bytez')}:" in lines[0], result.stderr
