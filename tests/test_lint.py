"""ruff, configured in pyproject.toml ([tool.ruff]), finds nothing in the package, the tests or the benchmark."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean():
    """`ruff check` over kentino_expert/, tests/ and benchmarks/ reports no problem (CI runs it through this test)."""
    command = [sys.executable, "-m", "ruff", "check", "--no-cache", "kentino_expert", "tests", "benchmarks"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
