"""The answer's contract: recommendation, figures, warnings, assumptions, trace and rule-set identity."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

_FROZEN = ConfigDict(frozen=True)


class Parallelism(BaseModel):
    model_config = _FROZEN
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None


class Recommendation(BaseModel):
    model_config = _FROZEN
    kind: Literal["single-node", "single-node-int4", "dp-replicas", "multi-node-ib", "frontier"]
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


class Warning_(BaseModel):
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
    status: Literal["final", "provisional"]
    recommendation: Recommendation
    figures: dict[str, FigureOut]
    warnings: list[Warning_]
    assumptions: list[AssumptionOut]
    trace: list[TraceStep]
    ruleset: RulesetId
    facts: dict
