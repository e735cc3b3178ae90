"""Rule directory -> checked, engine-neutral compiled rule set (names resolved, parameters folded, guards added).

The backend that will run the rules is given (engine/registry.py): its reserved names and the shapes it
cannot run are checked here too (E023, E201-E205); without one, only what every backend needs is.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

from ..domain.catalog import Knowledge, catalog_of
from ..domain.quote import PriceList
from ..domain.state import RECOMMENDED_KIND, recommendation_key, warning_key
from ..domain.vocabulary import PRECISIONS
from ..errors import Location
from ..lang import nodes
from ..lang.fold import check_divisors, fold, oversized_constant
from ..lang.intervals import check_finite
from ..lang.templates import check_template
from ..lang.typecheck import check_condition, check_value_expression
from ..lang.valuetypes import NUMBER, is_enum
from ..sourcefiles import yaml_files
from ..yamlsrc import location_of
from . import asks, bounds, crosschecks
from .analysis import analyse, report_shape_problems
from .diagnostics import Diagnostic, DiagnosticSink
from .namespace import Namespace, build_namespace
from .policies import read_fact_policies, read_parameters
from .prices import PRICES_FILE, read_prices
from .ranges import Ranges
from .rulefile import SPECIAL_FILES, Condition, Rule, count_problem, read_rule_file, read_rules
from .selection import PRICE_CRITERIA, SELECTION_FILE, SelectionPolicy, read_selection

# Mixed into every digest. It once named the durable backend's version; kept as it was so that the
# digests logged before stay comparable: a digest identifies the rules and the knowledge, whichever
# backend runs them (answers name the backend in `ruleset.engine`).
DIGEST_SALT = "kentino-expert/0.1 durable-rules/2.0.28"


@dataclass(frozen=True)
class CompiledRule:
    """A rule ready for any backend: conditions folded, refraction guards appended."""

    id: str
    order: int
    priority: float
    heuristics: tuple[str, ...]
    description: str
    location: Location
    conditions: tuple[nodes.Node, ...]  # what a backend matches (guards included)
    source: Rule
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    recommend: tuple[tuple[str, object], ...]  # key -> literal or folded ast node


@dataclass(frozen=True)
class RuleSet:
    """A loaded, checked, compiled rule directory."""

    directory: str
    rules: tuple[CompiledRule, ...]
    parameters: dict
    fact_policies: dict
    namespace: Namespace
    heuristics: dict
    files: dict  # display name -> sha256
    digest: str
    diagnostics: tuple[Diagnostic, ...] = ()
    by_id: dict = field(default_factory=dict)
    selection: SelectionPolicy | None = None  # rules/selection.yaml; without it, no build search
    prices: PriceList | None = None  # rules/prices.yaml; without it, no answer carries a quote

    @functools.cached_property
    def parameter_values(self) -> Mapping:
        """name -> value of every parameter (read-only; computed once: every evaluation reads it)."""
        return MappingProxyType({name: p.value for name, p in self.parameters.items()})

    @functools.cached_property
    def rules_by_kind(self) -> Mapping:
        """kind -> the rules recommending it, in the order they are tried (read-only)."""
        out: dict = {}
        for rule in self.rules:
            for key, value in rule.recommend:
                if key == "kind" and isinstance(value, str):
                    out.setdefault(value, []).append(rule)
        return MappingProxyType({kind: tuple(rules) for kind, rules in out.items()})

    @functools.cached_property
    def concluders(self) -> Mapping:
        """name -> the rules whose `then.conclude` sets it, in order (read-only)."""
        out: dict = {}
        for rule in self.rules:
            for key in dict.fromkeys(key for key, _ in rule.source.then.conclude):
                out.setdefault(key, []).append(rule)
        return MappingProxyType({name: tuple(rules) for name, rules in out.items()})

    def rule(self, rule_id: str) -> CompiledRule:
        return self.by_id[rule_id]


def _display(path: Path, root: Path) -> str:
    try:
        return str(Path(root.name) / path.relative_to(root))
    except ValueError:
        return str(path)


def read_directory(directory: str | Path, sink: DiagnosticSink):
    """Read parameters.yaml, facts.yaml, the optional selection.yaml (kept as read: its names are checked
    once the namespace is known) and every other *.yaml file of a rule directory (not a hidden one)."""
    root = Path(directory)
    files, rules, parameters, policies, selection = {}, [], {}, {}, None
    if not root.is_dir():
        sink.error(Location(str(root)), "E001", "rule directory not found")
        return files, rules, parameters, policies, selection, None
    prices = None
    for path in yaml_files(root):  # not a hidden one (an editor's lock or swap file): `rules publish` leaves it out too
        display, errors = _display(path, root), len(sink.errors)
        data, text = read_rule_file(path, sink, display, root)
        files[display] = hashlib.sha256(text.encode()).hexdigest()
        if data is None and (len(sink.errors) > errors or path.name not in SPECIAL_FILES):
            if len(sink.errors) == errors:  # readable, but empty: say so, or a cut file shows only in others
                sink.warning(Location(display, 1, 1), "W307", "the file holds no rules (empty, or only comments)")
            continue  # unreadable (E001), or an empty rule file: nothing to read
        if path.name == "parameters.yaml":
            parameters = read_parameters(data, display, sink)
        elif path.name == "facts.yaml":
            policies = read_fact_policies(data, display, sink)
        elif path.name == SELECTION_FILE:
            selection = (data, display)
        elif path.name == PRICES_FILE:
            prices = (data, display, text)
        else:
            rules.extend(read_rules(data, display, sink))
    for special in SPECIAL_FILES:
        if not os.path.lexists(root / special):  # one that is there but refused has its E001 already
            sink.error(Location(str(root / special)), "E001", f"missing {special}")
    bounds.check_rule_count(rules, sink)
    _warn_unread(root, sink)
    return files, rules, parameters, policies, selection, prices


def _warn_unread(root: Path, sink: DiagnosticSink) -> None:
    """W308 for what looks like rules but is not read: a `.yml` (or `.YAML`, ...) file, or a subdirectory
    holding YAML files; only `*.yaml` directly in the directory is."""
    for path in sorted(p for p in root.iterdir() if not p.name.startswith(".")):  # hidden: an editor's, not rules
        if path.is_file() and path.suffix.lower() in (".yaml", ".yml") and path.suffix != ".yaml":
            sink.warning(Location(_display(path, root), 1, 1), "W308", f"'{path.name}' is not read: only files "
                         f"named *.yaml are (rename it to '{path.stem}.yaml' if it holds rules)")
        elif path.is_dir() and (inner := _first_yaml(path)) is not None:
            shown = inner.relative_to(root)
            sink.warning(Location(_display(inner, root), 1, 1), "W308", f"'{shown}' is not read: only the *.yaml "
                         "files directly in the rule directory are, not those of a subdirectory (move it up)")


def _first_yaml(directory: Path, limit: int = 10_000) -> Path | None:
    """The first .yaml or .yml file in `directory` at any depth, among its first `limit` entries."""
    found = [path for path in itertools.islice(directory.rglob("*"), limit)
             if path.suffix.lower() in (".yaml", ".yml") and path.is_file()]
    return min(found, default=None)


def _writes(rule: Rule) -> tuple[str, ...]:
    writes = [name for name, _ in rule.then.conclude]
    if rule.then.recommend:
        writes += [recommendation_key(key) for key, _ in rule.then.recommend]
    if rule.then.warn:
        writes.append(warning_key(rule.then.warn[0]))
    return tuple(writes)


def _guard(rule: Rule) -> tuple[nodes.Node, ...]:
    """Refraction by effect: a rule matches only while what it would write is still absent."""
    names = [name for name, _ in rule.then.conclude]
    if rule.then.recommend:
        names = [RECOMMENDED_KIND] + names
    if rule.then.warn:
        names.append(warning_key(rule.then.warn[0]))
    return tuple(nodes.Not(0, nodes.Exists(0, nodes.Name(0, name))) for name in names)


def _compile_rule(rule: Rule, order: int, namespace, params, sink, ranges: Ranges) -> CompiledRule:
    conditions, reads = [], []
    for condition in rule.when:
        conditions.append(_checked_condition(condition, namespace, params, sink, ranges, rule.id))
        reads += [n.id for n in nodes.names_in(condition.node) if namespace.origins.get(n.id) != "parameter"]
    recommend = [(key, _recommend_value(rule, key, value, namespace, params, sink, ranges))
                 for key, value in rule.then.recommend]
    if rule.because:
        check_template(rule.because, rule.locations.get("because", rule.location), namespace, sink, rule.id, "because")
    if rule.then.warn:
        where = rule.locations.get("warn.message", rule.locations.get("then", rule.location))
        check_template(rule.then.warn[1], where, namespace, sink, rule.id, "warn.message")
    return CompiledRule(rule.id, order, rule.priority, rule.heuristics, rule.description, rule.location,
                        tuple(conditions) + _guard(rule), rule, tuple(dict.fromkeys(reads)), _writes(rule),
                        tuple(recommend))


def _checked_condition(condition: Condition, namespace, params, sink, ranges, rule_id):
    """A condition type-checked and folded; its arithmetic proven finite (E206) when it type-checks."""
    where = condition.location_at
    errors = len(sink.errors)
    check_condition(condition.node, namespace, sink, rule_id, where)
    folded = fold(condition.node, params)
    if len(sink.errors) == errors and not check_divisors(folded, sink, rule_id, where, "the condition"):
        check_finite(folded, ranges, sink, rule_id, where, "the condition")
    return folded


def _recommend_value(rule, key, value, namespace, params, sink, ranges):
    """A recommend field checked and folded; numeric fields become integers in every answer, so their
    value must be a finite number over the ranges of its names (E206)."""
    if not isinstance(value, Condition):
        return value
    where = value.location_at
    numeric = namespace.type_of(recommendation_key(key)) == NUMBER
    errors = len(sink.errors)
    check_value_expression(value.node, namespace, sink, rule.id, where, key, numeric=numeric)
    if key == "precision" and len(sink.errors) == errors:
        _check_precision_name(value, namespace, sink, rule.id)
    folded = fold(value.node, params)
    huge = oversized_constant(folded)
    if huge is not None:
        sink.error(where(huge.pos), "E028", f"recommend.{key}: a constant here is not a finite number once "
                   "parameters are folded in", rule=rule.id)
    elif len(sink.errors) == errors and not check_divisors(folded, sink, rule.id, where, f"recommend.{key}"):
        if isinstance(folded, nodes.Literal) and (problem := count_problem(key, folded.value)) is not None:
            sink.error(where(folded.pos), "E027", f"{problem} (its expression is that constant once parameters "
                       "are folded in)", rule=rule.id)
        else:
            check_finite(folded, ranges, sink, rule.id, where, f"recommend.{key}")
    return folded


def _check_precision_name(value, namespace, sink, rule_id) -> None:
    """E026 unless recommend.precision names a figure whose every value is a precision."""
    kind = namespace.type_of(getattr(value.node, "id", ""))
    if not (is_enum(kind) and set(kind[1]) <= set(PRECISIONS)):
        sink.error(value.location_at(value.node.pos), "E026", f"recommend.precision: '{value.text}' is not a "
                   f"precision nor a figure that holds one ({', '.join(PRECISIONS)})", rule=rule_id)


def digest_of(files: dict, knowledge: Knowledge) -> str:
    """sha256 over the rule files and the knowledge files (names and contents' digests)."""
    sha = hashlib.sha256(DIGEST_SALT.encode())
    for name, digest in sorted(files.items()):
        sha.update(f"rules/{Path(name).name}:{digest}\n".encode())
    for name, digest in sorted(knowledge.files.items()):
        sha.update(f"knowledge/{name}:{digest}\n".encode())
    return sha.hexdigest()


def compile_ruleset(directory: str | Path, knowledge: Knowledge, sink: DiagnosticSink | None = None,
                    backend=None) -> RuleSet:
    """Load and check a rule directory; raise RuleFileError listing every error found. `backend` (a class of
    engine/backend.py's protocol) adds its reserved names and the rule shapes it cannot run to the checks."""
    sink = sink or DiagnosticSink()
    files, rules, parameters, policies, selection_file, prices_file = read_directory(directory, sink)
    crosschecks.check_sizing_parameters(files, parameters, sink)
    if sink.has_root_cause:  # a file, or a parameter, that could not be read: later checks would blame others
        raise sink.error_report()
    policies = asks.filled(policies, knowledge, sink)
    params = {name: p.value for name, p in parameters.items()}
    namespace, ranges = _check_across(files, rules, parameters, policies, knowledge, sink, backend)
    for policy in policies.values():
        for default in policy.defaults:
            if default.when:
                _checked_condition(default.when, namespace, params, sink, ranges, None)
    ranked = sorted(enumerate(rules), key=lambda pair: (pair[1].priority, pair[0]))
    compiled = tuple(_compile_rule(rule, order, namespace, params, sink, ranges)
                     for order, (_, rule) in enumerate(ranked, start=1))
    selection = read_selection(*selection_file, namespace, params, knowledge, sink) if selection_file else None
    prices = read_prices(*prices_file, knowledge, sink) if prices_file else None
    for criterion in PRICE_CRITERIA:
        if selection is not None and criterion in selection.order and prices_file is None:
            sink.error(location_of(selection_file[0].get("selection", {}), "order", selection_file[1]), "E035",
                       f"selection.order: '{criterion}' needs a price list ({PRICES_FILE} beside {SELECTION_FILE})")
    analyse(compiled, parameters, knowledge, namespace, sink, selection)
    bounds.check_answer_text(compiled, policies, namespace, sink)
    if backend is not None:
        report_shape_problems(backend.shape_problems(compiled), sink)
    if sink.errors:
        raise sink.error_report()
    ruleset = RuleSet(str(directory), compiled, parameters, policies, namespace, knowledge.heuristics, files,
                      digest_of(files, knowledge), tuple(sink.sorted()), selection=selection, prices=prices)
    ruleset.by_id.update({rule.id: rule for rule in compiled})
    return ruleset


def _check_across(files, rules, parameters, policies, knowledge, sink, backend) -> tuple[Namespace, Ranges]:
    """The checks across rules (crosschecks.py), and the namespace and ranges every rule is checked in."""
    crosschecks.check_identity(rules, knowledge, sink)
    crosschecks.check_conclusion_names(rules, parameters, sink, getattr(backend, "reserved_names", ()))
    crosschecks.check_warning_codes(rules, sink)
    crosschecks.check_parameter_names(parameters, sink)
    conclusions = crosschecks.conclusions_of(rules)
    namespace = build_namespace(parameters, conclusions, catalog_of(knowledge))
    ranges = Ranges(namespace, conclusions, policies)
    params = {name: p.value for name, p in parameters.items()}
    ranges.learn_recommendations(rules, params)
    crosschecks.check_examples(rules, knowledge, policies, params, sink)
    return namespace, ranges


def deciding_subset(ruleset: RuleSet, target) -> RuleSet:
    """The rules that can change `target` (a name, or several): those that write it and, transitively,
    those that write what they read. A rule outside the subset writes only names no rule of the subset
    reads, so it cannot change when (or whether) a rule of the subset fires: the subset reaches the same
    `target`.
    """
    needed, kept = ({target} if isinstance(target, str) else set(target)), set()
    grew = True
    while grew:
        grew = False
        for rule in ruleset.rules:
            if rule.id not in kept and needed.intersection(rule.writes):
                kept.add(rule.id)
                needed.update(rule.reads)
                grew = True
    rules = tuple(rule for rule in ruleset.rules if rule.id in kept)
    return replace(ruleset, rules=rules, by_id={rule.id: rule for rule in rules})
