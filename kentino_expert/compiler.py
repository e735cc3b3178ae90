"""Rule directory -> checked, engine-neutral compiled rule set (names resolved, parameters folded, guards added)."""
from __future__ import annotations

import functools
import hashlib
import string
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from . import expr as ast
from .diagnostics import Diagnostic, DiagnosticSink
from .errors import Location, RuleFileError, did_you_mean
from .knowledge import Knowledge
from .names import Namespace, build_namespace, recommendation_key, warning_key
from .rulefile import (SPECIAL_FILES, Condition, Rule, read_fact_policies,
                       read_parameters, read_rule_file, read_rules)
from .typecheck import check_condition, check_value_expression, fold

ENGINE_VERSION = "kentino-expert/0.1 durable-rules/2.0.28"


@dataclass(frozen=True)
class CompiledRule:
    """A rule ready for any backend: conditions folded, refraction guards appended."""

    id: str
    order: int
    priority: float
    heuristics: tuple[str, ...]
    description: str
    location: Location
    conditions: tuple[ast.Node, ...]  # what a backend matches (guards included)
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

    def rule(self, rule_id: str) -> CompiledRule:
        return self.by_id[rule_id]


def _display(path: Path, root: Path) -> str:
    try:
        return str(Path(root.name) / path.relative_to(root))
    except ValueError:
        return str(path)


def read_directory(directory: str | Path, sink: DiagnosticSink):
    """Read parameters.yaml, facts.yaml and every other *.yaml file of a rule directory."""
    root = Path(directory)
    files, rules, parameters, policies = {}, [], {}, {}
    if not root.is_dir():
        sink.error(Location(str(root)), "E001", "rule directory not found")
        return files, rules, parameters, policies
    for path in sorted(root.glob("*.yaml")):
        display = _display(path, root)
        data, text = read_rule_file(path, sink, display)
        files[display] = hashlib.sha256(text.encode()).hexdigest()
        if data is None:
            continue
        if path.name == "parameters.yaml":
            parameters = read_parameters(data, display, sink)
        elif path.name == "facts.yaml":
            policies = read_fact_policies(data, display, sink)
        else:
            rules.extend(read_rules(data, display, sink))
    for special in SPECIAL_FILES:
        if not (root / special).is_file():
            sink.error(Location(str(root / special)), "E001", f"missing {special}")
    return files, rules, parameters, policies


def _conclusions(rules) -> dict:
    out: dict = {}
    for rule in rules:
        for name, value in rule.then.conclude:
            out.setdefault(name, []).append(value)
    return out


def _check_identity(rules, knowledge, sink):
    seen = {}
    for rule in rules:
        if rule.id in seen:
            sink.error(rule.locations.get("id", rule.location), "E105",
                       f"rule id '{rule.id}' is already used at {seen[rule.id]}", rule=rule.id)
        else:
            seen[rule.id] = rule.locations.get("id", rule.location)
        for hid in rule.heuristics:
            if hid not in knowledge.heuristics:
                sink.error(rule.locations.get("heuristics", rule.location), "E104", f"unknown heuristic '{hid}'",
                           rule=rule.id, suggestion=did_you_mean(hid, knowledge.heuristics))
        if not rule.heuristics:
            sink.error(rule.location, "E004", "a rule must cite at least one heuristic id", rule=rule.id)


def check_template(template: str, where: Location, namespace: Namespace, sink, rule_id, what: str):
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        sink.error(where, "E106", f"{what}: {exc}", rule=rule_id)
        return
    for _, field_name, spec, conversion in parts:
        if field_name is None:
            continue
        if not field_name.isidentifier() or conversion:
            sink.error(where, "E106", f"{what}: '{{{field_name}}}' must be a plain name", rule=rule_id)
        elif field_name not in namespace.types:
            sink.error(where, "E106", f"{what}: unknown name '{field_name}'", rule=rule_id,
                       suggestion=did_you_mean(field_name, namespace.names()))
        elif spec and "{" in spec:
            sink.error(where, "E106", f"{what}: nested fields are not allowed", rule=rule_id)


def _writes(rule: Rule) -> tuple[str, ...]:
    writes = [name for name, _ in rule.then.conclude]
    if rule.then.recommend:
        writes += [recommendation_key(key) for key, _ in rule.then.recommend]
    if rule.then.warn:
        writes.append(warning_key(rule.then.warn[0]))
    return tuple(writes)


def _guard(rule: Rule) -> tuple[ast.Node, ...]:
    """Refraction by effect: a rule matches only while what it would write is still absent."""
    names = [name for name, _ in rule.then.conclude]
    if rule.then.recommend:
        names = ["recommended_kind"] + names
    if rule.then.warn:
        names.append(warning_key(rule.then.warn[0]))
    return tuple(ast.Not(0, ast.Exists(0, ast.Name(0, name))) for name in names)


def _compile_rule(rule: Rule, order: int, namespace, params, sink, display_of) -> CompiledRule:
    conditions, reads = [], []
    for condition in rule.when:
        where = lambda offset, c=condition: _column(c, offset)
        check_condition(condition.node, namespace, sink, rule.id, where)
        reads += [n.id for n in ast.names_in(condition.node) if namespace.origins.get(n.id) != "parameter"]
        conditions.append(fold(condition.node, params))
    recommend = []
    for key, value in rule.then.recommend:
        if isinstance(value, Condition):
            check_value_expression(value.node, namespace, sink, rule.id, lambda offset, c=value: _column(c, offset))
            recommend.append((key, fold(value.node, params)))
        else:
            recommend.append((key, value))
    if rule.because:
        check_template(rule.because, rule.locations.get("because", rule.location), namespace, sink, rule.id, "because")
    if rule.then.warn:
        check_template(rule.then.warn[1], rule.locations.get("then", rule.location), namespace, sink, rule.id, "warn.message")
    return CompiledRule(rule.id, order, rule.priority, rule.heuristics, rule.description, rule.location,
                        tuple(conditions) + _guard(rule), rule, tuple(dict.fromkeys(reads)), _writes(rule),
                        tuple(recommend))


def _column(condition: Condition, offset: int) -> Location:
    base = condition.location
    from .rulefile import _starts_quoted
    shift = 1 if _starts_quoted(base, condition.text) else 0
    return Location(base.file, base.line, base.column + shift + offset)


def digest_of(files: dict, knowledge: Knowledge) -> str:
    sha = hashlib.sha256(ENGINE_VERSION.encode())
    for name, digest in sorted(files.items()):
        sha.update(f"rules/{Path(name).name}:{digest}\n".encode())
    for name, digest in sorted(knowledge.files.items()):
        sha.update(f"knowledge/{name}:{digest}\n".encode())
    return sha.hexdigest()


def compile_ruleset(directory: str | Path, knowledge: Knowledge, sink: DiagnosticSink | None = None) -> RuleSet:
    """Load and check a rule directory; raise RuleFileError listing every error found."""
    sink = sink or DiagnosticSink()
    files, rules, parameters, policies = read_directory(directory, sink)
    _check_identity(rules, knowledge, sink)
    namespace = build_namespace(parameters, _conclusions(rules))
    params = {name: p.value for name, p in parameters.items()}
    for policy in policies.values():
        for default in policy.defaults:
            if default.when:
                check_condition(default.when.node, namespace, sink, None, lambda o, c=default.when: _column(c, o))
    ranked = sorted(enumerate(rules), key=lambda pair: (pair[1].priority, pair[0]))
    compiled = tuple(_compile_rule(rule, order, namespace, params, sink, None)
                     for order, (_, rule) in enumerate(ranked, start=1))
    from .checks import analyse
    analyse(compiled, parameters, knowledge, namespace, sink)
    if sink.errors:
        raise RuleFileError(sorted(sink.errors, key=lambda d: (d.location.file, d.location.line, d.location.column)))
    ruleset = RuleSet(str(directory), compiled, parameters, policies, namespace, knowledge.heuristics, files,
                      digest_of(files, knowledge), tuple(sink.sorted()))
    ruleset.by_id.update({rule.id: rule for rule in compiled})
    return ruleset


def deciding_subset(ruleset: RuleSet, target: str) -> RuleSet:
    """The rules that can change `target`: those that write it and, transitively, those that write what
    they read. A rule outside the subset writes only names no rule of the subset reads, so it cannot
    change when (or whether) a rule of the subset fires: the subset reaches the same `target`.
    """
    needed, kept = {target}, set()
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
