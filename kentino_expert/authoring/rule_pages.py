"""Rule pages: one Markdown page per rule, generated from the rule files, plus an index."""
from __future__ import annotations

from pathlib import Path

import yaml

from ..domain.figures import FIGURE_SPECS
from ..errors import KentinoError
from ..lang import nodes
from ..ruleset.rulefile import Condition

_WORDS = {"<": "is below", "<=": "is at most", ">": "is above", ">=": "is at least", "==": "is", "!=": "is not"}


def describe_name(name: str, ruleset) -> str:
    origin = ruleset.namespace.origins.get(name, "unknown")
    if origin == "parameter":
        p = ruleset.parameters[name]
        return f"`{name}` (parameter = {p.value:g} {p.unit}: {p.description})"
    if origin == "figure":
        _, unit, description = FIGURE_SPECS[name]
        return f"`{name}` (figure: {description}{', ' + unit if unit else ''})"
    if origin == "fact":
        policy = ruleset.fact_policies.get(name)
        return f"`{name}` (fact{': ' + policy.description if policy else ''})"
    return f"`{name}` ({origin})"


def plain_condition(node) -> str:
    """A condition in words: `a <= b` -> 'a is at most b'."""
    match node:
        case nodes.Compare(op=op, left=left, right=right):
            return f"{_value(left)} {_WORDS[op]} {_value(right)}"
        case nodes.In(left=left, items=items, negated=negated):
            listed = ", ".join(repr(item.value) for item in items)
            return f"{_value(left)} is {'not ' if negated else ''}one of {listed}"
        case nodes.Exists(name=name):
            return f"{name.id} is known"
        case nodes.Not(operand=operand):
            return f"not ({plain_condition(operand)})"
        case nodes.And(items=items):
            return " and ".join(plain_condition(item) for item in items)
        case nodes.Or(items=items):
            return " or ".join(f"({plain_condition(item)})" for item in items)
        case nodes.Name(id=name):
            return f"{name} is true"
    return _value(node)


def _value(node) -> str:
    match node:
        case nodes.Literal(value=str() as value):
            return repr(value)
        case nodes.Literal(value=value):
            return str(value).lower()
        case nodes.Name(id=name):
            return name
        case nodes.Arith(op=op, left=left, right=right):
            return f"{_value(left)} {op} {_value(right)}"
        case nodes.Call(func=func, args=args):
            return f"{func}({', '.join(_value(a) for a in args)})"
        case nodes.Neg(operand=operand):
            return f"-{_value(operand)}"
    return "?"


def _effects(rule) -> list[str]:
    then, lines = rule.source.then, []
    for name, value in then.conclude:
        lines.append(f"- concludes `{name}` = `{value}`")
    if then.recommend:
        parts = [f"{k} = `{v.text if isinstance(v, Condition) else v}`" for k, v in then.recommend]
        lines.append("- recommends " + ", ".join(parts))
    if then.warn:
        lines.append(f"- warns `{then.warn[0]}`: {then.warn[1]}")
    return lines


def rule_page(rule, ruleset, expert) -> str:
    lines = [f"# `{rule.id}`", "", rule.description, "",
             f"- **Where:** `{rule.location.file}:{rule.location.line}`",
             f"- **Priority:** {rule.priority:g} (tried {rule.order} of {len(ruleset.rules)})", "", "## Why", ""]
    for hid in rule.heuristics:
        lines.append(f"- **{hid}**: {ruleset.heuristics.get(hid, {}).get('text', '(not in the catalog)')}")
    lines += ["", "## When", ""]
    for condition in rule.source.when:
        lines.append(f"- `{condition.text}`: {plain_condition(condition.node)}")
    names = dict.fromkeys(n.id for c in rule.source.when for n in nodes.names_in(c.node))
    if names:
        lines += ["", "Names used:", ""] + [f"- {describe_name(n, ruleset)}" for n in names]
    lines += ["", "## Then", ""] + _effects(rule) + ["", f"Because: {rule.source.because}", ""]
    lines += _example(rule, expert)
    return "\n".join(lines) + "\n"


def _example(rule, expert) -> list[str]:
    example = rule.source.example
    if not example:
        return ["## Example", "", "(no example workload given)"]
    try:
        answer = expert.recommend(example)
    except KentinoError as exc:  # `rules check` refuses such an example; a page must still be written
        return ["## Example", "", f"The example `{example}` is not a valid workload: {exc}"]
    step = next((step for step in answer.trace if step.rule == rule.id), None)
    facts = ", ".join(f"{k}: {v}" for k, v in example.items())
    lines = ["## Example", "", f"`{{{facts}}}` -> **{answer.recommendation.kind}**; "
             f"this rule {'fires' if step else 'does NOT fire'} on it."]
    if step is not None:
        # what an auditor reads for this rule: the snapshot that shows when an edit changes it
        matched = ", ".join(f"{name} = {_shown(value)}" for name, value in step.matched.items())
        concluded = ", ".join(f"{name} = {_shown(value)}" for name, value in step.concluded.items())
        lines += ["", "Its step in the trace:", "",
                  f"- matched: {matched or '(nothing)'}", f"- concluded: {concluded or '(nothing)'}",
                  f"- because: {step.because}"]
    return lines


def _shown(value) -> str:
    return f"`{value}`" if not isinstance(value, str) else f"`'{value}'`"


def index_page(ruleset) -> str:
    lines = ["# Rules", "", "Generated by `kentino-expert rules docs`; do not edit by hand.", "",
             "| order | rule | heuristics | where |", "|---|---|---|---|"]
    for rule in ruleset.rules:
        lines.append(f"| {rule.order} | [`{rule.id}`]({rule.id}.md) | {', '.join(rule.heuristics)} | "
                     f"`{rule.location.file}:{rule.location.line}` |")
    return "\n".join(lines) + "\n"


def write_docs(expert, outdir) -> list[Path]:
    """Write every rule page and the index; remove pages of rules that no longer exist."""
    root = Path(outdir)
    root.mkdir(parents=True, exist_ok=True)
    pages = {f"{rule.id}.md": rule_page(rule, expert.ruleset, expert) for rule in expert.ruleset.rules}
    pages["index.md"] = index_page(expert.ruleset)
    for stale in root.glob("*.md"):
        if stale.name not in pages:
            stale.unlink()
    written = []
    for name, text in pages.items():
        (root / name).write_text(text, encoding="utf-8")
        written.append(root / name)
    return written


EXAMPLES_HEADER = (
    "# Each rule's documented `example` workload must fire that rule (kept in step with the rule files:\n"
    "# `kentino-expert test` fails when an edit stops an example from firing its rule).\n"
    "# Generated: `kentino-expert rules examples > tests/scenarios/rule-examples.yaml`.\n")


def _flow(value) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10**6)
    return text.strip().removesuffix("\n...").strip()


def rule_examples_yaml(ruleset) -> str:
    """A scenario file with one scenario per rule `example`: the workload must fire that rule."""
    out = [EXAMPLES_HEADER]
    for rule in ruleset.rules:
        example = rule.source.example
        if not example:
            continue
        out.append(f"- name: example of {rule.id}\n")
        if any(isinstance(v, dict) for v in example.values()):
            out.append("  facts:\n" + "".join(f"    {k}: {_flow(v)}\n" for k, v in example.items()))
        else:
            out.append(f"  facts: {_flow(example)}\n")
        out.append(f"  expect:\n    rules: [{rule.id}]\n")
    return "".join(out)
