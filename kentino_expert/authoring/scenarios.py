"""Scenario tests a product manager writes: expectations on answers, a runner, and rule coverage."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..domain.deadlines import TIME_FIGURE_SPECS
from ..domain.figures import FIGURE_SPECS, PLAN_FIGURE_SPECS
from ..domain.state import RECOMMENDED_KIND
from ..domain.vocabulary import KINDS, PRECISIONS, STATUSES
from ..errors import InputError, KentinoError, Location, did_you_mean
from ..yamlsrc import YamlSourceError, decode_utf8, load_yaml, location_of
from ..yamlsrc import to_plain as _plain

EXPECT_KEYS = ("kind", "nodes", "nodes_min", "nodes_max", "precision", "status", "heuristics", "warnings",
               "rules", "not_rules", "not_warnings", "figures")


@dataclass(frozen=True)
class Scenario:
    """One named workload with what its answer must (and must not) contain."""

    name: str
    facts: dict
    expect: dict
    location: Location
    item_locations: dict = field(default_factory=dict, compare=False)  # (key, index) -> Location


@dataclass
class Outcome:
    """The result of one scenario: failures as (what, expected, actual), and who decided."""

    scenario: Scenario
    failures: list = field(default_factory=list)
    fired: list = field(default_factory=list)
    deciders: list = field(default_factory=list)
    error: str | None = None

    @property
    def passed(self) -> bool:
        return not self.failures and self.error is None



def load_scenarios(paths, ruleset=None) -> list[Scenario]:
    """Read scenario files (a YAML list of {name, facts, expect}); directories are searched for *.yaml.

    With `ruleset`, rule ids, warning codes and heuristic ids are checked against it too, so that a
    bad file stops before anything runs; `run_all` checks each scenario against the rule set it runs
    either way (callers such as `rules diff` load without one).
    """
    scenarios = []
    for given in map(Path, paths):
        files = sorted(given.rglob("*.yaml")) if given.is_dir() else [given]
        found = [scenario for path in files for scenario in _read_file(path)]
        if not found:  # a run pointed at an empty or wrong directory would otherwise pass, checking nothing
            why = " (no *.yaml file in it)" if given.is_dir() and not files else ""
            raise InputError(f"{given}: holds no scenarios{why}: there is nothing to test")
        scenarios += found
    if ruleset is not None:
        validate_scenarios(scenarios, ruleset)
    return scenarios


def _read_file(path: Path) -> list[Scenario]:
    try:
        data = load_yaml(decode_utf8(path.read_bytes(), str(path)), str(path))
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except YamlSourceError as exc:
        raise InputError(exc.message, location=exc.location) from None
    if not isinstance(data, list):
        raise InputError("a scenario file is a list of {name, facts, expect}", location=Location(str(path), 1, 1))
    return [_scenario(item, data, index, str(path)) for index, item in enumerate(data)]


SCENARIO_KEYS = ("name", "facts", "expect")
_CHOICES = {"kind": KINDS, "precision": PRECISIONS, "status": STATUSES}
_LIST_KEYS = ("heuristics", "warnings", "rules", "not_rules", "not_warnings")
_TEXT_KEYS = tuple(_CHOICES)
_COUNT_KEYS = ("nodes", "nodes_min", "nodes_max")
FIGURE_NAMES = (*FIGURE_SPECS, *PLAN_FIGURE_SPECS, *TIME_FIGURE_SPECS)  # every figure an answer can give


def _scenario(item, container, index, filename) -> Scenario:
    where = location_of(container, index, filename)
    if not isinstance(item, dict):
        raise InputError("each scenario needs 'name', 'facts' and 'expect'", location=where)
    for key in item:
        if key not in SCENARIO_KEYS:  # a misspelt `expect` would otherwise check nothing at all
            raise InputError(f"unknown scenario key '{key}'", location=_key_location(item, key, where),
                             suggestion=did_you_mean(str(key), SCENARIO_KEYS))
    for key in SCENARIO_KEYS:  # without `expect` a scenario checks nothing; `expect: {}` says so on purpose
        if item.get(key) is None:
            state = "has no value" if key in item else "is missing"
            raise InputError(f"each scenario needs 'name', 'facts' and 'expect': '{key}' {state}",
                             location=_key_location(item, key, where))
    name = item["name"]
    if isinstance(name, bool) or not isinstance(name, (str, int, float)) or not str(name).strip():
        raise InputError("'name' must be a non-empty text", location=_key_location(item, "name", where))
    if not isinstance(item["facts"], dict):
        raise InputError("'facts' must be a mapping of input facts", location=_key_location(item, "facts", where))
    expect = item["expect"]
    if not isinstance(expect, dict):
        raise InputError("'expect' must be a mapping", location=_key_location(item, "expect", where))
    for key in expect:
        if key not in EXPECT_KEYS:
            raise InputError(f"unknown expectation '{key}'", location=_key_location(expect, key, where),
                             suggestion=did_you_mean(str(key), EXPECT_KEYS))
        problem, suggestion = _expectation_problem(key, _plain(expect[key]))
        if problem:
            raise InputError(f"expect.{key}: {problem}", location=_key_location(expect, key, where),
                             suggestion=suggestion)
    empty = _empty_range(expect)
    if empty:  # no answer can pass: every run would FAIL, reading like a defect of the rules
        raise InputError(f"expect.{empty[0]}: {empty[1]}", location=_key_location(expect, empty[0], where))
    items = {(key, i): loc for key in _LIST_KEYS if key in expect
             for i, loc in enumerate(getattr(expect[key], "item_locations", []))}
    return Scenario(str(name), _plain(item["facts"]), _plain(expect), where, items)


def _empty_range(expect: dict) -> tuple[str, str] | None:
    """(key, why) when a minimum is above its maximum (nodes_min/nodes_max, a figure's min/max), else None."""
    if "nodes_min" in expect and "nodes_max" in expect and expect["nodes_min"] > expect["nodes_max"]:
        return "nodes_min", f"{expect['nodes_min']} is above nodes_max {expect['nodes_max']}: no answer can pass"
    for name, bound in (expect.get("figures") or {}).items():
        if isinstance(bound, dict) and "min" in bound and "max" in bound and bound["min"] > bound["max"]:
            return "figures", f"figure '{name}': min {bound['min']} is above max {bound['max']}: no answer can pass"
    return None


def _key_location(mapping, key, default):
    return getattr(mapping, "key_locations", {}).get(key, default)


def _expectation_problem(key: str, value) -> tuple:
    """(why an expectation's value is wrong, a suggestion), or (None, None)."""
    problem = _shape_problem(key, value)
    if problem is None and key in _CHOICES and value not in _CHOICES[key]:
        # `kind: singel-node` would otherwise be an ordinary FAIL that reads like a rule defect
        return f"'{value}' is not one of {', '.join(_CHOICES[key])}", did_you_mean(value, _CHOICES[key])
    unknown = [name for name in value if name not in FIGURE_NAMES] if problem is None and key == "figures" else []
    if unknown:  # a misspelt figure would FAIL as "got absent", as if the answer lacked it
        return f"'{unknown[0]}' is not a figure an answer gives", did_you_mean(str(unknown[0]), FIGURE_NAMES)
    return problem, None


def _shape_problem(key: str, value) -> str | None:
    """Why an expectation's value has the wrong shape, or None."""
    if key in _LIST_KEYS:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return "must be a list of names, e.g. [one-node-is-the-market]"
    elif key in _TEXT_KEYS:
        if not isinstance(value, str):
            return "must be a single name"
    elif key in _COUNT_KEYS:
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be a whole number"
    elif key == "figures":
        if not isinstance(value, dict):
            return "must map figure names to a number or {min, max}"
        for name, bound in value.items():
            bounds = bound.values() if isinstance(bound, dict) else [bound]
            if (isinstance(bound, dict) and (not bound or set(bound) - {"min", "max"})) or not all(
                    isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds):
                return f"figure '{name}' needs a number or {{min: N, max: N}}"
            odd = [b for b in bounds if isinstance(b, float) and not math.isfinite(b)]
            if odd:  # every comparison with .nan is false: the bound would pass any value
                return f"figure '{name}' needs a finite number, not {odd[0]}"
    return None


def _check_figures(expect, answer, failures):
    for name, bound in (expect.get("figures") or {}).items():
        figure = answer.figures.get(name)
        if figure is None:
            failures.append((f"figure {name}", bound, "absent"))
            continue
        value = figure.value
        if isinstance(bound, dict):
            low, high = bound.get("min"), bound.get("max")
            if (low is not None and value < low) or (high is not None and value > high):
                failures.append((f"figure {name}", f"[{low}, {high}]", value))
        elif value != bound:
            failures.append((f"figure {name}", bound, value))


def check(expect: dict, answer) -> list:
    """Every unmet expectation as (what, expected, actual)."""
    rec, failures = answer.recommendation, []
    fired = [step.rule for step in answer.trace]
    heuristics = {h for step in answer.trace for h in step.heuristics}
    warnings = {w.code for w in answer.warnings}
    for key, actual in (("kind", rec.kind), ("nodes", rec.nodes), ("precision", rec.precision),
                        ("status", answer.status)):
        if key in expect and expect[key] != actual:
            failures.append((key, expect[key], actual))
    if "nodes_min" in expect and (rec.nodes or 0) < expect["nodes_min"]:
        failures.append(("nodes_min", expect["nodes_min"], rec.nodes))
    if "nodes_max" in expect and (rec.nodes or 0) > expect["nodes_max"]:
        failures.append(("nodes_max", expect["nodes_max"], rec.nodes))
    for key, present, must in (("heuristics", heuristics, True), ("warnings", warnings, True),
                               ("rules", set(fired), True), ("not_rules", set(fired), False),
                               ("not_warnings", warnings, False)):
        wanted = set(expect.get(key) or [])
        missing = wanted - present if must else wanted & present
        if missing:
            failures.append((key, sorted(wanted), sorted(present & wanted) if must else sorted(missing)))
    _check_figures(expect, answer, failures)
    return failures


def run_scenario(expert, scenario: Scenario, shown=str) -> Outcome:
    """The scenario's answer checked against its expectations; the deciding rules named with their places, each
    file as `shown` prints it (the CLI: as it opens from the working directory)."""
    try:
        answer = expert.recommend(scenario.facts)
    except KentinoError as exc:
        return Outcome(scenario, error=str(exc))
    deciders = [f"{s.rule} ({shown(s.file)}:{s.line})" for s in answer.trace if RECOMMENDED_KIND in s.concluded]
    return Outcome(scenario, check(scenario.expect, answer), [s.rule for s in answer.trace], deciders)


@dataclass
class Coverage:
    """How often each rule fired over a run."""

    counts: dict

    @property
    def percent(self) -> float:
        return 100.0 * sum(1 for n in self.counts.values() if n) / len(self.counts) if self.counts else 100.0

    @property
    def never_fired(self) -> list:
        return [rule for rule, n in self.counts.items() if not n]


_KNOWN = {"rules": "rule", "not_rules": "rule", "warnings": "warning code", "not_warnings": "warning code",
          "heuristics": "heuristic"}


def _known_ids(ruleset) -> dict:
    rules = [rule.id for rule in ruleset.rules]
    warnings = [rule.source.then.warn[0] for rule in ruleset.rules if rule.source.then.warn]
    return {"rule": rules, "warning code": warnings, "heuristic": list(ruleset.heuristics)}


def scenario_problems(scenario: Scenario, known: dict) -> list[InputError]:
    """Ids an expectation names that the rule set does not have: a misspelt `not_rules` entry
    would pass forever, a misspelt `rules` entry fail for a reason that is not a rule's."""
    problems = []
    for key, what in _KNOWN.items():
        for index, value in enumerate(scenario.expect.get(key) or []):
            if value not in known[what]:
                where = scenario.item_locations.get((key, index), scenario.location)
                problems.append(InputError(f"expect.{key}: '{value}' is not a {what} of the rule set",
                                           location=where, suggestion=did_you_mean(value, known[what])))
    return problems


def validate_scenarios(scenarios, ruleset) -> None:
    """Raise the first unknown rule id, warning code or heuristic id, located."""
    known = _known_ids(ruleset)
    for scenario in scenarios:
        problems = scenario_problems(scenario, known)
        if problems:
            raise problems[0]


def run_all(expert, scenarios, progress=None, shown=str) -> tuple[list[Outcome], Coverage]:
    counts = {rule.id: 0 for rule in expert.ruleset.rules}
    outcomes, known = [], _known_ids(expert.ruleset)
    for index, scenario in enumerate(scenarios):
        problems = scenario_problems(scenario, known)
        # not run: its verdict would be meaningless; reported as an input error of the scenario file
        outcome = (Outcome(scenario, error=f"input error: {problems[0]}") if problems
                   else run_scenario(expert, scenario, shown))
        for rule in outcome.fired:
            counts[rule] = counts.get(rule, 0) + 1
        outcomes.append(outcome)
        if progress:
            progress(index + 1, len(scenarios))
    return outcomes, Coverage(counts)


def failure_lines(outcome: Outcome) -> list[str]:
    head = f"FAIL {outcome.scenario.location}: {outcome.scenario.name}"
    if outcome.error:
        return [f"{head}: error: {outcome.error}"]
    decided = ", ".join(outcome.deciders) or "no rule"
    return [f"{head}: {what}: expected {expected}, got {actual} (decided by {decided})"
            for what, expected, actual in outcome.failures]
