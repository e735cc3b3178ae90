"""The build search's candidates: the builds to size (every card Kentino ships in its shapes, and the buyer's),
how the selection policy judges and ranks a sized plan, and the sizing itself as a search that asks for one
candidate's plan at a time, so that many searches (a turn's what-if probes) are sized in rounds, each round one
batch for the evaluator (`run_sizings`)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..domain.quote import Quote
from ..errors import KentinoError
from ..ruleset.selection import SelectionPolicy
from .conditions import truth_closure
from .plans import Plan, PlanEvaluator
from .quotes import Pricer, work_price

# what a candidate's evaluation may raise on facts it cannot size (a card the buyer did not name is skipped)
FAILURES = (KentinoError, ArithmeticError, ValueError, TypeError, RecursionError)


@dataclass(frozen=True)
class Candidate:
    """One build to size: a card, a node shape (None: the fact's default) and a precision (None: the rules')."""

    gpu: str
    gpus_per_node: int | None
    precision: str | None
    named: bool  # agrees with every part of the build the buyer named (and the buyer named one)
    order: int

    def facts(self, known: dict) -> dict:
        out = {**known, "gpu": self.gpu}
        if self.gpus_per_node is not None:
            out["gpus_per_node"] = self.gpus_per_node
        if self.precision is not None:
            out["precision"] = self.precision
        return out


@dataclass(frozen=True)
class Judged:
    """A candidate's plan and the policy's verdict on it."""

    candidate: Candidate
    plan: Plan
    failing: object | None  # the first `works` condition that does not hold, or None: buildable
    extra: dict = field(default_factory=dict)  # values judged with besides the plan's (a removed deadline)
    quote: Quote | None = None  # what the plan costs (rules/prices.yaml; None without a price list)
    # the state the rules started from when the candidate was derived whole (the traced answer's, if chosen)
    start: dict | None = field(default=None, compare=False, repr=False)

    @property
    def works(self) -> bool:
        return self.failing is None


def candidates_of(known: dict, knowledge) -> list[Candidate]:
    """The shipped cards in their shapes, and the build the buyer named (a card Kentino does not ship too)."""
    named_gpu = knowledge.gpu(known["gpu"]).id if "gpu" in known else None
    named_shape = known.get("gpus_per_node")
    cards = [gpu for gpu in knowledge.gpus.values() if gpu.kentino_ships or gpu.id == named_gpu]
    out = []
    for card in cards:
        shapes = list(card.node_shapes)
        if named_shape is not None:
            shapes = [named_shape] + [shape for shape in shapes if shape != named_shape]
        for shape in shapes or [None]:
            named = (named_gpu is not None or named_shape is not None) and named_gpu in (None, card.id) \
                and named_shape in (None, shape)
            out.append(Candidate(card.id, shape, None, named, len(out)))
    return out


def judge(candidate: Candidate, plan: Plan, policy: SelectionPolicy, params, extra: dict | None = None,
          pricer: Pricer | None = None, start: dict | None = None) -> Judged:
    env = {**params, **plan.values, **(extra or {})}
    failing = next((item for item in policy.works if not truth_closure(item.node)(env)), None)
    return Judged(candidate, plan, failing, dict(extra or {}), pricer.quote(plan) if pricer is not None else None,
                  start)


def rank_of(judged: Judged, policy: SelectionPolicy, any_buildable: bool, task: str | None = None) -> tuple:
    plan, candidate = judged.plan, judged.candidate
    allowed = policy.precisions.get(task, ())
    values = {
        "task-precision": 0 if not allowed or plan.precision in allowed else 1,
        "named-build": 0 if candidate.named and (judged.works or not any_buildable) else 1,
        "buildable": 0 if judged.works else 1,
        "flow-precision": 0 if candidate.precision is None else 1,
        "lighter-kind": _index(policy.kinds, plan.kind_class),
        "fewer-gpus": plan.gpus,
        "fewer-nodes": plan.nodes or 1,
        "card-preference": _index(policy.cards, candidate.gpu),
        "cheapest": judged.quote.price_total if judged.quote is not None else math.inf,
        "cheapest-to-run": work_price(judged.quote),
    }
    return tuple(values[criterion] for criterion in policy.order) + (candidate.order,)


def _bound(candidate: Candidate, policy: SelectionPolicy, pricer: Pricer | None) -> tuple:
    """The best rank a candidate not yet sized could have once a buildable plan is known."""
    values = {
        "named-build": 0 if candidate.named else 1, "buildable": 0, "task-precision": 0,
        "flow-precision": 0 if candidate.precision is None else 1, "lighter-kind": 0,
        "fewer-gpus": candidate.gpus_per_node or 1, "fewer-nodes": 1,
        "card-preference": _index(policy.cards, candidate.gpu),
        "cheapest": pricer.floor(candidate.gpu, candidate.gpus_per_node) if pricer is not None else 0.0,
        "cheapest-to-run": 0.0,  # a price of the work needs the plan's speed: nothing is known before it is sized
    }
    return tuple(values[criterion] for criterion in policy.order) + (candidate.order,)


def _index(values: tuple, value) -> int:
    return values.index(value) if value in values else len(values)


def sizing(candidates, known, policy, params, task, every: bool, pricer: Pricer | None = None):
    """The judged plans, sizing the most promising candidates first: a generator that yields a candidate's facts
    and is sent back (plan, start state) or the exception sizing raised; it returns the judged plans. With `every`
    false it stops once a buildable plan outranks the best any candidate left could reach (what the pick needs;
    alternatives need `every`). On a build whose own plan is not buildable the other precisions the task allows
    are tried too (when the buyer named none), kept when they take effect; `flow-precision` ranks them after.

    A candidate that fails to size is left out unless it is the buyer's own build or every one fails (then
    the first error is the answer's)."""
    pending, judged, first_error = list(candidates), [], None
    best, best_rank = None, None
    bounds: dict = {}  # a candidate's bound depends on it and the policy only: worked out once

    def bound(candidate: Candidate) -> tuple:
        found = bounds.get(candidate)
        if found is None:
            found = bounds[candidate] = _bound(candidate, policy, pricer)
        return found

    while pending:
        pending.sort(key=bound)
        if not every and best is not None and best_rank < bound(pending[0]):
            break
        candidate = pending.pop(0)
        outcome = yield candidate.facts(known)
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, FAILURES) or (candidate.named and candidate.precision is None):
                raise outcome
            first_error = first_error or outcome
            continue
        plan, start = outcome
        if candidate.precision is not None and plan.precision != candidate.precision:
            continue  # the rules did not take the forced precision: the rules' own plan already stands
        item = judge(candidate, plan, policy, params, pricer=pricer, start=start)
        judged.append(item)
        if item.works:
            rank = rank_of(item, policy, True, task)
            if best is None or rank < best_rank:
                best, best_rank = item, rank
        if not item.works and candidate.precision is None and "precision" not in known:
            pending += [Candidate(candidate.gpu, candidate.gpus_per_node, precision, candidate.named, candidate.order)
                        for precision in policy.precisions.get(task, ()) if precision != plan.precision]
    if not judged and first_error is not None:
        raise first_error
    return judged


def run_sizings(searches: list, evaluator: PlanEvaluator) -> list:
    """Each search's judged plans (or the exception it raised), the searches sized in rounds: every round asks
    the evaluator for one batch, the next candidate of each search still going (`sized_many` when the evaluator
    has it: a Turn sizes them and decides them in one pass; else one at a time). A search alone is sized as
    before, one candidate after another."""
    results: list = [None] * len(searches)
    asks: dict = {}
    for index, search in enumerate(searches):
        _advance(index, search, None, asks, results)
    while asks:
        order = list(asks)
        for index, outcome in zip(order, sized_many(evaluator, [asks[i] for i in order]), strict=True):
            _advance(index, searches[index], outcome, asks, results)
    return results


def _advance(index: int, search, outcome, asks: dict, results: list) -> None:
    """Send a search its candidate's outcome (None to start it): its next ask, or its result when it ends."""
    try:
        asks[index] = search.send(outcome)
    except StopIteration as stop:
        asks.pop(index, None)
        results[index] = stop.value
    except Exception as exc:  # noqa: BLE001 - the search's own error (its named build, or every build, failed)
        asks.pop(index, None)
        results[index] = exc


def sized_many(evaluator: PlanEvaluator, batch: list) -> list:
    """(plan, start state) or the exception raised, for each mapping of facts of `batch`."""
    many = getattr(evaluator, "sized_many", None)
    if many is not None:
        return many(batch)
    out = []
    for facts in batch:
        try:
            out.append(evaluator.sized(facts))
        except Exception as exc:  # noqa: BLE001 - handed to the search, which raises what it does not skip
            out.append(exc)
    return out
