"""The facts still worth asking for: missing, relevant to the task, with the question to ask, ranked by what-if.

`missing_facts` lists the unknown facts that matter for the task (an answer is provisional while any
is unknown). `rank_questions` re-runs the rules with a few probe values of each missing fact
(knowledge/probes.yaml, loaded and checked with the catalog; enumerated facts are probed with every value)
and ranks the questions by how many other kinds of recommendation the answer could lead to.
"""
from __future__ import annotations

from ..domain.state import FACT_TYPES, unflatten_facts
from ..domain.vocabulary import KINDS
from ..domain.workload import Workload, validate_facts
from ..errors import KentinoError
from ..lang.valuetypes import is_enum
from .model import Probe, Question


def given_facts(answer: dict) -> dict:
    """The facts the caller gave, from an answer's JSON: its facts without the defaults its assumptions list
    (and without the catalog's params_b beside a model)."""
    assumed = {a["fact"] for a in answer.get("assumptions", [])}
    facts = {k: v for k, v in (answer.get("facts") or {}).items() if k not in assumed}
    if "model" in facts:
        facts.pop("params_b", None)
    return unflatten_facts(facts)


def missing_facts(workload: Workload, ruleset) -> list[str]:
    """Facts relevant to the workload's task that the caller has not given."""
    known = workload.known()
    if "proposed_build" in known:
        known["proposed_nodes"] = True
    missing = []
    for name, policy in ruleset.fact_policies.items():
        if name in known or not policy.tasks or workload.task not in policy.tasks:
            continue
        if any(other in known for other in policy.answered_by):
            continue
        missing.append(name)
    return missing


def probe_values(expert, fact: str) -> tuple:
    """The values a what-if question about `fact` is probed with (may be empty)."""
    kind = FACT_TYPES.get(fact)
    if is_enum(kind):
        return tuple(kind[1])
    knowledge = expert.knowledge
    if fact in knowledge.probes:
        return knowledge.probes[fact]
    if fact == "model":  # a small, a medium and a large catalog model
        models = sorted(knowledge.models.values(), key=lambda m: m.params_b)
        if not models:
            return ()
        picks = [models[0], models[len(models) // 2], models[-1]]
        return tuple(dict.fromkeys(m.id for m in picks))
    if fact == "gpu":
        return tuple(g.id for g in knowledge.gpus.values() if g.kentino_ships)
    if fact == "interconnect":
        return tuple(link.id for link in knowledge.links.values() if link.scope == "inter-node")
    return ()


# what a probe may raise and is then skipped: facts that do not validate, arithmetic that fails on them
_SKIPPED = (KentinoError, ArithmeticError, ValueError)


def build_for(evaluator, facts) -> tuple | None:
    """The recommendation's (kind, nodes, gpu, gpus_per_node, precision) for `facts` from `evaluator` (an Expert or
    a request's Turn), or None when the facts do not validate or the arithmetic fails on them."""
    try:
        return evaluator.build_of(facts)
    except _SKIPPED:
        # a probe value the caller never gave (e.g. deadline_days next to a huge corpus) must not
        # refuse the caller's own facts: that probe is skipped
        return None


def _probe_build(found):
    """A probe's build from Turn.builds_of: None for facts that do not validate or arithmetic that fails (as
    build_for), raising any other error."""
    if isinstance(found, _SKIPPED):
        return None
    if isinstance(found, BaseException):
        raise found
    return found


def kind_for(evaluator, facts) -> str | None:
    """The recommendation kind the rules reach for `facts` (None as build_for)."""
    build = build_for(evaluator, facts)
    return build[0] if build is not None else None


def rank_questions(expert, workload, current_kind: str | None = None, turn=None) -> list[Question]:
    """Missing facts worth asking for - some value tried changes the build (kind, nodes, card, shape or precision)
    - ranked by how many other recommendation kinds their answer could lead to; ties keep the order of
    rules/facts.yaml. A fact no value of which changes the build is not asked (and keeps no answer provisional).
    The probes share the derivation of the turn's facts: `turn` is the request's (expert.kinds.turn), made here
    when not given."""
    workload = workload if isinstance(workload, Workload) else validate_facts(workload)
    ruleset = expert.ruleset
    known = workload.known()
    missing = missing_facts(workload, ruleset)
    if not missing:
        return []
    items = []
    if turn is None or turn.bases is None:
        turn = expert.kinds.turn(workload)
    asked = [(fact, value) for fact in missing for value in probe_values(expert, fact)]
    # the current build and every probe's, their searches sized together (one batch per round)
    builds = [_probe_build(found) for found in turn.builds_of([known] + [{**known, f: v} for f, v in asked])]
    current = builds[0]
    reached_by = {fact: [] for fact in missing}
    for (fact, value), build in zip(asked, builds[1:], strict=True):
        reached_by[fact].append((value, build))
    if current_kind is None:
        current_kind = current[0] if current else None
    for order, fact in enumerate(missing):
        builds = [(value, build) for value, build in reached_by[fact] if build is not None]
        if current is not None and builds and all(build == current for _, build in builds):
            continue  # every value tried leaves the build as it is: not worth asking (none evaluated: still asked)
        probes = [Probe(value=value, kind=build[0], nodes=build[1], gpu=build[2], precision=build[4])
                  for value, build in builds]
        reached = {probe.kind for probe in probes}
        could = [k for k in KINDS if k in reached]
        alternatives = [k for k in could if k != current_kind]
        policy = ruleset.fact_policies.get(fact)
        items.append((-len(alternatives), order, Question(
            fact=fact, ask=policy.ask if policy else "", could_lead_to=could, current_kind=current_kind,
            alternatives=alternatives, probes=probes)))
    items.sort(key=lambda item: (item[0], item[1]))
    return [item for _, _, item in items]
