"""The shape of knowledge/sizing.yaml: every constant the sizing reads, with its type and range, checked when the
knowledge is loaded (a missing or misspelt constant is an error at its line, not a KeyError in a request)."""
from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, PositiveFloat, PositiveInt, ValidationError, model_validator

from ..errors import CatalogError, KnowledgeError, Location, did_you_mean
from ..yamlsrc import location_at
from .spec_model import Spec
from .vocabulary import LATENCIES, Precision

Fraction = Annotated[float, Field(gt=0, le=1)]


class _Section(Spec):
    source: str | None = None  # where the section's figures come from


class PrecisionBytes(_Section):
    bf16: PositiveFloat
    fp8: PositiveFloat
    int4: PositiveFloat
    fp4: PositiveFloat


class NativeFormatBytes(_Section):
    mxfp4: PositiveFloat
    fp8: PositiveFloat


class Training(_Section):
    bytes_per_param_full: PositiveFloat
    gathered_bytes_per_param_full: PositiveFloat
    gathered_bytes_per_param_peft: PositiveFloat
    gathered_share_max: Fraction
    activation_bytes_per_hidden_full: PositiveFloat
    activation_bytes_per_hidden_peft: PositiveFloat
    checkpointed_bytes_per_hidden: PositiveFloat
    checkpointing_above_share: Fraction
    logits_bytes_per_vocab_token: PositiveFloat
    lora_rank: PositiveInt
    bytes_per_trainable_param_peft: PositiveFloat
    flops_per_param_token: PositiveFloat
    mfu: Fraction
    fp8_speedup: Annotated[float, Field(ge=1, le=4)]
    seconds_per_month: PositiveFloat


class Serving(_Section):
    reference_model: str
    reference_precision: Precision
    reference_gpu: str
    reference_gpus: PositiveInt
    tokens_per_s_by_latency: dict[str, PositiveFloat]
    int4_speedup_vs_fp8: PositiveFloat
    runtime_overhead_fraction: Annotated[float, Field(ge=0, lt=1)]
    prefill_flops_per_param_token: PositiveFloat
    prefill_mfu: Fraction

    @model_validator(mode="after")
    def _every_latency_class(self):
        for name in self.tokens_per_s_by_latency:  # a misspelt class first: it is also a missing one
            if name not in LATENCIES:
                raise ValueError(f"tokens_per_s_by_latency: unknown latency class '{name}'")
        missing = [name for name in LATENCIES if name not in self.tokens_per_s_by_latency]
        if missing:
            raise ValueError(f"tokens_per_s_by_latency: no figure for the latency class '{missing[0]}'")
        return self


class ServingModel(_Section):
    """The serving model's engine constants (serving_model.EngineConstants)."""
    bandwidth_efficiency: Fraction
    decode_compute_efficiency: Fraction
    prefill_efficiency: Fraction
    step_overhead_s: Annotated[float, Field(ge=0, le=1)]
    collective_latency_factor: Annotated[float, Field(ge=0, le=1000)]
    max_batch: PositiveInt
    int4_compute_factor: Fraction
    memory_fraction: Fraction


class CalibrationPoint(Spec):
    gpus: PositiveInt
    nodes: PositiveInt
    link: str
    efficiency: Fraction

    @model_validator(mode="after")
    def _a_tp_group_that_talks(self):
        # one GPU's TP group sends nothing: the bandwidth constant is solved by dividing by its traffic
        if self.gpus < 2:
            raise ValueError(f"gpus: a TP point spans two GPUs or more, not {self.gpus} (one GPU has no traffic "
                             "to calibrate on)")
        if self.gpus < self.nodes:
            raise ValueError(f"gpus: {self.gpus} GPUs cannot span {self.nodes} nodes (each node holds one or more)")
        return self


class Calibration(_Section):
    tp_in_node: CalibrationPoint
    tp_across_nodes: CalibrationPoint

    @model_validator(mode="after")
    def _points_where_they_belong(self):
        if self.tp_in_node.nodes != 1:
            raise ValueError("tp_in_node: the in-node point is one node (nodes: 1)")
        if self.tp_across_nodes.nodes < 2:
            raise ValueError("tp_across_nodes: the across-nodes point spans two nodes or more")
        return self


class Scaling(_Section):
    calibration: Calibration
    dp_overhead_ratio: Annotated[float, Field(ge=0)]
    pp_overhead_ratio: Annotated[float, Field(ge=0)]
    pp_microbatches: PositiveInt


class Estimation(_Section):
    params_per_layer_hidden2: PositiveFloat
    hidden_per_layer: PositiveFloat
    head_dim: PositiveInt
    kv_heads: PositiveInt
    max_context: PositiveInt
    vocab_size: PositiveInt
    intermediate_per_hidden: PositiveFloat


class SizingConstants(Spec):
    """knowledge/sizing.yaml as a whole (Spec: frozen, no unknown key, no infinity, no true for a number)."""

    precision_bytes: PrecisionBytes
    unquantised_bytes: PositiveFloat
    qlora_base_bytes: PositiveFloat
    native_format_bytes: NativeFormatBytes
    kv_cache_bytes: PositiveFloat
    gb: PositiveFloat
    training: Training
    serving: Serving
    serving_model: ServingModel
    scaling: Scaling
    estimation: Estimation


def check_sizing(data, path: str) -> None:
    """Raise a KnowledgeError at the line and column of the first constant sizing.yaml lacks, misspells or gives
    a value out of its range."""
    try:
        SizingConstants.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()  # a misspelt constant is also a missing one: the misspelling, at its line, first
        error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc = tuple(error["loc"])
        dotted = ".".join(str(part) for part in loc)
        if error["type"] == "missing":
            message, suggestion = f"{dotted}: missing (the sizing reads it)", None
        elif error["type"] == "extra_forbidden":
            message = f"{dotted}: not a constant the sizing reads"
            suggestion = did_you_mean(str(loc[-1]), _fields_at(loc[:-1]))
        else:
            message, suggestion = f"{dotted}: {error['msg'].removeprefix('Value error, ')}", None
        raise KnowledgeError(message, location=_located(data, loc, path), suggestion=suggestion) from None


def _fields_at(loc: tuple) -> list[str]:
    """The constants a section of SizingConstants holds (for a did-you-mean)."""
    model = SizingConstants
    for part in loc:
        annotation = model.model_fields[part].annotation if part in model.model_fields else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


def _located(data, loc: tuple, path: str) -> Location:
    """Where the deepest part of `loc` that the file has stood (the section, when a constant is missing)."""
    return location_at(data, loc, path, Location(path, 1, 1))


# the catalog entries sizing.yaml names: (path to the name, the catalog table it names, the link scope it needs)
CATALOG_NAMES = ((("serving", "reference_model"), "models", None), (("serving", "reference_gpu"), "gpus", None),
                 (("scaling", "calibration", "tp_in_node", "link"), "links", "intra-node"),
                 (("scaling", "calibration", "tp_across_nodes", "link"), "links", "inter-node"))


def check_sizing_names(data, path: str, lookup) -> None:
    """Each model, card and link sizing.yaml names is in the catalog (`lookup(table, name)` returns it, or raises a
    CatalogError for one that is not), and each calibration link has the scope its point needs: a KnowledgeError
    at the name's line otherwise."""
    for loc, table, scope in CATALOG_NAMES:
        name = data
        for part in loc:
            name = name[part]
        try:
            entry = lookup(table, name)
        except CatalogError as exc:
            raise KnowledgeError(f"{'.'.join(loc)}: {exc.message}", location=_located(data, loc, path),
                                 suggestion=exc.suggestion) from None
        if scope and entry.scope != scope:  # the in-node point calibrated on a network, or the reverse
            raise KnowledgeError(f"{'.'.join(loc)}: '{entry.id}' is an {entry.scope} link; this calibration point "
                                 f"needs an {scope} one", location=_located(data, loc, path))
