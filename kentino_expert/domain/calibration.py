"""The serving model against the world: each published measurement (knowledge/measurements.yaml) predicted by the
model on its own build and load, the ratio predicted / measured, and the summary the calibration target reads
(share of rows within 1.5x, median ratio)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from . import serving_model as physics
from .catalog import Knowledge
from .measurements import MeasurementSpec

WITHIN = 1.5  # the calibration target: a row is close when predicted / measured is within this factor either way


@dataclass(frozen=True)
class Prediction:
    """One measurement row beside the model's prediction of it."""

    row: MeasurementSpec
    predicted: float
    batch: float  # requests in flight per unit the prediction assumed

    @property
    def ratio(self) -> float:
        return self.predicted / self.row.value

    @property
    def within(self) -> bool:
        return 1 / WITHIN <= self.ratio <= WITHIN


def engine_constants(knowledge: Knowledge) -> physics.EngineConstants:
    return physics.EngineConstants.of(knowledge.constant("serving_model"))


def unit_of_row(row: MeasurementSpec, knowledge: Knowledge, engine: physics.EngineConstants) -> physics.Unit:
    gpu, model = knowledge.gpu(row.gpu), knowledge.model(row.model)
    return physics.make_unit(model, gpu, row.weights, row.kv_cache, row.tp, row.pp, knowledge.sizing, engine,
                             knowledge.link(gpu.intra_node_link))


def offline_batch(unit: physics.Unit, row: MeasurementSpec, knowledge: Knowledge,
                  engine: physics.EngineConstants) -> int:
    """Requests a run keeps in flight per unit: as many as the KV cache holds beside the weights (the engine's memory
    fraction of each GPU), each at its mean length in flight (prompt and half the output: a paged KV cache holds
    what a request has so far), at most the engine's batch limit."""
    from .sizing import weights_gb
    fraction = row.memory_fraction or knowledge.constant("serving_model", "memory_fraction")
    weights = weights_gb(unit.model, row.weights, knowledge.sizing)
    held = row.prompt_tokens + row.output_tokens / 2
    capacity = physics.kv_capacity(unit, fraction * unit.gpu.memory_gb, weights, held)
    return max(1, min(capacity, row.max_batch or engine.max_batch))


def predict(row: MeasurementSpec, knowledge: Knowledge, engine: physics.EngineConstants) -> Prediction:
    """The model's value of the row's metric on the row's build and load."""
    unit = unit_of_row(row, knowledge, engine)
    units = row.gpus // unit.gpus
    cap = float(offline_batch(unit, row, knowledge, engine))
    state = None
    if row.requests_per_s and row.concurrency is None:  # a rate-driven run: the batch the rate keeps in flight
        state = physics.open_loop(unit, row.requests_per_s / units, row.prompt_tokens, row.output_tokens, engine, cap)
    if state is None:
        batch = cap if row.concurrency is None else max(1.0, min(row.concurrency / units, cap))
        state = physics.steady_state(unit, batch, row.prompt_tokens, row.output_tokens, engine)
    batch = state.batch
    values = {"output_tokens_per_s": state.output_tokens_per_s * units,
              "per_user_tokens_per_s": state.per_user_tokens_per_s, "ttft_s": state.ttft_s, "tpot_s": state.tpot_s}
    return Prediction(row, values[row.metric], batch)


def predictions(knowledge: Knowledge) -> list[Prediction]:
    """Every row's prediction (excluded rows too: the table shows them, the summary leaves them out)."""
    engine = engine_constants(knowledge)
    return [predict(row, knowledge, engine) for row in knowledge.measurements]


@dataclass(frozen=True)
class Summary:
    rows: int
    within: int
    median_ratio: float

    @property
    def share_within(self) -> float:
        return self.within / self.rows if self.rows else 0.0


def summary(items: list[Prediction]) -> Summary:
    """The calibration's figures over the rows used (not excluded)."""
    used = [item for item in items if not item.row.excluded]
    ratios = [item.ratio for item in used]
    return Summary(len(used), sum(item.within for item in used), statistics.median(ratios) if ratios else 0.0)
