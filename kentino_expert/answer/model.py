"""The answer's contract: recommendation, figures, warnings, assumptions, trace and rule-set identity; and
what a decision adds to an answer: the questions still worth asking, and why not the other kinds."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_serializer

from ..domain.vocabulary import Kind, Status

_FROZEN = ConfigDict(frozen=True)


class Parallelism(BaseModel):
    """TP x PP x DP of the plan, and how a training plan shards its state (`fsdp`: FSDP / ZeRO-3; absent when
    every GPU keeps the whole state or the plan does not train)."""
    model_config = _FROZEN
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    sharding: str | None = None

    @model_serializer(mode="wrap")
    def _without_empty_sharding(self, handler):
        data = handler(self)
        if self.sharding is None:  # answers logged before the field existed compare equal
            data.pop("sharding", None)
        return data


class Recommendation(BaseModel):
    model_config = _FROZEN
    kind: Kind
    nodes: int | None
    gpus_per_node: int | None
    gpu: str | None
    precision: str | None
    replicas: int | None
    parallelism: Parallelism
    interconnect: str | None
    summary: str


class FigureOut(BaseModel):
    model_config = _FROZEN
    value: float | int | bool | str
    unit: str
    description: str


class WarningOut(BaseModel):
    model_config = _FROZEN
    code: str
    message: str
    heuristics: list[str]
    rule: str


class AssumptionOut(BaseModel):
    model_config = _FROZEN
    fact: str
    value: object
    why: str


class TraceStep(BaseModel):
    model_config = _FROZEN
    step: int
    rule: str
    heuristics: list[str]
    file: str
    line: int
    matched: dict
    concluded: dict
    because: str


class RulesetId(BaseModel):
    """Which rules answered: their digest, the engine, and the directories the rules and knowledge came from."""
    model_config = _FROZEN
    digest: str
    engine: str
    directory: str  # the rules directory, absolute
    knowledge_directory: str = ""  # absolute; answers logged before it was recorded have none
    files: dict


class Answer(BaseModel):
    model_config = _FROZEN
    status: Status
    recommendation: Recommendation
    figures: dict[str, FigureOut]
    warnings: list[WarningOut]
    assumptions: list[AssumptionOut]
    trace: list[TraceStep]
    ruleset: RulesetId
    facts: dict


class Probe(BaseModel):
    """One what-if of a question: the fact given this value, the rules reach this kind."""
    model_config = _FROZEN
    value: bool | int | float | str
    kind: Kind


class Question(BaseModel):
    """A fact still worth asking for: the question, and the kinds its answer could lead to."""
    model_config = _FROZEN
    fact: str
    ask: str
    could_lead_to: list[Kind]
    current_kind: Kind | None
    alternatives: list[Kind]  # could_lead_to without the current kind
    probes: list[Probe]


class FailingCondition(BaseModel):
    """A `when` condition that does not hold, with the values it saw and the thresholds it compares them with."""
    model_config = _FROZEN
    condition: str
    values: dict
    thresholds: dict
    text: str


class WhyNot(BaseModel):
    """Why a kind was not chosen: the nearest rule recommending it, and what failed or pre-empted it.

    With no rule recommending the kind, only kind, rule (None), failing ([]), preempted_by and text are
    given (and serialised).
    """
    model_config = _FROZEN
    kind: Kind
    rule: str | None
    priority: int | float | None = None
    file: str | None = None
    line: int | None = None
    heuristics: list[str] | None = None
    failing: list[FailingCondition]
    preempted_by: str | None
    text: str

    @model_serializer(mode="wrap")
    def _without_rule_fields(self, handler):
        data = handler(self)
        if self.rule is None:
            for key in ("priority", "file", "line", "heuristics"):
                data.pop(key, None)
        return data
