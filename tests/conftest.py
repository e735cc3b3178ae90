"""Shared fixtures: the bundled expert on both backends, scenario data, and a reset of global engine state."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kentino_expert.api import Expert, reset_default_expert

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "tests" / "scenarios" / "reference.yaml"


@pytest.fixture(autouse=True)
def _reset_engine_state():
    """Every test starts without the process-wide expert (its durable session counter and handles)."""
    reset_default_expert()
    yield
    reset_default_expert()


@pytest.fixture(scope="session")
def expert() -> Expert:
    """The bundled rules on durable-rules (the engine that answers)."""
    return Expert()


@pytest.fixture(scope="session")
def reference_expert() -> Expert:
    """The bundled rules on the reference evaluator (the oracle)."""
    return Expert(backend="reference")


def load_scenarios():
    return yaml.safe_load(SCENARIOS.read_text())
