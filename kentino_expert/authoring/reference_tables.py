"""Reference tables of the guides (figures, parameters, facts, catalog, diagnostics...), from the code's own data."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import click

from ..domain.deadlines import TIME_FIGURE_SPECS
from ..domain.figures import FIGURE_SPECS, PLAN_FIGURE_SPECS
from ..domain.state import RECOMMENDATION_TYPES
from ..domain.vocabulary import TASKS
from ..errors import KentinoError, Location
from ..lang import limits
from ..lang.valuetypes import BOOL
from ..ruleset.diagnostics import REGISTRY
from ..ruleset.schemas import facts_schema
from .calibration_table import calibration_table
from .catalog_fields import HEADER, SPECS, field_rows
from .diagnostic_examples import example_diagnostics

# A generated block in a Markdown guide: everything between the two marker lines is rewritten.
BLOCK = re.compile(r"^<!-- generated: (\S*) -->\n(.*?)^<!-- end generated -->$", re.S | re.M)
OPENING = re.compile(r"^<!-- generated: (\S*) -->$", re.M)
PACKAGE = Path(__file__).resolve().parent.parent  # kentino_expert/


def _cell(text) -> str:
    """Text fit for one Markdown table cell: one line, no column break."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: tuple[str, ...], rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _number(value) -> str:
    """1000000 -> 1,000,000; 1e12 -> 1e12; 0.001 -> 0.001."""
    if float(value).is_integer() and abs(value) < 1e9:
        return f"{int(value):,}"
    if abs(value) >= 1e9:
        return f"{value:.0e}".replace("e+", "e")
    return f"{value:g}"


def _ticks(values) -> str:
    return ", ".join(f"`{v}`" for v in values)


def figures_table(ruleset=None, knowledge=None, specs: dict = FIGURE_SPECS) -> str:
    """Every figure derive.py computes, in the order it declares them."""
    rows = []
    for name, (kind, unit, description) in specs.items():
        if kind == BOOL:
            unit = "true/false"
        elif isinstance(kind, tuple) and kind[0] == "enum":
            unit = "/".join(f"`{v}`" for v in kind[1])
        rows.append((f"`{name}`", unit, description))
    return _table(("figure", "unit", "meaning"), rows)


def plan_figures_table(ruleset=None, knowledge=None) -> str:
    """The figures of the recommended plan (domain/plan.py and the time to result of domain/deadlines.py),
    computed after the rules decide it."""
    return figures_table(specs={**PLAN_FIGURE_SPECS, **TIME_FIGURE_SPECS})


def conclusions_table(ruleset, knowledge=None) -> str:
    """Every name a rule concludes, with its values and the rules (linked to their pages) that conclude it."""
    concluded: dict[str, tuple[list, list]] = {}
    for rule in ruleset.rules:
        for name, value in rule.source.then.conclude:
            values, rules = concluded.setdefault(name, ([], []))
            values.append(value)
            rules.append(rule.id)
    rows = []
    for name, (values, rules) in concluded.items():
        shown = dict.fromkeys(str(v).lower() if isinstance(v, bool) else str(v) for v in values)
        links = ", ".join(f"[`{r}`](rules/{r}.md)" for r in dict.fromkeys(rules))
        rows.append((f"`{name}`", _ticks(shown), links))
    return _table(("conclusion", "values", "concluded by"), rows)


def parameters_table(ruleset, knowledge=None) -> str:
    """Every parameter of rules/parameters.yaml, as the rule set loaded it."""
    rows = [(f"`{p.name}`", f"{p.value:g}", p.unit, ", ".join(p.heuristics), p.description)
            for p in ruleset.parameters.values()]
    return _table(("parameter", "value", "unit", "heuristics", "meaning"), rows)


def recommendation_fields_table(ruleset=None, knowledge=None) -> str:
    """The recommendation fields a `recommend` writes and the advice rules read."""
    rows = []
    for name, kind in RECOMMENDATION_TYPES.items():
        shown = _ticks(kind[1]) if isinstance(kind, tuple) else kind
        rows.append((f"`{name}`", shown))
    return _table(("field", "type"), rows)


def _catalog_name(values: list, knowledge) -> str:
    """Which catalog table a schema enum lists: models, gpus or inter-node links."""
    for table in ("models", "gpus", "links"):
        specs = getattr(knowledge, table)
        if set(values) <= {*specs, *(a for spec in specs.values() for a in spec.aliases)}:
            return "inter-node link" if table == "links" else table[:-1]
    return "catalog"


def _fact_type(prop: dict, schema: dict, knowledge) -> str:
    """A property of the facts schema in words: `a`, `b` / integer 1-16 / number > 0, <= 1e12 / ..."""
    options = [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"]
    if len(options) != 1:
        return " or ".join(_fact_type(o, schema, knowledge) for o in options)
    option = options[0]
    if "$ref" in option:
        nested = schema["$defs"][option["$ref"].rsplit("/", 1)[1]]
        optional = {name: "" if name in nested.get("required", ()) else "optional " for name in nested["properties"]}
        parts = [f"{name}: {optional[name]}{_fact_type(p, schema, knowledge)}"
                 for name, p in nested["properties"].items()]
        return "{" + ", ".join(parts) + "}"
    if "anyOf" in option:  # a token count: a number or a text with a suffix
        number = next(o for o in option["anyOf"] if o.get("type") in ("number", "integer"))
        if number.get("type") == "integer":  # a request's length: k and M are binary
            return f"token length: {_bounds(number, 'integer')} or text such as `8k` (8,192), `128k`"
        return f"token count: {_bounds(number, 'number')} or text such as `300B`, `15T`"
    if "enum" in option and "maxLength" in option:
        return f"{_catalog_name(option['enum'], knowledge)} id or alias (any case)"
    if "enum" in option:
        return _ticks(option["enum"])
    return _bounds(option, option.get("type", "value"))


def _bounds(option: dict, kind: str) -> str:
    low = option.get("minimum", option.get("exclusiveMinimum"))
    high = option.get("maximum")
    if kind == "integer" and low is not None and high is not None:
        return f"integer {_number(low)}-{_number(high)}"
    parts = [kind]
    if "exclusiveMinimum" in option:
        parts.append(f"> {_number(option['exclusiveMinimum'])}")
    elif "minimum" in option:
        parts.append(f">= {_number(option['minimum'])}")
    if high is not None:
        parts.append(f"<= {_number(high)}")
    return parts[0] + (" " + ", ".join(parts[1:]) if len(parts) > 1 else "")


def _defaults(policy) -> str:
    if policy is None or not policy.defaults:
        return "-"
    return "; ".join(f"`{d.value}`" + (f" when `{d.when.text}`" if d.when is not None else "") + f" ({d.why})"
                     for d in policy.defaults)


def facts_table(ruleset, knowledge) -> str:
    """Every input fact: its type or allowed values (the input contract), meaning and defaults (rules/facts.yaml)."""
    schema = facts_schema(ruleset, knowledge)
    rows = []
    for name, prop in schema["properties"].items():
        policy = ruleset.fact_policies.get(name)
        shown = _fact_type(prop, schema, knowledge)
        if name in schema.get("required", ()):
            shown = f"**required**; {shown}"
        rows.append((f"`{name}`", shown, policy.description if policy else prop.get("description", ""),
                     _defaults(policy)))
    return _table(("fact", "type / allowed values", "meaning", "default (why)"), rows)


def questions_table(ruleset, knowledge=None) -> str:
    """Every fact's question, and when its absence keeps an answer provisional (rules/facts.yaml)."""
    rows = []
    for name, policy in ruleset.fact_policies.items():
        tasks = "every task" if set(policy.tasks) == set(TASKS) else (_ticks(policy.tasks) or "-")
        rows.append((f"`{name}`", policy.ask, tasks, _ticks(policy.answered_by) or "-"))
    return _table(("fact", "question (`ask`)", "missing makes the answer provisional for", "unless given"), rows)


def models_table(ruleset, knowledge) -> str:
    """The model catalog (knowledge/models.yaml)."""
    rows = [(f"`{m.id}`", m.name, f"{m.params_b:g}", f"{m.active_b:g}", _layout(m), _ticks(m.aliases) or "-")
            for m in knowledge.models.values()]
    return _table(("model", "name", "params (B)", "active (B)", "layout", "aliases"), rows)


def _layout(model) -> str:
    """'MoE 256 x 8, MLA, FP8 native' and the like: what shapes the model's sizing beyond its size."""
    parts = [f"MoE {model.moe.experts} experts, {model.moe.experts_per_token} per token"] if model.moe else []
    parts.append("MLA" if model.mla else f"GQA {model.kv_heads} KV heads")
    if model.local_attention:
        local = model.local_attention
        parts.append(f"{local.kind} {local.window:,} on {local.layers} layers")
    if model.native_precision:
        parts.append(f"native {model.native_precision.format}")
    return ", ".join(parts)


def gpus_table(ruleset, knowledge) -> str:
    """The card catalog (knowledge/gpus.yaml)."""
    rows = [(f"`{g.id}`", g.name, f"{g.memory_gb:g}", g.form_factor, "yes" if g.nvlink else "no",
             "yes" if g.kentino_ships else "no", f"`{g.intra_node_link}`", _ticks(g.aliases) or "-")
            for g in knowledge.gpus.values()]
    return _table(("gpu", "name", "GB", "form", "NVLink", "Kentino ships it", "in-box link", "aliases"), rows)


def links_table(ruleset, knowledge) -> str:
    """The link catalog (knowledge/links.yaml); only inter-node links are values of `interconnect`."""
    rows = [(f"`{k.id}`", k.name, k.scope, f"{k.bandwidth_gbs:g}", f"{k.latency_us:g}", _ticks(k.aliases) or "-")
            for k in knowledge.links.values()]
    return _table(("link", "name", "scope", "GB/s", "latency (us)", "aliases"), rows)


def _fields_of(kind: str):
    """The table of the fields a `kind` (card, model, link) of knowledge/ needs, generated from its spec."""
    def table(ruleset=None, knowledge=None) -> str:
        return _table(HEADER, field_rows(SPECS[kind]))
    table.__doc__ = f"The fields of a {kind} of knowledge/ (domain/catalog.py), from its pydantic spec."
    return table


def limits_table(ruleset=None, knowledge=None) -> str:
    """The bounds on what a rule set can make an answer cost (lang/limits.py), with their values."""
    rows = [(f"`{name}`", _number(getattr(limits, name)), what, beyond) for name, what, beyond in limits.DOCUMENTED]
    return _table(("bound", "value", "of", "past it"), rows)


def diagnostics_table(ruleset=None, knowledge=None) -> str:
    """Every diagnostic code `rules check` gives (diagnostics.REGISTRY), linked to its explanation."""
    rows = [(f"[`{code.id}`](#{code.id.lower()})", code.severity, code.summary) for code in REGISTRY.values()]
    return _table(("code", "severity", "summary"), rows)


def diagnostics_explained(ruleset=None, knowledge=None) -> str:
    """Each registered code's explanation, minimal bad example, what `rules check` says about that example
    (checked now, in a copy of the bundled rules) and the fix."""
    parts = []
    for code in REGISTRY.values():
        found = ", found by answering the examples in the sandbox" if code.trial else ""
        setup = f"\n\nWith: {code.setup}." if code.setup else ""
        said = "\n".join(str(d) for d in example_diagnostics(code) if d.code == code.id)
        parts.append(f"### {code.id}\n\n**{code.severity}{found}**: {code.summary}.\n\n{code.explanation_in_full}\n\n"
                     f"Example (`{code.file}`):\n\n```yaml\n{code.example.rstrip()}\n```{setup}\n\n"
                     f"`rules check` says:\n\n```\n{said}\n```\n\n**Fix.** {code.fix}")
    return "\n\n".join(parts)


def options_table(*commands: click.Command) -> str:
    """Every option of the given click commands (`serve`'s and `mcp`'s, from the CLI that owns them) in one table:
    its environment variable, the commands that take it, its default and its help (an option the commands
    share is one row; its help is the first command's)."""
    rows: dict[str, list] = {}
    for command in commands:
        for param in command.params:
            if not isinstance(param, click.Option) or param.name == "help":
                continue
            key = param.opts[0]
            if key in rows:
                rows[key][2].append(command.name)
                continue
            default = f"`{param.default}`" if isinstance(param.default, (str, int, float)) else "-"
            meaning = param.help or ""
            if isinstance(param.type, click.Choice):
                meaning = (meaning + " One of " + ", ".join(f"`{c}`" for c in param.type.choices) + ".").strip()
            variable = f"`{param.envvar}`" if isinstance(param.envvar, str) else "-"
            rows[key] = [variable, ", ".join(f"`{o}`" for o in param.opts), [command.name], default, meaning]
    return _table(("variable", "option", "commands", "default", "meaning"),
                  [(v, o, ", ".join(f"`{c}`" for c in cs), d, m) for v, o, cs, d, m in rows.values()])


def _purpose(path: Path) -> str:
    """A module's purpose: the first paragraph of its docstring, read without importing it."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "(no docstring)"
    return " ".join(docstring.split("\n\n")[0].split())


def modules_table(ruleset=None, knowledge=None) -> str:
    """Every module of the package (subpackages included) with its docstring's purpose."""
    rows = [(f"`{path.relative_to(PACKAGE.parent).as_posix()}`", _purpose(path))
            for path in sorted(PACKAGE.rglob("*.py"), key=lambda p: p.relative_to(PACKAGE).parts)]
    return _table(("module", "purpose"), rows)


TABLES = {
    "figures": figures_table, "plan-figures": plan_figures_table, "conclusions": conclusions_table,
    "parameters": parameters_table,
    "recommendation-fields": recommendation_fields_table, "facts": facts_table, "questions": questions_table,
    "models": models_table, "gpus": gpus_table, "links": links_table, "diagnostics": diagnostics_table,
    "limits": limits_table, **{f"{kind}-fields": _fields_of(kind) for kind in SPECS},
    "diagnostics-explained": diagnostics_explained,
    "modules": modules_table, "calibration": calibration_table,
}
# Tables whose source sits above this layer (the CLI's own commands, the service's measured answer sizes) are rendered
# there and passed in.
PASSED_IN = ("service-options", "answer-sizes", "log-row-sizes", "http-errors", "route-scopes")


def render_all(ruleset, knowledge, passed_in: dict[str, str] | None = None) -> dict[str, str]:
    """Every table by block name: those rendered here, and those passed in (PASSED_IN)."""
    return {**{name: render(ruleset, knowledge) for name, render in TABLES.items()}, **(passed_in or {})}


def _check_markers(text: str, source: str) -> None:
    """Every opening marker names a known table and is closed (a one-line error at file:line otherwise)."""
    closed = {m.start() for m in BLOCK.finditer(text)}
    for match in OPENING.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        if match.group(1) not in TABLES and match.group(1) not in PASSED_IN:
            known = ", ".join([*TABLES, *PASSED_IN])
            raise KentinoError(f"unknown generated block '{match.group(1)}' (known: {known})",
                               location=Location(source, line, 1))
        if match.start() not in closed:
            raise KentinoError(f"generated block '{match.group(1)}' has no '<!-- end generated -->' line",
                               location=Location(source, line, 1))


def refreshed(text: str, tables: dict[str, str], source: str = "<text>") -> str:
    """The text with each generated block's body replaced by the current table."""
    _check_markers(text, source)
    return BLOCK.sub(lambda m: f"<!-- generated: {m.group(1)} -->\n\n{tables[m.group(1)]}\n\n<!-- end generated -->",
                     text)


def blocks_in(text: str) -> list[str]:
    """The names of the generated blocks of a text, in order."""
    return [m.group(1) for m in BLOCK.finditer(text)]


def guides(directory) -> list[Path]:
    """The Markdown guides of a directory (not its subdirectories), in name order."""
    return sorted(Path(directory).glob("*.md"))


def read_guide(path: Path) -> str:
    """A guide's text, or one error naming the guide when it cannot be read or is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise KentinoError(f"cannot read: not UTF-8 (byte {exc.start}: {exc.reason})",
                           location=Location(str(path))) from None
    except OSError as exc:
        raise KentinoError(f"cannot read: {exc.strerror or exc}", location=Location(str(path))) from None


def guide_updates(directory, ruleset, knowledge, passed_in: dict[str, str] | None = None) -> dict[Path, str]:
    """The new text of every guide in `directory` whose generated blocks are stale. Every guide is read and
    checked and nothing is written, so a caller can check the guides before it writes anything."""
    tables, updates = render_all(ruleset, knowledge, passed_in), {}
    for path in guides(directory):
        text = read_guide(path)
        new = refreshed(text, tables, str(path))
        if new != text:
            updates[path] = new
    return updates


def write_guides(updates: dict[Path, str]) -> list[Path]:
    """Write the guides guide_updates found stale; the guides written."""
    for path, new in updates.items():
        try:
            path.write_text(new, encoding="utf-8")
        except OSError as exc:
            raise KentinoError(f"cannot write: {exc.strerror or exc}", location=Location(str(path))) from None
    return list(updates)


def refresh_guides(directory, ruleset, knowledge, passed_in: dict[str, str] | None = None) -> list[Path]:
    """Rewrite the generated blocks of every guide in `directory`; the guides that changed. Every guide is
    checked before any is written, so a bad marker leaves them all as they were."""
    return write_guides(guide_updates(directory, ruleset, knowledge, passed_in))

