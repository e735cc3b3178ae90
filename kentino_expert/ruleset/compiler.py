"""Rule directory -> checked, engine-neutral compiled rule set (names resolved, parameters folded, guards added)."""
from __future__ import annotations

import functools
import hashlib
import re
import string
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from ..lang import parser as ast
from .diagnostics import Diagnostic, DiagnosticSink
from ..errors import Location, RuleFileError, did_you_mean
from ..domain.catalog import Knowledge
from .namespace import Namespace, build_namespace, catalog_of, recommendation_key, reserved_kind, warning_key
from .ranges import Ranges, check_finite
from .rulefile import (SPECIAL_FILES, Condition, Rule, read_fact_policies,
                       read_parameters, read_rule_file, read_rules)
from ..lang.typecheck import BOOL, NUMBER, TEXT, check_condition, check_value_expression, fold, oversized_constant

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


MAX_TEMPLATE_WIDTH = 40  # a width or precision beyond this is a mistake, and `{x:>99999999}` writes 100 MB
_SPEC = re.compile(r"^(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?z?#?0?(?P<width>\d+)?[,_]?"
                   r"(?:\.(?P<precision>\d+))?(?P<type>[bcdeEfFgGnosxX%])?$", re.DOTALL)
_SAMPLES = {NUMBER: (1234.5, 12), TEXT: ("text",), BOOL: (True,)}


def check_template(template: str, where: Location, namespace: Namespace, sink, rule_id, what: str):
    """E106 for an unknown name, a conversion, a nested field, or a format spec the name's values
    cannot take (at run time a failing spec falls back to the bare value, silently)."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        sink.error(where, "E106", f"{what}: {exc}", rule=rule_id)
        return
    for _, field_name, spec, conversion in parts:
        if field_name is None:
            continue
        problem, suggestion = _field_problem(field_name, spec, conversion, namespace)
        if problem:
            sink.error(where, "E106", f"{what}: {problem}", rule=rule_id, suggestion=suggestion)


def _field_problem(name, spec, conversion, namespace):
    """(why the field `{name!conversion:spec}` is wrong, a suggestion), or (None, None)."""
    if not name.isidentifier():
        return f"'{{{name}}}' must be a plain name", None
    if conversion:
        return f"'{{{name}!{conversion}}}': a conversion (!{conversion}) is not allowed; write '{{{name}}}'", None
    if name not in namespace.types:
        return f"unknown name '{name}'", did_you_mean(name, namespace.names())
    if spec and "{" in spec:
        return "nested fields are not allowed", None
    return (_spec_problem(name, spec, namespace.types[name]) if spec else None), None


def _spec_problem(name, spec, kind) -> str | None:
    match = _SPEC.match(spec)
    if not match:
        return f"'{{{name}:{spec}}}': '{spec}' is not a format spec"
    for part in ("width", "precision"):
        if match.group(part) and int(match.group(part)) > MAX_TEMPLATE_WIDTH:
            return f"'{{{name}:{spec}}}': the {part} is at most {MAX_TEMPLATE_WIDTH}"
    kind = TEXT if isinstance(kind, tuple) else kind
    samples = _SAMPLES.get(kind, (1234.5, 12, "text", True))  # "mixed": any of them
    for sample in samples:
        try:
            format(sample, spec)
            return None
        except (ValueError, TypeError):
            continue
    return f"'{{{name}:{spec}}}': '{spec}' does not format {'a text' if kind == TEXT else 'this value'}"


def _check_examples(rules, knowledge, policies, params, sink) -> None:
    """A rule's example must be a valid workload: `rules docs` and `rules examples` run it."""
    from types import SimpleNamespace

    from ..domain.derive import derive
    from ..errors import KentinoError
    from ..domain.workload import validate_facts
    if any(Path(d.location.file).name in SPECIAL_FILES for d in sink.errors):
        return  # figures computed from a broken parameter would blame the examples for it
    holder = SimpleNamespace(fact_policies=policies, parameter_values=params)
    for rule in rules:
        if not rule.example:
            continue
        try:
            derive(validate_facts(rule.example), knowledge, holder)
        except KentinoError as exc:
            field = (getattr(exc, "field", None) or "").split(".")[0]
            where = rule.locations.get(f"example:{field}", rule.locations.get("example", rule.location))
            sink.error(where, "E003", f"example: {exc.render() if not field else field + ': ' + exc.message}",
                       rule=rule.id, suggestion=None if not field else exc.suggestion)
        except (ArithmeticError, ValueError, TypeError) as exc:  # a figure the example breaks
            sink.error(rule.locations.get("example", rule.location), "E003", f"example: {exc}", rule=rule.id)


def _check_sizing_parameters(files, parameters, sink) -> None:
    """The sizing reads a few parameters itself (derive.SIZING_PARAMETERS): deleting one is an error here."""
    from ..domain.derive import SIZING_PARAMETERS
    where = next((name for name in files if Path(name).name == "parameters.yaml"), None)
    if where is None:
        return  # a missing parameters.yaml is already E001
    for name in SIZING_PARAMETERS:
        if name not in parameters:
            sink.error(Location(where), "E003", f"parameter '{name}' is missing: the sizing uses it "
                       "(kentino_expert/domain/derive.py, SIZING_PARAMETERS)")


def _check_conclusion_names(rules, parameters, sink) -> None:
    """A conclusion may not take a name that already means something: concluding a recommendation
    field breaks every answer, a parameter makes the trace lie, a warning key hides the warning."""
    for rule in rules:
        for name, _ in rule.then.conclude:
            kind = reserved_kind(name, parameters)
            if kind:
                sink.error(rule.locations.get(f"conclude:{name}", rule.location), "E003",
                           f"cannot conclude '{name}': it is {kind}; give the conclusion a name of its own",
                           rule=rule.id)


def _check_warning_codes(rules, sink) -> None:
    """Each warning code is given at most once: a second rule with the same code would never fire."""
    seen = {}
    for rule in rules:
        if not rule.then.warn or not rule.then.warn[0]:
            continue
        code, where = rule.then.warn[0], rule.locations.get("warn.code", rule.location)
        if code in seen:
            first_rule, first_where = seen[code]
            sink.error(where, "E105", f"warning code '{code}' is already given by rule '{first_rule}' at "
                       f"{first_where}; each code is given at most once, so whichever rule gives it first silences the other",
                       rule=rule.id)
        else:
            seen[code] = (rule.id, where)


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


def _compile_rule(rule: Rule, order: int, namespace, params, sink, ranges: Ranges) -> CompiledRule:
    conditions, reads = [], []
    for condition in rule.when:
        where = lambda offset, c=condition: condition_column(c, offset)
        conditions.append(_checked_condition(condition, namespace, params, sink, ranges, rule.id))
        reads += [n.id for n in ast.names_in(condition.node) if namespace.origins.get(n.id) != "parameter"]
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
    where = lambda offset: condition_column(condition, offset)
    errors = len(sink.errors)
    check_condition(condition.node, namespace, sink, rule_id, where)
    folded = fold(condition.node, params)
    if len(sink.errors) == errors:
        check_finite(folded, ranges, sink, rule_id, where, "the condition")
    return folded


def _recommend_value(rule, key, value, namespace, params, sink, ranges):
    """A recommend field checked and folded; numeric fields become integers in every answer, so their
    value must be a finite number over the ranges of its names (E206)."""
    if not isinstance(value, Condition):
        return value
    where = lambda offset, c=value: condition_column(c, offset)
    numeric = namespace.type_of(recommendation_key(key)) == NUMBER
    errors = len(sink.errors)
    check_value_expression(value.node, namespace, sink, rule.id, where, key, numeric=numeric)
    folded = fold(value.node, params)
    huge = oversized_constant(folded)
    if huge is not None:
        sink.error(where(huge.pos), "E003", f"recommend.{key}: a constant here is not a finite number once "
                   "parameters are folded in", rule=rule.id)
    elif len(sink.errors) == errors:
        check_finite(folded, ranges, sink, rule.id, where, f"recommend.{key}")
    return folded


def condition_column(condition: Condition, offset: int) -> Location:
    """Line:column of the character at `offset` of a one-line condition."""
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
    if any(d.code == "E001" for d in sink.errors):  # the checks across files would blame the others
        raise RuleFileError(sorted(sink.errors, key=lambda d: (d.location.file, d.location.line, d.location.column)))
    _check_sizing_parameters(files, parameters, sink)
    _check_identity(rules, knowledge, sink)
    _check_conclusion_names(rules, parameters, sink)
    _check_warning_codes(rules, sink)
    conclusions = _conclusions(rules)
    namespace = build_namespace(parameters, conclusions, catalog_of(knowledge))
    ranges = Ranges(namespace, conclusions, policies)
    params = {name: p.value for name, p in parameters.items()}
    ranges.learn_recommendations(rules, params)
    _check_examples(rules, knowledge, policies, params, sink)
    for policy in policies.values():
        for default in policy.defaults:
            if default.when:
                _checked_condition(default.when, namespace, params, sink, ranges, None)
    ranked = sorted(enumerate(rules), key=lambda pair: (pair[1].priority, pair[0]))
    compiled = tuple(_compile_rule(rule, order, namespace, params, sink, ranges)
                     for order, (_, rule) in enumerate(ranked, start=1))
    from .analysis import analyse
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
