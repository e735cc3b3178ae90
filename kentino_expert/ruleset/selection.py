"""rules/selection.yaml, the build search's policy: the order the recommendation is picked in, the card and
kind preferences, the precisions tried per task, what makes a plan buildable and what an alternative shows
(read and checked here against the rule set's names; answer/search.py runs it)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..domain.deadlines import TIME_FIGURE_SPECS
from ..domain.figure_specs import PLAN_FIGURE_SPECS
from ..domain.vocabulary import KINDS, PRECISIONS, TASKS
from ..errors import Location, did_you_mean
from ..lang import nodes
from ..lang.fold import check_divisors, fold
from ..lang.templates import check_template, template_names
from ..lang.typecheck import check_condition
from ..yamlsrc import location_of
from .diagnostics import DiagnosticSink
from .namespace import Namespace
from .rulefile import Condition, check_keys, id_list, parse_condition, text_field

SELECTION_FILE = "selection.yaml"
# the kinds `kinds` may order: replicas of multi-node units (a fabric inside each unit) apart from replicas
KIND_CLASSES = KINDS[:3] + ("dp-replicas-of-units",) + KINDS[3:]
# how two candidates compare, each criterion in words (docs/rule-language.md lists them)
CRITERIA = {
    "named-build": "the build the buyer named (card, GPUs per node) first, when its plan is buildable or no "
                   "plan is",
    "buildable": "a plan whose `works` conditions all hold first",
    "flow-precision": "the precision the rules choose themselves before one the search forced",
    "lighter-kind": "the kind listed earlier in `kinds` first",
    "fewer-gpus": "fewer GPUs in all (nodes x GPUs per node) first",
    "fewer-nodes": "fewer nodes first",
    "card-preference": "the card listed earlier in `cards` first",
    "cheapest": "the lower purchase price first (rules/prices.yaml)",
    "cheapest-to-run": "the lower price of the work first: per run for training and batch work, per million output "
                       "tokens for serving (the purchase amortized plus energy, rules/prices.yaml)",
    "task-precision": "a plan at a precision `precisions` lists for the task before one the rules fell back to "
                      "(LoRA kept as LoRA before QLoRA)",
}
PRICE_CRITERIA = ("cheapest", "cheapest-to-run")  # the criteria that need a price list
SELECTION_KEYS = ("order", "kinds", "cards", "precisions", "works", "shown")
WORKS_KEYS = ("id", "heuristics", "when", "figure", "says")
PRECISION_PLACEHOLDER = "{precision}"


@dataclass(frozen=True)
class WorksCondition:
    """One thing a buildable plan must satisfy: the condition, the figure that shows it, the sentence when it
    fails."""

    id: str
    heuristics: tuple[str, ...]
    condition: Condition
    node: nodes.Node  # parameters folded in
    figure: str
    says: str


@dataclass(frozen=True)
class SelectionPolicy:
    """The checked policy of the build search."""

    order: tuple[str, ...]
    kinds: tuple[str, ...]
    cards: tuple[str, ...]
    precisions: Mapping[str, tuple[str, ...]]  # task -> precisions tried when the rules' own plan is unbuildable
    works: tuple[WorksCondition, ...]
    shown: tuple[str, ...]  # figures an alternative that works is shown with, the first known one
    reads: frozenset[str]  # every name the policy reads from a plan's final state
    file: str
    parameters: frozenset[str] = frozenset()  # the rules/parameters.yaml names its conditions and sentences read


def plan_namespace(namespace: Namespace) -> Namespace:
    """The rule set's names plus the plan figures (computed after the rules: only the search reads them)."""
    plan = {name: spec[0] for name, spec in {**PLAN_FIGURE_SPECS, **TIME_FIGURE_SPECS}.items()}
    return Namespace({**namespace.types, **plan}, {**namespace.origins, **dict.fromkeys(plan, "plan figure")},
                     namespace.catalog)


def read_selection(data, display: str, namespace: Namespace, params: dict, knowledge,
                   sink: DiagnosticSink) -> SelectionPolicy | None:
    """The policy of a selection file, with every problem recorded in `sink` (None when it has no mapping)."""
    body = data.get("selection") if isinstance(data, dict) else None
    if not isinstance(body, dict):
        sink.error(Location(display, 1, 1), "E004", "expected a top-level 'selection:' mapping")
        return None
    check_keys(data, ("selection",), display, sink, "the selection file")
    check_keys(body, SELECTION_KEYS, display, sink, "selection")
    names = plan_namespace(namespace)
    order = _choices(body, "order", tuple(CRITERIA), display, sink)
    kinds = _choices(body, "kinds", KIND_CLASSES, display, sink)
    cards = _choices(body, "cards", tuple(knowledge.gpus), display, sink)
    _warn_unranked(cards, knowledge, location_of(body, "cards", display), sink)
    works = tuple(item for item in _works(body, display, names, params, knowledge, sink) if item)
    shown = _shown(body, display, names, sink)
    reads = {"recommended_kind", "recommended_nodes", *(expand_shown(v, p) for v in shown for p in PRECISIONS)}
    for item in works:
        # the condition as written: folding replaced the parameters it reads with their values
        reads |= {n.id for n in nodes.names_in(item.condition.node)} | {item.figure} | template_names(item.says)
    return SelectionPolicy(order, kinds, cards, MappingProxyType(_precisions(body, display, sink)), works, shown,
                           frozenset(name for name in reads if name not in params), display,
                           frozenset(name for name in reads if name in params))


def _choices(body, key: str, allowed: tuple, display: str, sink) -> tuple[str, ...]:
    """A required list of distinct values out of `allowed`."""
    if key not in body:
        sink.error(getattr(body, "location", Location(display)), "E004", f"selection needs '{key}'")
        return ()
    values = id_list(body, key, display, sink)
    holder = body[key] if isinstance(body[key], list) else None
    if holder == []:  # an empty order ranks nothing (not even `buildable`); empty kinds or cards prefer nothing
        sink.error(location_of(body, key, display), "E035", f"selection.{key}: needs at least one value")
    for index, value in enumerate(values):
        where = location_of(holder, index, display) if holder is not None else location_of(body, key, display)
        if value not in allowed:
            sink.error(where, "E035", f"selection.{key}: '{value}' is not one of {', '.join(allowed)}",
                       suggestion=did_you_mean(value, allowed))
        elif value in values[:index]:
            sink.error(where, "E035", f"selection.{key}: '{value}' is listed twice")
    return values


def _warn_unranked(cards: tuple[str, ...], knowledge, where: Location, sink) -> None:
    """W310 for a card Kentino ships that `cards` does not list: the search ranks it after every listed card."""
    if not cards:
        return
    for gpu in knowledge.gpus.values():
        if gpu.kentino_ships and gpu.id not in cards:
            sink.warning(where, "W310", f"card '{gpu.id}' ships (kentino_ships: true in knowledge/gpus.yaml) but "
                         "selection.cards does not list it: the build search ranks it after every card listed; "
                         "list it where it ranks")


def _precisions(body, display: str, sink) -> dict[str, tuple[str, ...]]:
    raw = body.get("precisions", {})
    if not isinstance(raw, dict):
        sink.error(location_of(body, "precisions", display), "E035", "selection.precisions maps tasks to precisions")
        return {}
    out = {}
    for task in raw:
        where = raw.key_locations.get(task, location_of(body, "precisions", display))
        if task not in TASKS:
            sink.error(where, "E035", f"selection.precisions: '{task}' is not a task",
                       suggestion=did_you_mean(str(task), TASKS))
            continue
        values = _choices(raw, task, PRECISIONS, display, sink)
        out[str(task)] = values
    return out


def _works(body, display, names, params, knowledge, sink):
    raw = body.get("works", [])
    if not isinstance(raw, list):
        sink.error(location_of(body, "works", display), "E035", "selection.works is a list of {id, when, figure, says}")
        return []
    seen: set = set()
    out = []
    for index, item in enumerate(raw):
        where = location_of(raw, index, display)
        if not isinstance(item, dict):
            sink.error(where, "E035", "each of selection.works is a mapping of id, heuristics, when, figure, says")
            continue
        out.append(_works_condition(item, where, display, names, params, knowledge, seen, sink))
    return out


def _works_condition(item, where, display, names, params, knowledge, seen, sink) -> WorksCondition | None:
    check_keys(item, WORKS_KEYS, display, sink, "a works condition")
    name = text_field(item, "id", display, sink)
    if name in seen:
        sink.error(location_of(item, "id", display), "E105", f"works condition '{name}' is listed twice")
    seen.add(name)
    heuristics = id_list(item, "heuristics", display, sink)
    for hid in heuristics:
        if hid not in knowledge.heuristics:
            sink.error(location_of(item, "heuristics", display), "E104", f"unknown heuristic '{hid}'",
                       suggestion=did_you_mean(hid, knowledge.heuristics))
    figure, says = text_field(item, "figure", display, sink), text_field(item, "says", display, sink)
    if figure and names.type_of(figure) is None:
        sink.error(location_of(item, "figure", display), "E102", f"unknown name '{figure}'",
                   suggestion=did_you_mean(figure, names.names()))
    check_template(says, location_of(item, "says", display), names, sink, None, "says")
    condition = parse_condition(item, "when", display, sink, None) if "when" in item else None
    if "when" not in item:
        sink.error(where, "E004", "a works condition needs 'when'")
    if condition is None or not name:
        return None
    errors = len(sink.errors)
    check_condition(condition.node, names, sink, None, condition.location_at)
    if len(sink.errors) > errors:
        return None
    folded = fold(condition.node, params)
    if check_divisors(folded, sink, None, condition.location_at, "the condition"):
        return None
    return WorksCondition(name, heuristics, condition, folded, figure, says)


def expand_shown(name: str, precision: str) -> str:
    """A `shown` entry for a plan at `precision` (`workload_fraction_{precision}` -> `workload_fraction_fp8`)."""
    return name.replace(PRECISION_PLACEHOLDER, precision)


def _shown(body, display, names, sink) -> tuple[str, ...]:
    values = id_list(body, "shown", display, sink)
    holder = body.get("shown") if isinstance(body.get("shown"), list) else None
    for index, value in enumerate(values):
        known = [expand_shown(value, p) for p in PRECISIONS if names.type_of(expand_shown(value, p)) is not None]
        if not known:
            where = location_of(holder, index, display) if holder is not None else location_of(body, "shown", display)
            sink.error(where, "E102", f"selection.shown: '{value}' names no figure",
                       suggestion=did_you_mean(value, names.names()))
    return tuple(values)

