"""How a plan's speed and time figures were obtained, as the best planners say it: `measured` (a published row of
this very setup), `extrapolated` (the serving model from the nearest published row of the same card, precision and
model class: the row, and how far the figure is from it), `derived` (the serving model's constants alone: no row is
close), or `estimated` (an assumption the model is not calibrated on: a model known by its size only, the
document's quote, a training MFU)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .calibration import Prediction, predictions
from .catalog import Knowledge, ModelSpec

SPEED_FIGURES = ("output_tokens_per_s", "per_user_tokens_per_s", "time_to_first_token_s")
CLOSE = 1.5  # a row is the plan's own setup when its concurrency and lengths are within this factor


@dataclass(frozen=True)
class Provenance:
    """How figures were obtained, and the published row they rest on (when one does)."""

    figures: tuple[str, ...]
    basis: str  # measured | extrapolated | derived | estimated
    note: str
    measurement: str | None = None  # the row's id (knowledge/measurements.yaml)
    source: str | None = None
    measured: float | None = None  # the row's value and metric
    metric: str | None = None
    model_ratio: float | None = None  # the serving model's prediction of the row / its measured value
    factor: float | None = None  # the plan's figure / the row's value (same metric): how far it is extrapolated


def _family(gpu_id: str) -> str:
    return gpu_id.removesuffix("-workstation")


def _moe(model: ModelSpec) -> bool:
    return model.moe is not None


def _distance(item: Prediction, model: ModelSpec, gpu_id: str, knowledge: Knowledge, batch: float) -> float:
    """How far a row's setup is from the plan's: the models' active sizes and the batches, in log terms, and a
    little for another edition of the card."""
    row_model = knowledge.model(item.row.model)
    size = abs(math.log(row_model.active_b / model.active_b))
    load = abs(math.log(max(item.batch, 1.0) / max(batch, 1.0)))
    return size + 0.5 * load + (0.0 if item.row.gpu == gpu_id else 0.1)


def serving_provenance(model: ModelSpec, gpu_id: str, precision: str, tp: int, batch: float, prompt: float,
                       output: float, figures: dict, knowledge: Knowledge, document: bool = False) -> Provenance:
    """The provenance of a serving plan's speed figures (`figures`: name -> value of SPEED_FIGURES)."""
    names = tuple(name for name in SPEED_FIGURES if name in figures)
    if document:
        return Provenance(names, "estimated", "the document's 500-2,000 tokens/s per 8-GPU node at 70B FP8, scaled by "
                          "bandwidth and bytes per token (the policy's document_speed_quote); first token by the "
                          "serving model")
    if model.estimated:
        return Provenance(names, "estimated", "the serving model on an architecture estimated from the model's size "
                          "(no config.json): its KV cache and active weights are assumptions")
    rows = _rows_like(knowledge, _family(gpu_id), precision, _moe(model))
    if not rows:
        used = sum(1 for item in _rows(knowledge))
        return Provenance(names, "derived", f"the serving model's constants (fitted on {used} published rows); no "
                          f"row of {gpu_id} at {precision} for a {'mixture-of-experts' if _moe(model) else 'dense'} "
                          "model is published")
    nearest = min(rows, key=lambda item: _distance(item, model, gpu_id, knowledge, batch))
    row = nearest.row
    same = (row.model == model.id and row.gpu == gpu_id and row.tp == tp and _within(nearest.batch, batch)
            and _within(row.prompt_tokens, prompt) and _within(row.output_tokens, output))
    mine = _figure_for(row.metric, figures)
    factor = mine / row.value if mine is not None else None
    basis = "measured" if same else "extrapolated"
    note = (f"{row.engine}: {row.model} on {row.gpus} x {row.gpu} (TP {row.tp} x PP {row.pp}) at {row.weights}, "
            f"{row.prompt_tokens:,}/{row.output_tokens:,} tokens, measured {row.value:,.4g} {row.metric}; the serving "
            f"model predicts that row within {nearest.ratio:.2f}x")
    return Provenance(names, basis, note, row.id, row.source, row.value, row.metric, nearest.ratio, factor)


def _within(a: float, b: float) -> bool:
    return max(a, b) / max(min(a, b), 1e-9) <= CLOSE


def _figure_for(metric: str, figures: dict) -> float | None:
    """The plan's figure in the row's metric (tpot from per-user speed), None when the plan has none."""
    if metric == "tpot_s":
        speed = figures.get("per_user_tokens_per_s")
        return 1.0 / speed if speed else None
    return figures.get({"ttft_s": "time_to_first_token_s"}.get(metric, metric))


_KEPT: dict = {}


def _rows(knowledge: Knowledge) -> list[Prediction]:
    """The calibration's rows in use (not excluded), predicted once per knowledge."""
    key = tuple(knowledge.files.values())
    found = _KEPT.get(key)
    if found is None:
        _KEPT.clear()
        found = _KEPT[key] = [item for item in predictions(knowledge) if not item.row.excluded]
    return found


def _rows_like(knowledge: Knowledge, family: str, precision: str, moe: bool) -> list[Prediction]:
    """The rows in use of a card family at a precision for a dense or a mixture-of-experts model (kept per
    knowledge beside the rows: an answer asks it once, a chat asks it every turn)."""
    key = (tuple(knowledge.files.values()), family, precision, moe)
    found = _KEPT.get(key)
    if found is None:
        found = _KEPT[key] = [item for item in _rows(knowledge) if _family(item.row.gpu) == family
                              and item.row.weights == precision and _moe(knowledge.model(item.row.model)) == moe]
    return found


def training_provenance(figures: dict, mfu: float | None) -> Provenance | None:
    """Time to result of training: the tuned-SXM MFU of the Llama 3 paper with the document's PCIe penalty."""
    if "time_to_result_days" not in figures:
        return None
    note = ("6 x active parameters x tokens at the card's dense BF16 peak x an MFU of "
            f"{mfu:.2f}" if mfu else "the corpus at the plan's tokens/s")
    return Provenance(("time_to_result_days",), "estimated", note + " (the Llama 3 paper's 38-43% on H100 SXM, "
                      "divided on PCIe cards by the document's SXM penalty); no training run is calibrated here"
                      if mfu else note)
