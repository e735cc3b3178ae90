"""The one-direction pipeline: facts -> sizing -> rules -> recommendation with its trace."""
from __future__ import annotations

from ..domain.catalog import Knowledge
from ..domain.derive import derive
from ..domain.plan import plan_figures
from ..domain.state import RECOMMENDED_KIND, recommendation_key
from ..domain.workload import Workload
from ..engine.chaining import run_rules
from ..errors import EngineError
from ..lang.templates import render_template
from ..ruleset.compiler import RuleSet
from .model import Answer, AssumptionOut, FigureOut, Parallelism, Recommendation, RulesetId, TraceStep, WarningOut
from .questions import missing_facts

_SUMMARY = {
    "single-node": "Buy one {gpus_per_node} x {gpu} node at {precision}.",
    "single-node-int4": "Buy one {gpus_per_node} x {gpu} node and serve the model at INT4.",
    "dp-replicas": "Buy {replicas} data-parallel replica(s) of {unit} behind a load balancer ({nodes} node(s) in "
                   "all); no cluster fabric.",
    "dp-replicas-of-units": "Buy {replicas} data-parallel replica(s) of a {unit} unit behind a load balancer "
                            "({nodes} node(s) in all); each unit's nodes need {interconnect} between them.",
    "multi-node-ib": "Buy a {nodes}-node {gpus_per_node} x {gpu} cluster on {interconnect} (TP={tp} inside each node, "
                     "PP={pp} across).",
    "frontier": "This is frontier work: {nodes}+ nodes on {interconnect} or SXM-class hardware; Kentino can build "
                "the IB side, but most who ask need not do this work themselves.",
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
    for name in ("interconnect", "sharding"):
        if values[name] == "none":
            values[name] = None
    unit = f"{values['pp']}-node" if values.get("pp") else "one node"
    template = _SUMMARY["dp-replicas-of-units" if kind == "dp-replicas" and values.get("pp") else kind]
    summary = render_template(template, {**values, "unit": f"{unit} {values['gpus_per_node']} x {values['gpu']}"})
    reasons = [f.because for f in firings if f.added.get(RECOMMENDED_KIND)]
    if reasons:
        summary += " " + reasons[0]
    return Recommendation(kind=kind, nodes=_int(values["nodes"]), gpus_per_node=_int(values["gpus_per_node"]),
                          gpu=values["gpu"], precision=values["precision"], replicas=_int(values["replicas"]),
                          parallelism=Parallelism(tp=_int(values["tp"]), pp=_int(values["pp"]), dp=_int(values["dp"]),
                                                  sharding=values["sharding"]),
                          interconnect=values["interconnect"], summary=summary)


def _plan_of(rec: Recommendation) -> dict:
    """The recommendation as the plan the domain's plan figures describe."""
    return {"kind": rec.kind, "precision": rec.precision, "nodes": rec.nodes, "replicas": rec.replicas,
            "gpu": rec.gpu, "gpus_per_node": rec.gpus_per_node, **rec.parallelism.model_dump()}


def _int(value):
    return None if value is None else int(value)


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


def answer_for(workload: Workload, knowledge: Knowledge, ruleset: RuleSet, backend) -> Answer:
    """Run the whole pipeline on validated facts with the given rule backend."""
    return answer_traced(workload, knowledge, ruleset, backend)[0]


def answer_traced(workload: Workload, knowledge: Knowledge, ruleset: RuleSet, backend):
    """(answer, firings, final state): the final state lets "why not" reuse this run instead of repeating it."""
    derived = derive(workload, knowledge, ruleset.fact_policies, ruleset.parameter_values)
    firings, final = run_rules(ruleset, derived.state(), backend)
    params = ruleset.parameter_values
    recommendation = _recommendation(final, derived.facts, firings)
    figures = {**derived.figures, **plan_figures(_plan_of(recommendation), derived.facts, derived.model, knowledge,
                                                  params)}
    answer = Answer(
        status="provisional" if provisional(workload, ruleset) else "final",
        recommendation=recommendation,
        figures={name: FigureOut(value=f.value, unit=f.unit, description=f.description)
                 for name, f in figures.items()},
        warnings=_warnings(firings, params, final),
        assumptions=[AssumptionOut(fact=a.fact, value=a.value, why=a.why) for a in derived.assumptions],
        trace=_trace(firings),
        ruleset=RulesetId(digest=ruleset.digest, engine=backend.version, directory=ruleset.directory,
                          knowledge_directory=knowledge.directory, files=ruleset.files),
        facts=derived.facts,
    )
    return answer, firings, final
