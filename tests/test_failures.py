"""Evaluation failures (kentino_expert.answer.failures): arithmetic that fails on accepted facts is an EngineError
for every caller, and its traceback is logged once per place it failed."""
from __future__ import annotations

import logging

import pytest
from click.testing import CliRunner

from kentino_expert import expert as expert_module
from kentino_expert.answer.failures import evaluation_failures
from kentino_expert.cli.main import main
from kentino_expert.errors import EngineError, InputError

CHAT = {"task": "inference", "model": "llama-3.1-70b"}


def _divide(facts):
    return 1 / 0


def test_a_failure_is_an_engine_error_naming_the_exception():
    """ZeroDivisionError inside the block leaves it as EngineError 'ZeroDivisionError: ...'; a KentinoError passes."""
    logger = logging.getLogger("t")
    with pytest.raises(EngineError, match="^ZeroDivisionError: division by zero$"), evaluation_failures(CHAT, logger):
        _divide(CHAT)
    with pytest.raises(InputError), evaluation_failures(CHAT, logger):
        raise InputError("bad", field="qps")


def test_the_traceback_is_logged_once_per_place(caplog):
    """The first failure at a place logs its traceback; the same place again logs one line; another place logs
    its own traceback."""
    logger = logging.getLogger("kentino-test-failures")
    caplog.set_level(logging.WARNING, logger.name)
    for _ in range(3):
        with pytest.raises(EngineError), evaluation_failures(CHAT, logger):
            _divide(CHAT)
    with pytest.raises(EngineError), evaluation_failures(CHAT, logger):
        int("x")
    with_traceback = [r for r in caplog.records if r.exc_info]
    assert len(caplog.records) == 4 and len(with_traceback) == 2
    assert "ZeroDivisionError at " in caplog.records[1].getMessage()
    assert "traceback is logged above" in caplog.records[2].getMessage()


def test_recommend_maps_failures_for_every_caller(expert, monkeypatch):
    """Expert.recommend and recommend_traced (what the CLI, MCP explain and the service call) raise EngineError,
    not the arithmetic's own exception."""
    monkeypatch.setattr(expert_module, "answer_traced", lambda *args: 1 / 0)
    with pytest.raises(EngineError, match="ZeroDivisionError"):
        expert.recommend(CHAT)
    with pytest.raises(EngineError, match="ZeroDivisionError"):
        expert.recommend_traced(CHAT)


def test_the_cli_gives_one_line_not_a_traceback(monkeypatch):
    """`recommend` on facts whose arithmetic fails exits 2 with one error line."""
    monkeypatch.setattr(expert_module, "answer_traced", lambda *args: 1 / 0)
    result = CliRunner().invoke(main, ["recommend", "-"], input='{"task": "inference"}')
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.output.strip().splitlines() == ["error: ZeroDivisionError: division by zero"]


@pytest.mark.parametrize("facts, field", [
    ({"task": "batch-inference", "params_b": 5e-324, "generated_share": 0}, "params_b"),
    ({"task": "inference", "params_b": 1e-20}, "params_b"),
])
def test_a_model_too_small_to_size_is_refused_at_its_field(expert, facts, field):
    """A params_b below the contract's minimum (it once divided by zero in the sizing) is an InputError on it."""
    with pytest.raises(InputError) as caught:
        expert.recommend(facts)
    assert caught.value.field == field and "greater than or equal to" in caught.value.message
