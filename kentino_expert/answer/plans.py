"""A candidate build's plan for the build search: what the rules recommend for some facts, with the names the
selection policy reads, from a run without a trace (an evaluator a faster engine can replace)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..domain.catalog import Knowledge
from ..domain.deadlines import TIME_FIGURE_INPUTS, TIME_FIGURE_SPECS
from ..domain.derive import derive
from ..domain.figures import FIGURE_SPECS
from ..domain.plan import build_figures
from ..domain.state import RECOMMENDED_KIND, recommendation_key, whole_count
from ..domain.workload import validate_facts
from ..engine.chaining import effects_of
from ..lang import nodes
from ..lang.templates import render_layers, template_names
from ..ruleset.compiler import RuleSet


@dataclass(frozen=True)
class Plan:
    """What the rules recommend for one candidate's facts: the plan, the names the policy reads (from the
    final state and the plan figures) and the deciding rule's sentence."""

    kind: str | None
    nodes: int | None
    gpus_per_node: int | None
    gpu: str | None
    precision: str | None
    pp: int | None
    values: Mapping  # name -> value, for every name of the policy's `reads` the run produced
    because: str
    time_to_result_days: float | None = None  # the plan figure (training, a batch corpus), whatever `reads` holds
    figures: Mapping = field(default_factory=dict)  # the build's own figures (BUILD_FIGURES), as every build has them
    tp: int | None = None
    dp: int | None = None
    interconnect: str | None = None
    replicas: int | None = None

    @property
    def kind_class(self) -> str | None:
        """The kind, with replicas of multi-node units (which need a fabric inside each unit) told apart."""
        if self.kind == "dp-replicas" and (self.pp or 1) > 1:
            return UNIT_REPLICAS
        return self.kind

    @property
    def gpus(self) -> int:
        """GPUs in all (a plan without a node count is one node)."""
        return (self.nodes or 1) * (self.gpus_per_node or 1)


class PlanEvaluator(Protocol):
    """Gives the plan for a mapping of facts (the build search's only need of an engine)."""

    def plan_of(self, facts: Mapping) -> Plan:
        """The plan the rules reach for `facts` (raises KentinoError on facts that do not validate)."""

    def sized(self, facts: Mapping) -> tuple[Plan, dict | None]:
        """(plan_of(facts), the state it started from as `derive_state` makes it, when the evaluator derived these
        facts whole, else None): the search hands the chosen candidate's state to the traced answer."""

    def plan_with(self, facts: Mapping, extra: Mapping) -> Plan:
        """The plan the rules reach for these facts with `extra` names added to their state (what the build search
        tells the rules: the closest build when none works)."""


TIME_FIGURE = "time_to_result_days"  # the plan figure every alternative carries (TIME_FIGURE_SPECS)
# the figures of every build an answer shows (the recommendation's top-level figures use the same names): part of
# the answer's contract
BUILD_FIGURES = ("output_tokens_per_s", "per_user_tokens_per_s", "time_to_first_token_s", "concurrency_in_flight",
                 "plan_gpu_memory_gb", "plan_gpu_memory_fraction", "time_to_result_days", "plan_efficiency")
UNIT_REPLICAS = "dp-replicas-of-units"  # a kind class of selection.yaml's `kinds`, beside the kinds

# the units of the recommendation fields a `works` condition may name as its figure
_RECOMMENDATION_UNITS = {"recommended_nodes": "nodes", "recommended_replicas": "replicas"}


def unit_of(name: str) -> str:
    """The unit of a figure, a plan figure or a recommendation field ('' when it has none)."""
    spec = FIGURE_SPECS.get(name) or TIME_FIGURE_SPECS.get(name)
    return spec[1] if spec else _RECOMMENDATION_UNITS.get(name, "")


def plan_from(final: dict, decider, ruleset: RuleSet, knowledge: Knowledge) -> Plan:
    """The plan of a final state; `decider` is the rule that recommended (None when none did)."""
    params = ruleset.parameter_values
    own = build_figures(final, knowledge, params)
    state = {**final, **own}
    reads = ruleset.selection.reads if ruleset.selection else frozenset()
    values = {name: state[name] for name in reads if name in state}
    because = render_layers(decider.source.because, (state, params)) if decider is not None else ""

    def field(name):
        return whole_count(state.get(recommendation_key(name)))

    return Plan(kind=field("kind"), nodes=field("nodes"),
                gpus_per_node=field("gpus_per_node") or whole_count(state.get("gpus_per_node")),
                gpu=field("gpu") or state.get("gpu"), precision=field("precision"), pp=field("pp"), values=values,
                because=because, time_to_result_days=state.get(TIME_FIGURE),
                figures={name: own[name] for name in BUILD_FIGURES if name in own}, tp=field("tp"), dp=field("dp"),
                interconnect=state.get(recommendation_key("interconnect")), replicas=field("replicas"))


class EngineEvaluator:
    """Plans from a rule set on a backend, uncached: each evaluation derives the facts and runs the rules
    without a trace, noting only which rule recommended."""

    def __init__(self, knowledge: Knowledge, ruleset: RuleSet, engine):
        self.knowledge, self.ruleset, self.engine = knowledge, ruleset, engine

    def plan_of(self, facts: Mapping) -> Plan:
        return self.plan_of_state(self.state_of(facts))

    def sized(self, facts: Mapping) -> tuple[Plan, None]:
        return self.plan_of(facts), None  # the traced answer sizes the chosen candidate again

    def plan_with(self, facts: Mapping, extra: Mapping) -> Plan:
        return self.plan_of_state({**self.state_of(facts), **extra})

    def state_of(self, facts: Mapping) -> dict:
        """The state the rules start from for `facts` (validated and derived)."""
        ruleset = self.ruleset
        return derive(validate_facts(dict(facts)), self.knowledge, ruleset.fact_policies,
                      ruleset.parameter_values).state()

    def plan_of_state(self, state: dict) -> Plan:
        """The plan the rules reach from a derived state."""
        params = self.ruleset.parameter_values
        deciders = []

        def apply(rule, current):
            added = effects_of(rule, current, params)
            if RECOMMENDED_KIND in added:
                deciders.append(rule)
            return added

        _, final = self.engine.run(dict(state), apply)
        return plan_from(final, deciders[0] if deciders else None, self.ruleset, self.knowledge)


def plan_inputs(ruleset: RuleSet) -> frozenset[str]:
    """Every state name a plan of `ruleset` can depend on: what its rules read (conditions, recommend values,
    sentences), what the selection policy reads, and what the plan figures are computed from. Two states
    equal on these names give the same plan."""
    names = set(TIME_FIGURE_INPUTS)
    if ruleset.selection is not None:
        names |= ruleset.selection.reads
    for rule in ruleset.rules:
        names |= set(rule.reads) | template_names(rule.source.because)
        for _, value in rule.source.then.recommend:
            if hasattr(value, "node"):
                names |= {node.id for node in nodes.names_in(value.node)}
    return frozenset(names)
