"""Why not the other kinds: for each kind not chosen, the nearest rule recommending it and what failed.

"Nearest" is the rule with the fewest false `when` conditions about the workload's own facts (a
rule for another task is far: the buyer would have to describe a different job), then the fewest
false conditions in all, then the one tried first. Each failing condition is shown with the
actual values of the names it mentions and the values of the parameters (thresholds) it compares
them with. A name with no value reads as what it is: a fact not given, a plan field not set, a figure
unknown, or a conclusion no rule drew - false, with the rule and the figures that kept it so.
"""
from __future__ import annotations

from ..domain.derive import derive
from ..domain.state import FACT_TYPES, RECOMMENDATION_TYPES, RECOMMENDED_KIND, unflatten_facts
from ..domain.vocabulary import KINDS
from ..domain.workload import Workload, validate_facts
from ..engine.chaining import run_rules
from ..lang import nodes
from ..lang.semantics import MISSING, truth_of
from .model import FailingCondition, WhyNot


def answer_facts(answer) -> dict:
    """The facts of an Answer (or its JSON dict) as a mapping that validates as a Workload."""
    facts = answer.facts if hasattr(answer, "facts") else answer.get("facts", {})
    return unflatten_facts(dict(facts))


def run_on_facts(expert, facts) -> tuple[list, dict]:
    """(firings, final state) of the expert's rules on `facts` (a Workload or a mapping)."""
    workload = facts if isinstance(facts, Workload) else validate_facts(facts)
    ruleset = expert.ruleset
    derived = derive(workload, expert.knowledge, ruleset.fact_policies, ruleset.parameter_values)
    return run_rules(ruleset, derived.state(), expert.engine)


def state_of(expert, answer_or_state) -> tuple[list | None, dict]:
    """Accept an Answer, an answer dict, a decision dict, a final state or a facts mapping."""
    if isinstance(answer_or_state, Workload):
        return run_on_facts(expert, answer_or_state)
    if hasattr(answer_or_state, "recommendation") and hasattr(answer_or_state, "facts"):
        return run_on_facts(expert, answer_facts(answer_or_state))
    if isinstance(answer_or_state, dict):
        if RECOMMENDED_KIND in answer_or_state:
            return None, answer_or_state
        if isinstance(answer_or_state.get("answer"), dict):
            return run_on_facts(expert, answer_facts(answer_or_state["answer"]))
        if "recommendation" in answer_or_state and "facts" in answer_or_state:
            return run_on_facts(expert, answer_facts(answer_or_state))
        return run_on_facts(expert, answer_or_state)
    raise TypeError(f"cannot explain a {type(answer_or_state).__name__}")


def show(value) -> str:
    """A value as a rule author writes it."""
    if value is MISSING or value is None:
        return "unknown"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


def plain(value):
    return None if value is MISSING else value


def condition_values(condition_node, state: dict, params: dict, ruleset=None) -> tuple[dict, dict]:
    """(actual values of the non-parameter names, values of the parameters) a condition mentions; with the
    rule set, a conclusion that rules only ever conclude `true` and that none drew is false (the rules ran
    to the end: nothing else could have concluded it)."""
    actual, thresholds = {}, {}
    for name in dict.fromkeys(n.id for n in nodes.names_in(condition_node)):
        if name in params:
            thresholds[name] = params[name]
        else:
            value = plain(state.get(name, MISSING))
            if value is None and ruleset is not None and _true_only(name, ruleset):
                value = False
            actual[name] = value
    return actual, thresholds


def describe_values(actual: dict, thresholds: dict, notes: dict | None = None) -> str:
    """`name is value` for each value and `name = value` for each threshold; `notes` (name -> words) say
    what an absent value is, or why a conclusion is false."""
    notes = notes or {}
    parts = [f"{name} is {notes.get(name) or show(value)}" for name, value in actual.items()]
    parts += [f"{name} = {show(value)}" for name, value in thresholds.items()]
    return "; ".join(parts)


def _concluders(name: str, ruleset) -> tuple:
    return ruleset.concluders.get(name, ())


def _true_only(name: str, ruleset) -> bool:
    """Every rule that concludes `name` concludes it `true` (so its absence at the end means false)."""
    concluders = _concluders(name, ruleset)
    return bool(concluders) and all(value is True for rule in concluders
                                    for key, value in rule.source.then.conclude if key == name)


def _why_false(name: str, env: dict, state: dict, ruleset, params: dict) -> list[str]:
    """For each rule that would conclude `name`: the conditions that fail, with their values (one level deep:
    a conclusion they name reads 'false' without its own reasons)."""
    reasons = []
    for rule in _concluders(name, ruleset):
        failed = _failed_conditions(rule, env)
        if failed:
            needs = [f"{c.text} ({describe_values(*condition_values(c.node, state, params, ruleset))})" for c in failed]
            reasons.append(f"rule '{rule.id}' needs {' and '.join(needs)}")
    return reasons


def absent_notes(names, present: dict, state: dict, ruleset, params: dict) -> dict:
    """name -> what its absence from `present` means: 'not given' (a fact), 'not set by the plan', or for a
    conclusion no rule drew, 'false' with each concluding rule's failing conditions and their values in
    `state` (the final state). Figures the facts do not allow stay 'unknown' (no note)."""
    env = {**params, **state}
    notes = {}
    for name in names:
        if name in params or present.get(name, MISSING) not in (MISSING, None):
            continue
        if name in FACT_TYPES:
            notes[name] = "not given"
        elif name in RECOMMENDATION_TYPES:
            notes[name] = "not set by the plan"
        elif _true_only(name, ruleset) and state.get(name, MISSING) is MISSING:
            reasons = _why_false(name, env, state, ruleset, params)
            notes[name] = "false" + (f", as no rule concluded it: {'; '.join(reasons)}" if reasons else "")
        elif state.get(name, MISSING) is not MISSING:
            notes[name] = f"not yet concluded (concluded later as {show(state[name])})"
    return notes


def _failed_conditions(rule, env: dict) -> list:
    return [condition for condition in rule.source.when if not truth_of(condition.node, env)]


def _on_facts(conditions, params) -> int:
    """How many of the conditions are about input facts only (not figures, conclusions or parameters)."""
    count = 0
    for condition in conditions:
        names = _names_of(condition.node) - params.keys()
        if names and names <= FACT_TYPES.keys():
            count += 1
    return count


def _names_of(node) -> frozenset:
    """The names a condition mentions, kept per condition (a rule set's conditions are few and never change;
    the node is kept beside its names, so a recycled id never finds another node's)."""
    found = _NAMES.get(id(node))
    if found is None or found[0] is not node:
        if len(_NAMES) >= 65536:  # bounded: reloads bring new rule sets
            _NAMES.clear()
        found = _NAMES[id(node)] = (node, frozenset(n.id for n in nodes.names_in(node)))
    return found[1]


_NAMES: dict = {}  # id(condition node) -> (node, the names it mentions)


def _failing(conditions, state: dict, params: dict, ruleset) -> list[FailingCondition]:
    out = []
    for condition in conditions:
        actual, thresholds = condition_values(condition.node, state, params, ruleset)
        notes = absent_notes(actual, state, state, ruleset, params)
        described = describe_values(actual, thresholds, notes)
        text = f"{condition.text} ({described})" if actual or thresholds else condition.text
        out.append(FailingCondition(condition=condition.text, values=actual, thresholds=thresholds, text=text))
    return out


def _decider(firings):
    """The rule that recommended the kind, when the firings are known."""
    for firing in firings or ():
        if firing.added.get(RECOMMENDED_KIND):
            return firing.rule
    return None


def why_not(expert, answer_or_state) -> list[WhyNot]:
    """For each kind other than the chosen one: the nearest rule recommending it and why it did not fire."""
    firings, state = state_of(expert, answer_or_state)
    return why_not_from(expert, firings, state)


def why_not_from(expert, firings, state: dict) -> list[WhyNot]:
    """`why_not` on a run already made: its firings (or None) and its final state."""
    ruleset = expert.ruleset
    params = ruleset.parameter_values
    env = {**params, **state}
    chosen = state.get(RECOMMENDED_KIND)
    decider = _decider(firings)
    out = []
    for kind in KINDS:
        if kind == chosen:
            continue
        candidates = ruleset.rules_by_kind.get(kind)
        if not candidates:
            out.append(WhyNot(kind=kind, rule=None, failing=[], preempted_by=None,
                              text=f"{kind} was not chosen: no rule recommends it"))
            continue
        # only the nearest rule is described: counting failures is cheap, describing them is not
        _, _, _, rule, failed = min(((_on_facts(f, params), len(f), rule.order, rule, f) for rule in candidates
                                     for f in [_failed_conditions(rule, env)]), key=lambda item: item[:3])
        out.append(_nearest(kind, rule, _failing(failed, state, params, ruleset), decider, chosen))
    return out


def _nearest(kind, rule, failing: list[FailingCondition], decider, chosen) -> WhyNot:
    """The why-not of `kind` from its nearest rule: what failed, or what pre-empted it."""
    preempted_by = None
    if failing:
        text = f"{kind} was not chosen: rule '{rule.id}' needs " + " and ".join(f.text for f in failing)
    elif decider:
        preempted_by = decider.id
        text = (f"{kind} was not chosen: rule '{rule.id}' holds, but rule '{decider.id}' "
                f"(priority {decider.priority:g}) recommended {chosen} first")
    else:
        text = f"{kind} was not chosen: rule '{rule.id}' holds, but {chosen} was recommended first"
    return WhyNot(kind=kind, rule=rule.id, priority=rule.priority, file=rule.location.file,
                  line=rule.location.line, heuristics=list(rule.heuristics), failing=failing,
                  preempted_by=preempted_by, text=text)
