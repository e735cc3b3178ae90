"""The answer's contract: recommendation, figures, warnings, assumptions, trace, the alternative builds and
rule-set identity; and what a decision adds to an answer: the questions still worth asking, and why not the
other kinds.

Every field carries its description: the service's OpenAPI document and MCP clients show them.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from ..domain.vocabulary import Kind, Status

_FROZEN = ConfigDict(frozen=True)


class Parallelism(BaseModel):
    """TP x PP x DP of the plan (null where the plan does not set it), and how a training plan shards its state."""
    model_config = _FROZEN
    tp: int | None = Field(None, description="Tensor-parallel degree: GPUs one layer is split across.")
    pp: int | None = Field(None, description="Pipeline-parallel degree: stages the layers are split into.")
    dp: int | None = Field(None, description="Data-parallel degree: copies of the model.")
    sharding: str | None = Field(None, description="How a training plan shards its state: `fsdp` (FSDP / ZeRO-3: "
                                 "parameters, gradients and optimizer state split over every GPU); absent when "
                                 "every GPU keeps the whole state or the plan does not train.")

    @model_serializer(mode="wrap")
    def _without_empty_sharding(self, handler):
        data = handler(self)
        if self.sharding is None:  # answers logged before the field existed compare equal
            data.pop("sharding", None)
        return data


class Recommendation(BaseModel):
    """What to buy: the kind of build and its shape (fields the winning rule did not set are null)."""
    model_config = _FROZEN
    kind: Kind = Field(description="The kind of build recommended.")
    nodes: int | None = Field(description="Servers (nodes) to buy.")
    gpus_per_node: int | None = Field(description="GPUs in each node.")
    gpu: str | None = Field(description="The card, by its catalog id.")
    precision: str | None = Field(description="Weight precision the plan runs at (bf16, fp8, int4).")
    replicas: int | None = Field(description="Independent copies of the deployment (data-parallel replicas).")
    parallelism: Parallelism = Field(description="How the model is split across the GPUs.")
    interconnect: str | None = Field(description="Network between the nodes, by its catalog id (null: none).")
    summary: str = Field(description="One sentence for the kind, then the winning rule's `because`.")


class FigureOut(BaseModel):
    """One computed figure the rules saw."""
    model_config = _FROZEN
    value: float | int | bool | str = Field(description="The figure's value.")
    unit: str = Field(description="Its unit (GB, tokens/s, per GPU, ...).")
    description: str = Field(description="What the figure is.")


def figure_out(value, unit: str, description: str) -> FigureOut:
    """A FigureOut of a figure the sizing computed and checked (figures.py: a finite number, a flag or a word, in
    the types the field admits), built without validating it again: an answer carries ~80 of them."""
    if type(value) not in (float, int, bool, str) or type(unit) is not str or type(description) is not str:
        return FigureOut(value=value, unit=unit, description=description)  # anything else is validated
    return FigureOut.model_construct(value=value, unit=unit, description=description)


class WarningOut(BaseModel):
    """Advice a rule gave beside the recommendation."""
    model_config = _FROZEN
    code: str = Field(description="Stable code of the warning (e.g. efficiency-below-floor).")
    message: str = Field(description="The warning in words, with the figures that raised it.")
    heuristics: list[str] = Field(description="Ids of the source document's heuristics behind it.")
    rule: str = Field(description="Id of the rule that gave it.")


class AssumptionOut(BaseModel):
    """A fact the person did not give, and the default assumed for it."""
    model_config = _FROZEN
    fact: str = Field(description="The fact's name.")
    value: object = Field(description="The value assumed.")
    why: str = Field(description="Why this default.")


class TraceStep(BaseModel):
    """One rule that fired, in firing order: the why-trace."""
    model_config = _FROZEN
    step: int = Field(description="Position in firing order, from 1.")
    rule: str = Field(description="Id of the rule.")
    heuristics: list[str] = Field(description="Ids of the source document's heuristics it encodes.")
    file: str = Field(description="Rule file it is written in.")
    line: int = Field(description="Line the rule starts on.")
    matched: dict = Field(description="Values of the names in its `when` that had one.")
    concluded: dict = Field(description="What the firing wrote: conclusions, `recommended_*` fields, warnings.")
    because: str = Field(description="The rule's reason, with the values filled in.")


class DecidingFigure(BaseModel):
    """The figure that decided a plan: a failing `works` condition's, else the one rules/selection.yaml shows."""
    model_config = _FROZEN
    name: str = Field(description="Name of the figure (as in `figures`).")
    value: float | int | bool | str | None = Field(description="Its value for this plan.")
    unit: str = Field(description="Its unit.")


class BomLineOut(BaseModel):
    """One line of a build's bill of materials, priced from the rule set's price list (rules/prices.yaml)."""
    model_config = _FROZEN
    part: str = Field(description="The part's id (a card of knowledge/gpus.yaml or a part of knowledge/parts.yaml).")
    name: str = Field(description="The part in words.")
    quantity: int = Field(description="How many the build needs.")
    unit_price: float = Field(description="The price of one, in the price list's currency.")
    line_total: float = Field(description="quantity x unit_price.")


class PriceListId(BaseModel):
    """Which price list priced the quotes: an old quote replays with its own prices."""
    model_config = _FROZEN
    file: str = Field(description="The price list's file.")
    digest: str = Field(description="sha256 of the price list's text.")
    currency: str = Field(description="The currency of every price (ISO 4217).")
    date: str = Field(description="The day the prices were read.")
    amortization_years: float = Field(description="Years the purchase is spread over in the price per million "
                                                  "tokens and per run.")
    energy_price_per_kwh: float = Field(description="The price of a kWh, in the currency, those figures use.")


class Alternative(BaseModel):
    """Another build the search sized: the best plan of another card (or the named build, or the slower plan
    without the deadline), whether it is buildable, the figure that decided it and why, in one sentence."""
    model_config = _FROZEN
    gpu: str = Field(description="Catalog id of the card.")
    gpus_per_node: int = Field(description="GPUs in each node of the build.")
    kind: Kind = Field(description="The kind of plan the rules concluded for this build.")
    nodes: int | None = Field(description="Nodes in all (null when the rules left it open).")
    precision: str | None = Field(description="Weight precision of the plan.")
    works: bool = Field(description="True when it is a plan Kentino builds (rules/selection.yaml `works`).")
    figure: DecidingFigure | None = Field(description="The figure that decided it.")
    why: str = Field(description="Why, in one sentence.")
    time_to_result_days: float | None = Field(None, description="Days this build takes to the result (training, "
                                                                "or a batch corpus); null otherwise, and in "
                                                                "answers logged before it was recorded.")
    figures: dict[str, float] = Field(default_factory=dict, description="This build's own figures, by the names the "
                                      "recommendation's figures use: output_tokens_per_s, per_user_tokens_per_s, "
                                      "time_to_first_token_s, concurrency_in_flight (serving), plan_gpu_memory_gb, "
                                      "plan_gpu_memory_fraction, and time_to_result_days, plan_efficiency (training).")
    fails: str | None = Field(None, description="The id of the first `works` test it fails (rules/selection.yaml), "
                                                "null when it works.")
    bill_of_materials: list[BomLineOut] = Field(default_factory=list, description="What this build is made of, "
                                                "priced (its price_total, power_kw and rack_units are in `figures`); "
                                                "empty without a price list.")


class SpeedProvenance(BaseModel):
    """How some of the plan's speed and time figures were obtained, and the published measurement they rest on."""
    model_config = _FROZEN
    figures: list[str] = Field(description="The figures this says how were obtained.")
    basis: Literal["measured", "extrapolated", "derived", "estimated"] = Field(
        description="measured: a published row of this very setup; extrapolated: the serving model from the nearest "
                    "published row of the same card, precision and model class; derived: the serving model's "
                    "constants alone; estimated: an assumption the model is not calibrated on.")
    note: str = Field(description="In words: the row, or what the figure rests on.")
    measurement: str | None = Field(None, description="The row's id in knowledge/measurements.yaml.")
    source: str | None = Field(None, description="Where the row was published.")
    measured: float | None = Field(None, description="The row's measured value, in `metric`.")
    metric: str | None = Field(None, description="The row's metric.")
    model_ratio: float | None = Field(None, description="The serving model's prediction of the row / its measured "
                                                        "value: how far the model is on that row.")
    factor: float | None = Field(None, description="The plan's figure / the row's value, same metric: how far the "
                                                   "figure is extrapolated from the row.")


class RulesetId(BaseModel):
    """Which rules answered: their digest, the engine, and the directories the rules and knowledge came from."""
    model_config = _FROZEN
    digest: str = Field(description="sha256 over the engine version and every rule and knowledge file.")
    engine: str = Field(description="Engine and version that evaluated the rules.")
    directory: str = Field(description="The rules directory, absolute.")
    knowledge_directory: str = Field("", description="The knowledge directory, absolute (empty in answers logged "
                                                      "before it was recorded).")
    files: dict = Field(description="Each rule file's sha256, by file name.")


class Answer(BaseModel):
    """What the rules concluded for the facts, and why."""
    model_config = _FROZEN
    status: Status = Field(description="final, or provisional while a fact worth asking for is unknown.")
    recommendation: Recommendation = Field(description="What to buy.")
    figures: dict[str, FigureOut] = Field(description="Every figure the facts allow, by name.")
    warnings: list[WarningOut] = Field(description="Advice given beside the recommendation, in firing order.")
    assumptions: list[AssumptionOut] = Field(description="Defaults assumed for facts not given.")
    trace: list[TraceStep] = Field(description="The rules that fired, in firing order.")
    ruleset: RulesetId = Field(description="The rule set that answered.")
    facts: dict = Field(description="The facts after defaults and catalog canonicalisation.")
    provenance: list[SpeedProvenance] = Field(default_factory=list, description="How the plan's speed and time "
                                              "figures were obtained (measured, extrapolated, derived, estimated).")
    alternatives: list[Alternative] = Field(
        default=[], description="The best build of every other card the search sized (and the one-node plan "
                                "where a deadline forced more): builds, where `why_not` is kinds. Answers "
                                "logged before the build search have none.")
    bill_of_materials: list[BomLineOut] = Field(default_factory=list, description="What the recommended build is "
                                                "made of, priced (price_total, power_kw, rack_units and the price "
                                                "of the work are in `figures`); empty without a price list or for "
                                                "frontier work.")
    price_list: PriceListId | None = Field(None, description="The price list the quotes come from (null: none).")


class Probe(BaseModel):
    """One what-if of a question: the fact given this value, the build the answer then recommends."""
    model_config = _FROZEN
    value: bool | int | float | str = Field(description="A value the fact was tried with.")
    kind: Kind = Field(description="The kind the rules then recommend.")
    nodes: int | None = Field(None, description="Nodes of that recommendation.")
    gpu: str | None = Field(None, description="Its card.")
    precision: str | None = Field(None, description="Its precision.")


class Question(BaseModel):
    """A fact still worth asking for (some value of it changes the build): the question, and the kinds its answer
    could lead to."""
    model_config = _FROZEN
    fact: str = Field(description="The fact to ask for (a property of the facts schema).")
    ask: str = Field(description="The question to put to the person.")
    could_lead_to: list[Kind] = Field(description="Every kind some answer to it leads to.")
    current_kind: Kind | None = Field(description="The kind recommended now.")
    alternatives: list[Kind] = Field(description="could_lead_to without the current kind.")
    probes: list[Probe] = Field(description="The values tried and the kind each leads to.")


class FailingCondition(BaseModel):
    """A `when` condition that does not hold, with the values it saw and the thresholds it compares them with."""
    model_config = _FROZEN
    condition: str = Field(description="The condition as written in the rule.")
    values: dict = Field(description="The values of the facts, figures and conclusions it names (false: a "
                                      "conclusion no rule drew; null: not given or unknown).")
    thresholds: dict = Field(description="The rule parameters it compares them with.")
    text: str = Field(description="The condition and its values in words.")


class WhyNot(BaseModel):
    """Why a kind was not chosen: the nearest rule recommending it, and what failed or pre-empted it.

    With no rule recommending the kind, only kind, rule (None), failing ([]), preempted_by and text are
    given (and serialised).
    """
    model_config = _FROZEN
    kind: Kind = Field(description="The kind not chosen.")
    rule: str | None = Field(description="The nearest rule that recommends it (null: no rule does).")
    priority: int | float | None = Field(None, description="That rule's priority.")
    file: str | None = Field(None, description="Rule file it is written in.")
    line: int | None = Field(None, description="Line the rule starts on.")
    heuristics: list[str] | None = Field(None, description="Ids of the heuristics it encodes.")
    failing: list[FailingCondition] = Field(description="Its conditions that do not hold.")
    preempted_by: str | None = Field(description="The rule that recommended another kind first (null: none).")
    text: str = Field(description="The reason in one sentence.")

    @model_serializer(mode="wrap")
    def _without_rule_fields(self, handler):
        data = handler(self)
        if self.rule is None:
            for key in ("priority", "file", "line", "heuristics"):
                data.pop(key, None)
        return data
