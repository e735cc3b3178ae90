"""The build search: every card Kentino ships in every node shape it sells (and the build the buyer named),
each sized and decided by the same rules; rules/selection.yaml picks the recommendation and the best plan of
every other card becomes an alternative.

Only plans are evaluated here (a run without a trace, plans.py); the pipeline then runs the chosen
candidate's facts once more with the whole rule set and its trace. A faster evaluator can be passed in.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..domain.derive import apply_defaults
from ..domain.state import flatten_facts
from ..domain.workload import MAX_GPUS_PER_NODE, Workload
from ..lang.templates import render_layers
from ..ruleset.compiler import RuleSet
from ..ruleset.ranges import PER_NODE_COUNTS
from ..ruleset.selection import PRICE_CRITERIA, SelectionPolicy, expand_shown
from .candidates import FAILURES, Candidate, Judged, candidates_of, judge, rank_of, run_sizings, sizing
from .model import Alternative, DecidingFigure
from .plans import Plan, PlanEvaluator, unit_of
from .quotes import Pricer, bill_of, price_text

__all__ = ["Candidate", "Judged", "SearchResult", "candidates_of", "decided_plan", "decided_plans", "judge", "pick",
           "search"]

SEARCH_WHY = "chosen by the build search among the cards Kentino ships (rules/selection.yaml); see alternatives"
PRICE_WHY = ("the cheapest build that works among the cards Kentino ships (rules/selection.yaml `cheapest`, "
             "rules/prices.yaml); see alternatives")


@dataclass(frozen=True)
class SearchResult:
    """The chosen candidate, what the answer says about the search, and the alternatives."""

    chosen: Judged
    facts: dict  # the chosen candidate's facts: the answer's
    assumed: list = field(default_factory=list)  # (fact, value, why) the search chose for the buyer
    search_state: dict = field(default_factory=dict)  # named_* (state.SEARCH_TYPES) when the named build lost
    alternatives: list = field(default_factory=list)

    @property
    def start_state(self) -> dict | None:
        """The chosen candidate's starting state when the search derived it whole (the traced answer takes it
        instead of sizing the candidate again), else None."""
        return self.chosen.start


def pick(workload: Workload, knowledge, ruleset: RuleSet, evaluator: PlanEvaluator) -> Judged:
    """The recommendation's candidate alone: only the candidates that could still outrank the best buildable plan
    found are sized (what-if probes need the kind, not the alternatives, the assumptions or the named build)."""
    return _ranked(workload, knowledge, ruleset, evaluator, every=False)[0]


def decided_plan(workload: Workload, knowledge, ruleset: RuleSet, evaluator: PlanEvaluator) -> Plan:
    """The plan the answer recommends: the pick's, or, when no build works, the rules' own answer on the closest
    build's facts told so (the closest_* names the traced answer runs with)."""
    found = decided_plans([workload], knowledge, ruleset, evaluator)[0]
    if isinstance(found, BaseException):
        raise found
    return found


def decided_plans(workloads: list, knowledge, ruleset: RuleSet, evaluator: PlanEvaluator) -> list:
    """decided_plan of each workload (or the exception it raised), their searches sized together in rounds (a
    turn's what-if probes: each round is one batch of candidates for the evaluator)."""
    pricer = Pricer(knowledge, ruleset.prices)
    searches = [sizing(candidates_of(w.known(), knowledge), w.known(), ruleset.selection, ruleset.parameter_values,
                       w.task, False, pricer) for w in workloads]
    out = []
    for workload, judged in zip(workloads, run_sizings(searches, evaluator), strict=True):
        try:
            if isinstance(judged, BaseException):
                raise judged
            chosen = _sorted(judged, ruleset.selection, workload.task)[0]
            state = _nothing_works_state([chosen], ruleset.parameter_values)
            out.append(evaluator.plan_with(chosen.candidate.facts(workload.known()), state) if state else chosen.plan)
        except Exception as exc:  # noqa: BLE001 - handed back per workload: decided_plan raises it
            out.append(exc)
    return out


def search(workload: Workload, knowledge, ruleset: RuleSet, evaluator: PlanEvaluator) -> SearchResult:
    """Size every candidate, pick the recommendation by the policy and list the others (`pick` for the pick
    alone)."""
    policy, params = ruleset.selection, ruleset.parameter_values
    known = workload.known()
    pricer = Pricer(knowledge, ruleset.prices)
    ranked = _ranked(workload, knowledge, ruleset, evaluator, every=True, pricer=pricer)
    chosen = ranked[0]
    facts = chosen.candidate.facts(known)
    state = {**_switch_state(ranked, chosen, params), **_nothing_works_state(ranked, params),
             **_price_state(ranked, chosen, policy, workload.task)}
    return SearchResult(chosen, facts, _assumed(chosen, known, ruleset, state.get("price_decided", False)), state,
                        _alternatives(ranked, chosen, known, evaluator, policy, params, pricer))


def _ranked(workload: Workload, knowledge, ruleset: RuleSet, evaluator: PlanEvaluator, every: bool,
            pricer: Pricer | None = None) -> list[Judged]:
    """The sized candidates (every one, or as `sizing` stops without `every`), best first by the policy."""
    known = workload.known()
    search_ = sizing(candidates_of(known, knowledge), known, ruleset.selection, ruleset.parameter_values,
                     workload.task, every, pricer or Pricer(knowledge, ruleset.prices))
    judged = run_sizings([search_], evaluator)[0]
    if isinstance(judged, BaseException):
        raise judged
    return _sorted(judged, ruleset.selection, workload.task)


def _sorted(judged: list[Judged], policy: SelectionPolicy, task: str | None) -> list[Judged]:
    any_buildable = any(item.works for item in judged)
    return sorted(judged, key=lambda item: rank_of(item, policy, any_buildable, task))


def _assumed(chosen: Judged, known: dict, ruleset: RuleSet, priced: bool = False) -> list[tuple]:
    """(fact, value, why) for each part of the build the search chose: a fact default's own reason when the
    search kept the default's value."""
    _, defaults = apply_defaults(flatten_facts(known), ruleset.fact_policies)
    default_of = {a.fact: a for a in defaults}
    out = []
    candidate = chosen.candidate
    for fact, value in (("gpu", candidate.gpu), ("gpus_per_node", candidate.gpus_per_node),
                        ("precision", candidate.precision)):
        if value is None or fact in known:
            continue
        default = default_of.get(fact)
        why = PRICE_WHY if priced and fact == "gpu" else SEARCH_WHY
        out.append((fact, value, default.why if default is not None and default.value == value and not priced
                    else why))
    return out


def _reason(judged: Judged, params) -> str:
    """The failing condition's sentence, or why a buildable plan lost."""
    if judged.failing is None:
        return "it is buildable, but rules/selection.yaml ranks another build first."
    return render_layers(judged.failing.says, (judged.extra, judged.plan.values, params))


def _switch_state(ranked: list[Judged], chosen: Judged, params) -> dict:
    """named_* when the buyer named a build and the recommendation moved off it."""
    named = next((item for item in ranked if item.candidate.named), None)
    if named is None or chosen.candidate.named:
        return {}
    plan = named.plan
    state = {"named_build_switched": True, "named_gpu": named.candidate.gpu, "named_reason": _reason(named, params)}
    if named.failing is not None:
        state["named_test"] = named.failing.id
    for name, value in (("named_gpus_per_node", plan.gpus_per_node), ("named_kind", plan.kind),
                        ("named_nodes", plan.nodes)):
        if value is not None and not (name in PER_NODE_COUNTS and value > MAX_GPUS_PER_NODE):
            state[name] = value  # a count above the box bound is left out: rules' arithmetic is proven on it
    return state


def _price_state(ranked: list[Judged], chosen: Judged, policy: SelectionPolicy, task: str) -> dict:
    """price_decided and runner_up_* when the price decided between the recommendation and the next build that
    works on another card; cheaper_* when the buyer's named build is kept although another card's works for less."""
    if chosen.quote is None or not chosen.works:
        return {}
    others = [item for item in ranked if item.works and item.quote is not None
              and item.candidate.gpu != chosen.candidate.gpu]
    base = {"price_currency": chosen.quote.currency, "chosen_price": round(chosen.quote.price_total)}
    if chosen.candidate.named:
        cheaper = min(others, key=lambda item: item.quote.price_total, default=None)
        if cheaper is None or cheaper.quote.price_total >= chosen.quote.price_total:
            return {}
        plan = cheaper.plan
        return {**base, "cheaper_gpu": cheaper.candidate.gpu, "cheaper_gpus_per_node": plan.gpus_per_node or 0,
                "cheaper_nodes": max(1, int(plan.nodes or 1)),
                "cheaper_saving": round(chosen.quote.price_total - cheaper.quote.price_total)}
    if not others or not set(PRICE_CRITERIA) & set(policy.order):
        return {}
    mine, theirs = rank_of(chosen, policy, True, task), rank_of(others[0], policy, True, task)
    first = next((index for index, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b), None)
    if first is None or first >= len(policy.order) or policy.order[first] not in PRICE_CRITERIA:
        return {}
    return {**base, "price_decided": True, "runner_up_gpu": others[0].candidate.gpu,
            "runner_up_price": round(others[0].quote.price_total),
            "chosen_price_text": price_text(chosen.quote, policy.order[first]),
            "runner_up_price_text": price_text(others[0].quote, policy.order[first])}


def _nothing_works_state(ranked: list[Judged], params) -> dict:
    """closest_* when no build the search weighed works and the closest one is a plan Kentino would build: the
    best-ranked, the test it fails and why (the rules then answer frontier work, saying how far it falls short)."""
    if not ranked or any(item.works for item in ranked) or ranked[0].plan.kind == "frontier":
        return {}  # something works; or the closest is frontier work already, in the rules' own words
    closest = ranked[0]
    state = {"no_build_works": True, "closest_gpu": closest.candidate.gpu, "closest_test": closest.failing.id,
             "closest_reason": _reason(closest, params)}
    plan = closest.plan
    for name, value in (("closest_nodes", plan.nodes), ("closest_precision", plan.precision),
                        ("closest_gpus_per_node", plan.gpus_per_node), ("closest_tp", plan.tp),
                        ("closest_pp", plan.pp), ("closest_dp", plan.dp), ("closest_replicas", plan.replicas),
                        ("closest_interconnect", plan.interconnect)):
        if value is not None and not (name in PER_NODE_COUNTS and value > MAX_GPUS_PER_NODE):
            state[name] = value  # a count above the box bound is left out: rules' arithmetic is proven on it
    return state


def _alternatives(ranked, chosen, known, evaluator, policy, params, pricer: Pricer) -> list[Alternative]:
    """The slower plan without the deadline (when the deadline forced more nodes), the named build when the
    recommendation left it, and the best plan of every other card, in the policy's order."""
    picked: list[Judged] = []
    slower = _without_deadline(chosen, known, evaluator, policy, params, pricer)
    if slower is not None:
        picked.append(slower)
    named = next((item for item in ranked if item.candidate.named), None)
    if named is not None and named is not chosen:
        picked.append(named)
    cards = {chosen.candidate.gpu} | {item.candidate.gpu for item in picked}
    for item in ranked:
        if item.candidate.gpu not in cards:
            cards.add(item.candidate.gpu)
            picked.append(item)
    return [_alternative(item, policy, params, chosen) for item in picked if item.plan.kind is not None]


def _without_deadline(chosen: Judged, known, evaluator, policy, params, pricer: Pricer) -> Judged | None:
    """The chosen build's plan without the deadline, judged against it, when it needs fewer nodes and has a time
    to result to judge (a live-serving plan has none: there the deadline only raised the demand, and a plan
    without it would be called working while it misses that demand)."""
    if "deadline_days" not in known or (chosen.plan.nodes or 1) <= 1:
        return None
    facts = {k: v for k, v in chosen.candidate.facts(known).items() if k != "deadline_days"}
    try:
        plan = evaluator.plan_of(facts)
    except FAILURES:
        return None
    if (plan.nodes or 1) >= (chosen.plan.nodes or 1) or plan.time_to_result_days is None:
        return None
    return judge(chosen.candidate, plan, policy, params, {"deadline_days": known["deadline_days"]}, pricer)


def _alternative(judged: Judged, policy: SelectionPolicy, params, chosen: Judged | None = None) -> Alternative:
    plan = judged.plan
    values = {**plan.values, **judged.extra}
    if judged.failing is not None:
        name = judged.failing.figure
        why = _reason(judged, params)
    elif _costlier(judged, chosen, policy):
        name = "price_total"
        values = {**values, "price_total": judged.quote.price_total}
        why = (f"it works, but costs {judged.quote.currency} "
               f"{judged.quote.price_total - chosen.quote.price_total:,.0f} more than the recommended build "
               "(rules/selection.yaml ranks the cheaper build that works first).")
    else:
        name = next((expand_shown(n, plan.precision or "") for n in policy.shown
                     if expand_shown(n, plan.precision or "") in values), None)
        why = plan.because
    unit = judged.quote.currency if name == "price_total" and judged.quote is not None else unit_of(name or "")
    figure = DecidingFigure(name=name, value=values.get(name), unit=unit) if name else None
    return Alternative(gpu=judged.candidate.gpu, gpus_per_node=_count(plan.gpus_per_node) or 0, kind=plan.kind,
                       nodes=_count(plan.nodes), precision=plan.precision, works=judged.works, figure=figure, why=why,
                       time_to_result_days=plan.time_to_result_days,
                       figures={**plan.figures, **(judged.quote.figures() if judged.quote is not None else {})},
                       fails=judged.failing.id if judged.failing is not None else None,
                       bill_of_materials=bill_of(judged.quote))


def _costlier(judged: Judged, chosen: Judged | None, policy: SelectionPolicy) -> bool:
    """Whether a working alternative lost on price: it costs more than a working recommendation, by a policy
    that ranks by price."""
    return (chosen is not None and chosen.works and "cheapest" in policy.order and judged.quote is not None
            and chosen.quote is not None and judged.quote.price_total > chosen.quote.price_total
            and judged.plan.kind_class == chosen.plan.kind_class)


def _count(value) -> int | None:
    """A count as the recommendation reports it: a rule may compute a fraction (a PM's `nodes: params_b / 3`),
    which the recommendation truncates; the alternative says the same."""
    return None if value is None else int(value)
