"""The decide use case of HTTP, MCP and the CLI: one typed Decision, its JSON the same however it was made,
its evaluation cached per expert, recorded before it is returned."""
from __future__ import annotations

import pytest

from kentino_expert.answer.cache import AnswerCache
from kentino_expert.answer.model import Question, WhyNot
from kentino_expert.decisions.connect import open_log
from kentino_expert.domain.workload import validate_facts
from kentino_expert.errors import EngineError, InputError
from kentino_expert.service import decide as decide_module
from kentino_expert.service.decide import Decision, decide

CHAT = {"task": "inference", "model": "llama-3.1-70b"}
FINAL = {"task": "inference", "model": "llama-3.1-70b", "concurrency": 48, "context_tokens": 8192,
         "latency": "production", "tenancy": "single", "qps": 20, "tokens_per_s": 1000}


@pytest.mark.parametrize("facts", [CHAT, FINAL])
def test_the_response_is_the_typed_decision_as_json(expert, facts):
    """response() (made once per evaluation, for speed) equals the Decision's own JSON, field for field and in
    the same order: decision_id, status, questions, why_not, then the answer's fields."""
    decision = decide(expert, None, facts, "http")
    assert isinstance(decision, Decision) and decision.decision_id is None
    assert all(isinstance(q, Question) for q in decision.questions)
    assert all(isinstance(w, WhyNot) for w in decision.why_not)
    assert list(decision.response().items()) == list(decision.model_dump(mode="json").items())
    assert list(decision.response())[:4] == ["decision_id", "status", "questions", "why_not"]


@pytest.mark.parametrize("facts", [CHAT, FINAL])
def test_status_is_the_answers_and_questions_keep_it_provisional(expert, facts):
    """The decision's status is its answer's (decided once): provisional exactly while a question is open."""
    decision = decide(expert, None, facts, "http")
    assert decision.status == decision.answer.status == expert.recommend(facts).status
    assert (decision.status == "provisional") == bool(decision.questions)


def test_the_same_facts_are_evaluated_once_per_expert(expert, monkeypatch):
    """A second decision on equal facts (any key order) takes the cached evaluation: MCP and HTTP alike."""
    calls = []
    real = decide_module._evaluate
    monkeypatch.setattr(decide_module, "_evaluate", lambda ex, facts: calls.append(facts) or real(ex, facts))
    monkeypatch.setattr(expert, "answer_cache", AnswerCache())
    first = decide(expert, None, dict(FINAL), "mcp")
    second = decide(expert, None, dict(reversed(list(FINAL.items()))), "http")
    assert len(calls) == 1 and first.response() == second.response()


def test_a_workload_is_decided_and_logged_as_its_known_facts(expert, tmp_path):
    """The CLI passes a validated Workload: it is decided (uncached) and the log stores the facts it holds."""
    with open_log(tmp_path / "cli.db") as log:
        decision = decide(expert, log, validate_facts({**CHAT, "training_tokens": "15T"}), "cli")
        stored = log.get(decision.decision_id)
    assert stored["source"] == "cli" and stored["facts"] == {**CHAT, "training_tokens": 1.5e13}
    assert stored["answer"] == decision.answer.model_dump(mode="json")


def test_a_bad_turn_is_refused_before_anything_is_evaluated(expert, monkeypatch):
    """session_id and turn are checked first: nothing is evaluated or recorded for a bad one."""
    monkeypatch.setattr(decide_module, "_evaluate", lambda *args: pytest.fail("evaluated"))
    with pytest.raises(InputError, match="must be between 0"):
        decide(expert, None, CHAT, "mcp", turn=-1)


def test_arithmetic_that_fails_is_an_engine_error_and_not_cached(expert, monkeypatch):
    """An evaluation that overflows is an EngineError for the caller, and is tried again next time."""
    monkeypatch.setattr(expert, "answer_cache", AnswerCache())

    def overflowing(ex, facts):
        raise OverflowError("cannot convert float infinity to integer")
    monkeypatch.setattr(decide_module, "_evaluate", overflowing)
    for _ in range(2):
        with pytest.raises(EngineError, match="OverflowError"):
            decide(expert, None, CHAT, "http")
    assert len(expert.answer_cache) == 0
