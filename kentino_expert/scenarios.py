"""Scenario tests a product manager writes: expectations on answers, a runner, and rule coverage."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError, KentinoError, Location
from .yamlsrc import YamlSourceError, load_yaml, location_of, to_plain as _plain

EXPECT_KEYS = ("kind", "nodes", "nodes_min", "nodes_max", "precision", "status", "heuristics", "warnings",
               "rules", "not_rules", "not_warnings", "figures")


@dataclass(frozen=True)
class Scenario:
    """One named workload with what its answer must (and must not) contain."""

    name: str
    facts: dict
    expect: dict
    location: Location


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



def load_scenarios(paths) -> list[Scenario]:
    """Read scenario files (a YAML list of {name, facts, expect}); directories are searched for *.yaml."""
    files = []
    for path in map(Path, paths):
        files += sorted(path.rglob("*.yaml")) if path.is_dir() else [path]
    scenarios = []
    for path in files:
        try:
            data = load_yaml(path.read_text(encoding="utf-8"), str(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: cannot read: {exc}") from None
        except YamlSourceError as exc:
            raise InputError(exc.message, location=exc.location) from None
        if not isinstance(data, list):
            raise InputError("a scenario file is a list of {name, facts, expect}", location=Location(str(path), 1, 1))
        scenarios += [_scenario(item, data, index, str(path)) for index, item in enumerate(data)]
    return scenarios


SCENARIO_KEYS = ("name", "facts", "expect")
_LIST_KEYS = ("heuristics", "warnings", "rules", "not_rules", "not_warnings")
_TEXT_KEYS = ("kind", "precision", "status")
_COUNT_KEYS = ("nodes", "nodes_min", "nodes_max")


def _scenario(item, container, index, filename) -> Scenario:
    from .errors import did_you_mean
    where = location_of(container, index, filename)
    if not isinstance(item, dict) or not isinstance(item.get("facts"), dict):
        raise InputError("each scenario needs 'name', 'facts' and 'expect'", location=where)
    for key in item:
        if key not in SCENARIO_KEYS:  # a misspelt `expect` would otherwise check nothing at all
            raise InputError(f"unknown scenario key '{key}'", location=_key_location(item, key, where),
                             suggestion=did_you_mean(str(key), SCENARIO_KEYS))
    expect = item.get("expect") or {}
    if not isinstance(expect, dict):
        raise InputError("'expect' must be a mapping", location=where)
    for key in expect:
        if key not in EXPECT_KEYS:
            raise InputError(f"unknown expectation '{key}'", location=_key_location(expect, key, where),
                             suggestion=did_you_mean(str(key), EXPECT_KEYS))
        problem = _expectation_problem(key, _plain(expect[key]))
        if problem:
            raise InputError(f"expect.{key}: {problem}", location=_key_location(expect, key, where))
    return Scenario(str(item.get("name", f"scenario {index + 1}")), _plain(item["facts"]), _plain(expect), where)


def _key_location(mapping, key, default):
    return getattr(mapping, "key_locations", {}).get(key, default)


def _expectation_problem(key: str, value) -> str | None:
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
    for key, actual in (("kind", rec.kind), ("nodes", rec.nodes), ("precision", rec.precision), ("status", answer.status)):
        if key in expect and expect[key] != actual:
            failures.append((key, expect[key], actual))
    if "nodes_min" in expect and (rec.nodes or 0) < expect["nodes_min"]:
        failures.append(("nodes_min", expect["nodes_min"], rec.nodes))
    if "nodes_max" in expect and (rec.nodes or 0) > expect["nodes_max"]:
        failures.append(("nodes_max", expect["nodes_max"], rec.nodes))
    for key, present, must in (("heuristics", heuristics, True), ("warnings", warnings, True), ("rules", set(fired), True),
                               ("not_rules", set(fired), False), ("not_warnings", warnings, False)):
        wanted = set(expect.get(key) or [])
        missing = wanted - present if must else wanted & present
        if missing:
            failures.append((key, sorted(wanted), sorted(present & wanted) if must else sorted(missing)))
    _check_figures(expect, answer, failures)
    return failures


def run_scenario(expert, scenario: Scenario) -> Outcome:
    try:
        answer = expert.recommend(scenario.facts)
    except KentinoError as exc:
        return Outcome(scenario, error=str(exc))
    deciders = [f"{s.rule} ({s.file}:{s.line})" for s in answer.trace if "recommended_kind" in s.concluded]
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


def run_all(expert, scenarios, progress=None) -> tuple[list[Outcome], Coverage]:
    counts = {rule.id: 0 for rule in expert.ruleset.rules}
    outcomes = []
    for index, scenario in enumerate(scenarios):
        outcome = run_scenario(expert, scenario)
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
