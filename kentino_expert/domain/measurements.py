"""Published serving measurements (knowledge/measurements.yaml): what a card, an engine and a model were measured to
do, with the source, setup and date of each; the serving model is calibrated against them and each answer's speed
says which row it rests on."""
from __future__ import annotations

from typing import Literal

from pydantic import NonNegativeFloat, PositiveFloat, PositiveInt, ValidationError, model_validator

from ..errors import KnowledgeError, Location, did_you_mean
from ..yamlsrc import location_at, location_of
from .spec_model import Spec

MEASUREMENTS_FILE = "measurements.yaml"
METRICS = ("output_tokens_per_s", "per_user_tokens_per_s", "ttft_s", "tpot_s")
Weights = Literal["bf16", "fp8", "int4", "fp4"]


class MeasurementSpec(Spec):
    """One published measurement: a build (card x GPUs, TP x PP), a model at a precision, the load, one figure."""

    id: str
    source: str
    published: str  # YYYY-MM or YYYY-MM-DD
    engine: str
    gpu: str  # a catalog card
    gpus: PositiveInt  # the GPUs the figure covers
    tp: PositiveInt
    pp: PositiveInt = 1
    model: str  # a catalog model
    weights: Weights
    kv_cache: Literal["bf16", "fp8"] = "bf16"  # the engine's default when the source does not say
    scenario: Literal["offline", "concurrency", "single", "server"]
    concurrency: PositiveInt | None = None  # requests in flight (None: offline, as many as fit)
    prompt_tokens: PositiveInt
    output_tokens: PositiveInt
    metric: Literal["output_tokens_per_s", "per_user_tokens_per_s", "ttft_s", "tpot_s"]
    value: PositiveFloat
    quote: str
    note: str = ""
    vendor_tuned: bool = False  # the card's vendor measured it with its own engine (a best case)
    excluded: str = ""  # why the row is not used to calibrate (shown, not hidden)
    requests_per_s: NonNegativeFloat | None = None  # a server scenario's arrival rate, when the source gives it
    # the engine's own settings of the run where they differ from the serving model's (knowledge/sizing.yaml
    # serving_model): its batch limit, and the share of each GPU it takes for weights and KV cache
    max_batch: PositiveInt | None = None
    memory_fraction: float | None = None

    @model_validator(mode="after")
    def _a_whole_layout(self):
        if self.gpus % (self.tp * self.pp):
            raise ValueError(f"gpus: {self.gpus} GPUs are not whole replicas of TP {self.tp} x PP {self.pp}")
        if self.scenario in ("concurrency", "single") and self.concurrency is None:
            raise ValueError(f"concurrency: a '{self.scenario}' measurement states its requests in flight")
        return self


def read_measurements(data, path: str, models: dict, gpus: dict) -> tuple[MeasurementSpec, ...]:
    """The rows of measurements.yaml, each checked and naming a catalog card and model; a KnowledgeError at the
    line of the first problem."""
    rows = data.get("measurements") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise KnowledgeError("expected a top-level 'measurements:' list", location=Location(path, 1, 1))
    out, seen = [], set()
    for index, raw in enumerate(rows):
        where = location_of(rows, index, path)
        try:
            row = MeasurementSpec.model_validate(dict(raw) if isinstance(raw, dict) else raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = "".join(f".{p}" for p in err["loc"])
            raise KnowledgeError(f"measurements[{index}]{field}: {err['msg'].removeprefix('Value error, ')}",
                                 location=location_at(raw, err["loc"], path, where)) from None
        for field, table in (("gpu", gpus), ("model", models)):
            if getattr(row, field) not in table:
                raise KnowledgeError(f"measurements[{index}].{field}: '{getattr(row, field)}' is not in the catalog",
                                     location=location_at(raw, (field,), path, where),
                                     suggestion=did_you_mean(getattr(row, field), table))
        if row.id in seen:
            raise KnowledgeError(f"measurements[{index}].id: duplicate id '{row.id}'", location=where)
        seen.add(row.id)
        out.append(row)
    return tuple(out)
