"""The one-direction pipeline: facts -> build search -> sizing -> rules -> recommendation with its trace."""
from __future__ import annotations

from ..domain.catalog import Knowledge
from ..domain.deadlines import TIME_FIGURE_SPECS, time_figures
from ..domain.derive import derive
from ..domain.figures_serving import document_quote
from ..domain.plan import plan_figures
from ..domain.provenance import serving_provenance, training_provenance
from ..domain.serving_lane import demand_of
from ..domain.state import RECOMMENDED_KIND, recommendation_key, whole_count
from ..domain.workload import Workload, validate_facts
from ..engine.chaining import run_rules
from ..errors import EngineError
from ..lang.templates import render_template
from ..ruleset.compiler import RuleSet
from .model import (
    Answer,
    AssumptionOut,
    FigureOut,
    Parallelism,
    Recommendation,
    RulesetId,
    SpeedProvenance,
    TraceStep,
    WarningOut,
    figure_out,
)
from .plans import EngineEvaluator, PlanEvaluator
from .questions import missing_facts
from .quotes import Pricer, bill_of, price_list_id, quote_figures, recommended_plan
from .search import search

_SUMMARY = {
    "single-node": "Buy one {gpus_per_node} x {gpu} node at {precision}.",
    "single-node-int4": "Buy one {gpus_per_node} x {gpu} node and serve the model at INT4.",
    "dp-replicas": "Buy {replicas} data-parallel replica(s) of {unit} behind a load balancer ({nodes} node(s) in "
                   "all); no cluster fabric.",
    "dp-replicas-of-units": "Buy {replicas} data-parallel replica(s) of a {unit} unit behind a load balancer "
                            "({nodes} node(s) in all); each unit's nodes need {interconnect} between them.",
    "multi-node-ib": "Buy a {nodes}-node {gpus_per_node} x {gpu} cluster on {interconnect} (TP={tp} inside each node, "
                     "PP={pp} across).",
    "multi-node-ib-of-units": "Buy a {nodes}-node {gpus_per_node} x {gpu} cluster on {interconnect} (TP={tp} inside "
                              "each node, PP={pp} across, {units} data-parallel copies of that {pp}-node unit).",
    "multi-node-ib-data-parallel": "Buy a {nodes}-node {gpus_per_node} x {gpu} cluster on {interconnect} "
                                   "(data-parallel across all {gpus} GPUs, sharded inside each node).",
    "frontier": "This is frontier work: {nodes} nodes on {interconnect} or SXM-class hardware; Kentino can build "
                "the IB side, but most who ask need not do this work themselves.",
    "frontier-without-fabric": "This is frontier work: {nodes} node(s) of {gpus_per_node} x {gpu} at the least, or "
                               "SXM-class hardware; most who ask need not do this work themselves.",
}


def _recommendation(final: dict, facts: dict, firings) -> Recommendation:
    def field(name):
        return final.get(recommendation_key(name))

    kind = field("kind")
    if kind is None:
        raise EngineError("no rule recommended anything; the rule set needs a fallback rule")
    values = {
        "nodes": field("nodes"), "gpus_per_node": field("gpus_per_node") or facts.get("gpus_per_node"),
        "gpu": field("gpu") or facts.get("gpu"), "precision": field("precision"), "replicas": field("replicas"),
        "interconnect": field("interconnect"), "tp": field("tp"), "pp": field("pp"), "dp": field("dp"),
        "sharding": field("sharding"),
    }
    for name in ("nodes", "gpus_per_node", "replicas", "tp", "pp", "dp"):
        values[name] = whole_count(values[name])  # the summary states the counts the answer holds
    for name in ("interconnect", "sharding"):
        if values[name] == "none":
            values[name] = None
    unit = f"{values['pp']}-node" if values.get("pp") else "one node"
    gpus = (values["nodes"] or 0) * (values["gpus_per_node"] or 0)
    summary = render_template(_SUMMARY[_summary_key(kind, values)],
                              {**values, "unit": f"{unit} {values['gpus_per_node']} x {values['gpu']}",
                               "units": (values["nodes"] or 0) // (values["pp"] or 1), "gpus": gpus})
    reasons = [f.because for f in firings if f.added.get(RECOMMENDED_KIND)]
    if reasons:
        summary += " " + reasons[0]
    return Recommendation(kind=kind, nodes=_int(values["nodes"]), gpus_per_node=_int(values["gpus_per_node"]),
                          gpu=values["gpu"], precision=values["precision"], replicas=_int(values["replicas"]),
                          parallelism=Parallelism(tp=_int(values["tp"]), pp=_int(values["pp"]), dp=_int(values["dp"]),
                                                  sharding=values["sharding"]),
                          interconnect=values["interconnect"], summary=summary)


def _summary_key(kind: str, values: dict) -> str:
    """Which summary sentence a plan gets: replicas of multi-node units, and IB clusters that copy a PP
    unit or train data-parallel only, have their own."""
    if kind == "dp-replicas" and values.get("pp"):
        return "dp-replicas-of-units"
    if kind == "multi-node-ib" and not values.get("pp"):
        return "multi-node-ib-data-parallel"
    if kind == "multi-node-ib" and (values.get("dp") or 1) > 1:
        return "multi-node-ib-of-units"
    if kind == "frontier" and not values.get("interconnect"):
        return "frontier-without-fabric"  # the closest build was replicas or one node: no fabric to name
    return kind


def _plan_of(rec: Recommendation, final: dict) -> dict:
    """The recommendation as the plan the domain's plan figures describe (with the scale-out unit the rules
    sized, for a plan over nodes that names no PP)."""
    return {"kind": rec.kind, "precision": rec.precision, "nodes": rec.nodes, "replicas": rec.replicas,
            "gpu": rec.gpu, "gpus_per_node": rec.gpus_per_node, "unit_nodes": final.get("scale_out_nodes"),
            "interconnect": rec.interconnect,
            **rec.parallelism.model_dump()}


def _int(value):
    return None if value is None else int(whole_count(value))


def _warnings(firings, params, final) -> list[WarningOut]:
    out = []
    for firing in firings:
        warn = firing.rule.source.then.warn
        if warn:
            message = render_template(warn[1], {**params, **final})
            out.append(WarningOut(code=warn[0], message=message, heuristics=list(firing.rule.heuristics),
                                rule=firing.rule.id))
    return out


def _trace(firings) -> list[TraceStep]:
    return [TraceStep(step=index, rule=f.rule.id, heuristics=list(f.rule.heuristics), file=f.rule.location.file,
                      line=f.rule.location.line, matched=f.matched, concluded=f.added, because=f.because)
            for index, f in enumerate(firings, start=1)]


def provisional(workload: Workload, ruleset: RuleSet) -> bool:
    """An answer is provisional while a fact that has an `ask` and could matter is unknown (the one place
    the status is decided: a decision's status is its answer's)."""
    return bool(missing_facts(workload, ruleset))


def answer_for(workload: Workload, knowledge: Knowledge, ruleset: RuleSet, backend,
               evaluator: PlanEvaluator | None = None) -> Answer:
    """Run the whole pipeline on validated facts with the given rule backend."""
    return answer_traced(workload, knowledge, ruleset, backend, evaluator)[0]


def answer_traced(workload: Workload, knowledge: Knowledge, ruleset: RuleSet, backend,
                  evaluator: PlanEvaluator | None = None):
    """(answer, firings, final state): the final state lets "why not" reuse this run instead of repeating it.

    With a selection policy (rules/selection.yaml) the build search picks the candidate first, from plans
    of `evaluator` (default: the rule set on `backend`, uncached); the chosen candidate's facts then run
    once with the whole rule set and its trace. Without one, the rules answer the facts as given.
    """
    assumed, alternatives, search_state, sized = [], [], {}, None
    if ruleset.selection is not None:
        evaluator = evaluator or EngineEvaluator(knowledge, ruleset, backend)
        found = search(workload, knowledge, ruleset, evaluator)
        assumed = [AssumptionOut(fact=fact, value=value, why=why) for fact, value, why in found.assumed]
        alternatives, search_state = found.alternatives, found.search_state
        chosen = validate_facts(found.facts)
        sized = found.start_state  # the chosen candidate is sized already when the search derived it whole
    else:
        chosen = workload
    derived = derive(chosen, knowledge, ruleset.fact_policies, ruleset.parameter_values, sized)
    firings, final = run_rules(ruleset, {**derived.state(), **search_state}, backend)
    params = ruleset.parameter_values
    recommendation = _recommendation(final, derived.facts, firings)
    plan = _plan_of(recommendation, final)
    figures = {**derived.figures, **plan_figures(plan, derived.facts, derived.model, knowledge, params)}
    out_figures = _figures(figures, final, knowledge)
    quote = _quote(recommendation, out_figures, knowledge, ruleset)
    answer = Answer(
        status="provisional" if provisional(workload, ruleset) else "final",
        recommendation=recommendation,
        figures=out_figures,
        warnings=_warnings(firings, params, final),
        assumptions=assumed + [AssumptionOut(fact=a.fact, value=a.value, why=a.why) for a in derived.assumptions],
        trace=_trace(firings),
        ruleset=RulesetId(digest=ruleset.digest, engine=backend.version, directory=ruleset.directory,
                          knowledge_directory=knowledge.directory, files=ruleset.files),
        facts=derived.facts,
        provenance=speed_provenance(plan, derived, out_figures, knowledge, params),
        alternatives=alternatives,
        bill_of_materials=bill_of(quote),
        price_list=price_list_id(ruleset.prices) if quote is not None else None,
    )
    return answer, firings, final


def _quote(recommendation: Recommendation, figures: dict, knowledge: Knowledge, ruleset: RuleSet):
    """The recommended build's quote, its figures added to `figures` (None: no price list, or frontier work)."""
    values = {name: figure.value for name, figure in figures.items()}
    quote = Pricer(knowledge, ruleset.prices).quote(recommended_plan(recommendation, values))
    if quote is not None:
        for name, (value, unit, description) in quote_figures(quote).items():
            figures[name] = figure_out(value, unit, description)
    return quote


def speed_provenance(plan: dict, derived, figures: dict, knowledge: Knowledge, params) -> list[SpeedProvenance]:
    """How the plan's speed and time figures were obtained (domain/provenance.py)."""
    values = {name: figure.value for name, figure in figures.items()}
    facts, model, out = derived.facts, derived.model, []
    if model is not None and plan.get("gpu") and "per_user_tokens_per_s" in values:
        gpu = knowledge.gpu(plan["gpu"])
        precision = plan["precision"]
        tp = int(plan.get("tp") or plan["gpus_per_node"])
        groups = max(1, int(plan.get("nodes") or 1) * int(plan["gpus_per_node"]) // tp)
        demand = demand_of(facts, knowledge)
        out.append(serving_provenance(model, gpu.id, precision, tp, values.get("concurrency_in_flight", 1) / groups,
                                      demand.prompt, demand.output, values, knowledge, document_quote(params)))
    found = training_provenance(values, values.get("training_mfu"))
    if found is not None:
        out.append(found)
    return [SpeedProvenance(figures=list(p.figures), **{k: v for k, v in vars(p).items() if k != "figures"})
            for p in out]


def _figures(figures: dict, final: dict, knowledge: Knowledge) -> dict[str, FigureOut]:
    """The figures the rules saw and the recommended plan's per-GPU figures, then its time to result."""
    out = {name: figure_out(f.value, f.unit, f.description) for name, f in figures.items()}
    for name, value in time_figures(final, knowledge).items():
        _, unit, description = TIME_FIGURE_SPECS[name]
        out[name] = figure_out(value, unit, description)
    return out
