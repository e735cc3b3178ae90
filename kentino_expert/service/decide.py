"""The decide use case, one for HTTP, MCP and the CLI: validate the facts, evaluate them (or take the cached
evaluation of the same facts), add the questions still worth asking and why not the other kinds, record the
decision in the log, and return it typed.

A decision is committed to the log (when one is given) before it is returned, so no edge acknowledges a
decision the log lost; a repeated decision is a new decision, with its own id and row.
"""
from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, create_model

from ..answer.failures import evaluation_failures
from ..answer.model import Answer, Question, WhyNot
from ..answer.whynot import why_not_from
from ..decisions.log import DecisionLog
from ..decisions.meta import check_meta
from ..domain.vocabulary import Status
from ..domain.workload import Workload, validate_facts

_log = logging.getLogger(__name__)


class _DecisionBase(BaseModel):
    """What a decision adds to an answer, before the answer's own fields (Decision below)."""

    model_config = ConfigDict(frozen=True)
    decision_id: str | None = Field(description="Id of the decision in the log (null when not logged): give it to "
                                                "`explain`, or to GET /v1/decisions/{decision_id}.")
    status: Status = Field(description="final, or provisional while a fact worth asking for is unknown.")
    questions: list[Question] = Field(description="Facts still worth asking for, most decisive first: ask the "
                                                  "person the first while the status is provisional.")
    why_not: list[WhyNot] = Field(description="Why each other kind was not chosen.")
    _response: dict | None = PrivateAttr(default=None)  # the JSON, when the evaluation already made it

    @property
    def answer(self) -> Answer:
        return Answer.model_construct(**{name: getattr(self, name) for name in Answer.model_fields})

    def response(self) -> dict:
        """The decision as JSON-ready values: `model_dump(mode="json")`, made once per evaluation."""
        if self._response is None:
            return self.model_dump(mode="json")
        return {"decision_id": self.decision_id, **self._response}


# An answer as a decision: its id in the log (None when not logged), the questions still worth asking (ranked),
# why not the other kinds, then every field of the answer, taken from Answer itself (not restated: a field added
# to the answer is in the decision, its JSON and its schema). Its JSON is what every edge sends.
Decision = create_model("Decision", __base__=_DecisionBase, __doc__=(
    "An answer as a decision: its id in the log (None when not logged), the answer's fields, the questions still "
    "worth asking (ranked) and why not the other kinds. Its JSON is what every edge sends."),
    **{name: (field.annotation, copy.copy(field)) for name, field in Answer.model_fields.items() if name != "status"})


@dataclass(frozen=True)
class Evaluation:
    """Everything of a decision but its id: what the answer cache keeps (shared by callers: not mutated)."""

    facts: dict  # as given: what the log stores
    answer: Answer
    questions: list[Question]
    why_not: list[WhyNot]
    logged: dict  # the answer as JSON, computed once: the log and the response share it
    body: dict  # the response without its id

    def decision(self, decision_id: str | None) -> Decision:
        made = Decision.model_construct(decision_id=decision_id, questions=self.questions, why_not=self.why_not,
                                        **{name: getattr(self.answer, name) for name in Answer.model_fields})
        made._response = self.body
        return made


def evaluate_decision(expert, facts, logger: logging.Logger | None = None) -> Evaluation:
    """All of deciding but the write. Arithmetic that fails on facts the contract accepts is an EngineError
    (answer/failures.py); `logger` (default: this module's) keeps the traceback for whoever maintains the rules."""
    with evaluation_failures(facts, logger or _log):
        return _evaluate(expert, facts)


def _evaluate(expert, facts) -> Evaluation:
    workload = facts if isinstance(facts, Workload) else validate_facts(facts)
    answer, firings, final, questions = expert.decide_parts(workload)
    not_chosen = why_not_from(expert, firings, final)
    logged = answer.model_dump(mode="json")
    body = {"status": logged["status"], "questions": [q.model_dump(mode="json") for q in questions],
            "why_not": [w.model_dump(mode="json") for w in not_chosen],
            **{k: v for k, v in logged.items() if k != "status"}}
    given = facts.known() if isinstance(facts, Workload) else dict(facts)
    return Evaluation(given, answer, questions, not_chosen, logged, body)


def decide(expert, log: DecisionLog | None, facts, source: str, session_id=None, turn=None,
           logger: logging.Logger | None = None) -> Decision:
    """Decide on `facts` (a mapping or a Workload) with `expert` and record the decision in `log` (source
    'http', 'mcp' or 'cli'); with `log` None nothing is recorded and the id is None."""
    session_id, turn = check_meta(session_id, turn)  # before the work: a bad turn is refused, not evaluated
    evaluation = expert.answer_cache.get(facts, lambda given: evaluate_decision(expert, given, logger))
    decision_id = (log.record(evaluation.facts, evaluation.logged, source, session_id=session_id, turn=turn)
                   if log is not None else None)
    return evaluation.decision(decision_id)
