"""The benchmark's workloads are what their names say: a final turn asks nothing, a chat turn asks."""
from __future__ import annotations

from benchmarks.workloads import CHAT, FINAL, FINAL_BEFORE_MODEL
from kentino_expert.answer.questions import missing_facts
from kentino_expert.domain.workload import validate_facts
from kentino_expert.expert import Expert


def test_the_final_turn_gives_every_fact_its_task_asks_for():
    """FINAL leaves no fact of its task unknown, so its answer is final and sizes no question's probes."""
    expert = Expert()
    assert missing_facts(validate_facts(FINAL), expert.ruleset) == []
    assert expert.recommend(FINAL).status == "final"


def test_the_chat_turn_leaves_facts_to_ask_for():
    """CHAT is a first turn: its answer is provisional, with questions."""
    answer, _, _, questions = Expert().decide_parts(CHAT)
    assert answer.status == "provisional" and questions


def test_the_facts_before_the_model_give_the_same_answer():
    """FINAL_BEFORE_MODEL states the request shape's defaults by leaving them out: the same build as FINAL."""
    expert = Expert()
    assert expert.recommend(FINAL_BEFORE_MODEL).recommendation == expert.recommend(FINAL).recommendation
