"""From validated facts to the flat state the rules see: defaults applied, catalog ids resolved, then every figure."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import CatalogError
from ..lang.semantics import truth_of
from . import figures_serving, serving_lane, sizing
from .catalog import Knowledge, ModelSpec
from .figures import FIGURE_SPECS, Figure, compute_figures, figure_values
from .state import flatten_facts
from .vocabulary import INFERENCE_TASKS, TRAINING_TASKS
from .workload import Workload


@dataclass(frozen=True)
class Assumption:
    """A fact the engine assumed: a default or an estimate."""

    fact: str
    value: object
    why: str


@dataclass(frozen=True)
class Derived:
    """Everything known before the rules run."""

    facts: dict
    figures: dict  # name -> figures.Figure
    assumptions: tuple[Assumption, ...]
    model: ModelSpec | None

    def state(self) -> dict:
        out = dict(self.facts)
        out.update({name: figure.value for name, figure in self.figures.items()})
        return out


def apply_defaults(facts: dict, policies: dict) -> tuple[dict, list[Assumption]]:
    """Fill each missing fact with the first default whose condition holds on the known facts."""
    out, assumed = dict(facts), []
    for name, policy in policies.items():
        if name in out:
            continue
        for default in policy.defaults:
            if default.when is None or truth_of(default.when.node, facts):
                out[name] = default.value
                assumed.append(Assumption(name, default.value, default.why))
                break
    return out, assumed


def resolve_catalog(facts: dict, knowledge: Knowledge):
    """Look up model, card and links; canonicalise the ids in `facts`; estimate a model given by size."""
    assumed = []
    model = None
    if "model" in facts:
        model = knowledge.model(facts["model"])
        facts["model"] = model.id
        if "params_b" in facts and abs(facts["params_b"] - model.params_b) > 0.5:
            assumed.append(Assumption("params_b", model.params_b, f"the catalog's size of {model.id} was used"))
        facts["params_b"] = model.params_b
    elif "params_b" in facts:
        model = sizing.estimated_model(facts["params_b"], knowledge.sizing)
        assumed.append(Assumption("model", model.name, f"{model.layers} layers x hidden {model.hidden}, "
                                  f"{model.kv_heads} KV heads x {model.head_dim}: a Llama-style estimate"))
    gpu = knowledge.gpu(facts["gpu"]) if "gpu" in facts else None
    if gpu:
        facts["gpu"] = gpu.id
    if "proposed_gpu" in facts:
        facts["proposed_gpu"] = knowledge.gpu(facts["proposed_gpu"], "proposed_build.gpu").id
    link = knowledge.link(facts["interconnect"]) if "interconnect" in facts else None
    if link:
        if link.scope != "inter-node":
            between = sorted(other.id for other in knowledge.links.values() if other.scope == "inter-node")
            raise CatalogError(f"'{link.id}' links GPUs inside a node; between nodes use one of {', '.join(between)}",
                               field="interconnect", name=link.id)
        facts["interconnect"] = link.id
    return model, gpu, link, assumed


@dataclass(frozen=True)
class Prepared:
    """The facts as the figures read them (defaults applied, catalog ids canonical, the concurrency a rate
    implies) and the catalog entries: the one preparation every derivation (an answer's, a probe's state, a
    recorded turn base) starts from."""

    facts: dict
    assumed: list  # Assumption: the defaults', then the catalog's and Little's law's
    model: ModelSpec | None
    gpu: object
    link: object


def prepare(workload: Workload, knowledge: Knowledge, policies: Mapping, parameters: Mapping) -> Prepared:
    """Defaults (the fact `policies` of rules/facts.yaml), the catalog and Little's law on `workload`'s facts."""
    facts, assumed = apply_defaults(flatten_facts(workload.known()), policies)
    model, gpu, link, catalog_assumed = resolve_catalog(facts, knowledge)
    derived = littles_law(facts, model, gpu, knowledge, parameters)
    if derived is not None:
        catalog_assumed.append(derived)
    return Prepared(facts, assumed + catalog_assumed, model, gpu, link)


def derive(workload: Workload, knowledge: Knowledge, policies: Mapping, parameters: Mapping,
           sized: Mapping | None = None) -> Derived:
    """Facts -> defaults -> catalog -> figures (sized with the `parameters` of rules/parameters.yaml, name ->
    value); raises InputError/CatalogError on bad ids. `sized`: `derive_state` of the same facts, made earlier
    (the build search's state of the chosen candidate), whose figures are taken instead of sizing them again."""
    ready = prepare(workload, knowledge, policies, parameters)
    facts = ready.facts
    figures = _figures_of(sized, facts)
    if figures is None:
        figures = compute_figures(facts, ready.model, ready.gpu, ready.link, knowledge, parameters)
    notes = _sizing_assumptions(facts, knowledge)
    return Derived(facts, figures, tuple(ready.assumed + notes), ready.model)


def derive_state(workload: Workload, knowledge: Knowledge, policies: Mapping, parameters: Mapping) -> dict:
    """`derive(...).state()` without what only an answer shows (assumptions, units, descriptions): the state
    the rules start from, for what-if probes."""
    ready = prepare(workload, knowledge, policies, parameters)
    facts = ready.facts
    facts.update(figure_values(facts, ready.model, ready.gpu, ready.link, knowledge, parameters))
    return facts


def _figures_of(sized: Mapping | None, facts: dict) -> dict | None:
    """The figures of a state `derive_state` made for these facts (its names after the facts', in the order
    the sizing wrote them), or None when there is none or it was made for other facts."""
    if sized is None or any(sized.get(name, _ABSENT) != value for name, value in facts.items()):
        return None
    return {name: Figure(name, value, FIGURE_SPECS[name][1], FIGURE_SPECS[name][2])
            for name, value in sized.items() if name not in facts}


_ABSENT = object()


def littles_law(facts: dict, model, gpu, knowledge: Knowledge, params: Mapping) -> Assumption | None:
    """Requests in flight for a live service given a request rate and no concurrency (Little's law): the rate x the
    time each request is in flight on the cheapest plan of the facts' card (the FP8 lane, or the 4-bit lane when FP8
    weights do not fit; as many single-node replicas as the rate needs, each at its share). Added to `facts`."""
    if facts.get("task") != "inference" or "concurrency" in facts or "context_tokens" not in facts \
            or model is None or gpu is None or not facts.get("gpus_per_node") or "latency" not in facts:
        return None
    demand = serving_lane.demand_of(facts, knowledge)
    if not demand.requests_per_s:
        return None
    gpus = int(facts["gpus_per_node"])
    kv = facts.get("kv_cache_precision", "bf16")
    for lane_name in figures_serving.SERVED:
        precision = figures_serving.lane_precision(lane_name, gpu, facts, model)
        load = figures_serving.serving_load(model, gpu, precision, facts["context_tokens"], knowledge, params, kv)
        if load.weights_fit(gpus) or lane_name == figures_serving.SERVED[-1]:
            break
    found = serving_lane.lane(model, gpu, gpus, precision, load, demand, knowledge)
    point = serving_lane.shared(found, serving_lane.replicas_needed(found, demand), demand, knowledge)
    seconds = point.ttft_s + demand.output * point.tpot_s
    facts["concurrency"] = max(1, min(10_000_000, math.ceil(demand.requests_per_s * seconds)))
    return Assumption("concurrency", facts["concurrency"],
                      f"Little's law: {demand.requests_per_s:,.4g} requests/s x {seconds:,.3g} s each is in flight "
                      f"(its first token in {point.ttft_s:,.3g} s, then {demand.output:,.0f} tokens at "
                      f"{point.per_user_tokens_per_s:,.3g} tokens/s) on {precision.upper()} replicas of {gpu.id}")


def _sizing_assumptions(facts, knowledge) -> list[Assumption]:
    out = []
    target = knowledge.latency_target(facts["latency"]) if "latency" in facts else None
    if facts.get("task") in INFERENCE_TASKS and target is not None:
        out.append(Assumption("per_user_tokens_per_s", target,
                              f"each of the concurrent requests decodes at the {facts['latency']} target "
                              "(MLPerf's time-per-output-token limit, knowledge/latency.yaml); concurrency x "
                              "this is a throughput demand"))
    if facts.get("task") in TRAINING_TASKS:
        training = knowledge.constant("training")
        if facts["task"] in ("lora", "qlora"):
            out.append(Assumption("lora_rank", training["lora_rank"],
                                  "adapters of this rank on every linear layer (experts included) size the trainable "
                                  "state"))
        if "training_tokens" in facts:
            out.append(Assumption("mfu", training["mfu"], "model FLOPs utilisation of a tuned run on SXM cards (the "
                                  "Llama 3 paper's 38-43% on H100); PCIe cards take the document's SXM penalty "
                                  "(training_mfu in the figures)"))
    return out
