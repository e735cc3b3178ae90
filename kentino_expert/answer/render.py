"""Answers for people (text), machines (json) and audit files (markdown)."""
from __future__ import annotations

from .. import fastjson
from .charts import ChartContext, charts_of
from .charts.text import to_markdown as chart_markdown
from .model import Answer
from .render_quote import alternative_price, quote_markdown, quote_text


def _figure(value) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _present(pairs) -> list[str]:
    """`name=value` for each value the plan has; absent (None) values are left out."""
    return [f"{name}={value}" for name, value in pairs if value is not None]


def _blank(value) -> str:
    return "" if value is None else str(value)


def provisional_lines(questions) -> list[str]:
    """Why an answer is provisional: each missing fact (Question, or its JSON dict), most decisive first, with
    its question and the kinds some answer to it leads to."""
    out = []
    for question in questions:
        q = question if isinstance(question, dict) else question.model_dump(mode="json")
        ask = f": {q['ask']}" if q.get("ask") else ""
        # a question is asked only when some value changes the build (rank_questions): without another kind,
        # it is the nodes, the card or the precision that moves
        leads = (f"could lead to {', '.join(q['alternatives'])}" if q.get("alternatives")
                 else "some value changes the nodes, card or precision, not the kind" + _node_spread(q))
        out.append(f"{q['fact']}{ask} ({leads})")
    return out


def _node_spread(question: dict) -> str:
    """How far the values tried move the purchase, when they move its nodes: a 128k RAG prompt may need seven
    times the nodes of the 1k one assumed, which 'changes the nodes' alone does not tell."""
    nodes = sorted({probe["nodes"] for probe in question.get("probes") or () if probe.get("nodes")})
    return f": the values tried need {nodes[0]:,} to {nodes[-1]:,} nodes" if len(nodes) > 1 else ""


def numbered(lines, indent: str = "") -> list[str]:
    return [f"{indent}{index}. {line}" for index, line in enumerate(lines, start=1)]


def provisional_heading(count: int) -> str:
    return f"Provisional because {count} fact(s) worth asking for are not given (most decisive first):"


def alternative_plan(alternative) -> str:
    """An alternative build in a few words: `multi-node-ib, 4 x 8 x l40 at bf16`."""
    nodes = f"{alternative.nodes} x " if alternative.nodes is not None else ""
    at = f" at {alternative.precision}" if alternative.precision else ""
    return f"{alternative.kind}, {nodes}{alternative.gpus_per_node} x {alternative.gpu}{at}"


def deciding_figure(alternative) -> str:
    """`works, time_to_result_days 27.7 days` / `does not work, recommended_nodes 6 nodes`."""
    verdict = "works" if alternative.works else "does not work"
    figure = alternative.figure
    if figure is None or figure.value is None:
        return verdict
    return f"{verdict}, {figure.name} {_figure(figure.value)} {figure.unit}".rstrip()


def to_json(answer: Answer, questions=None) -> str:
    """The answer's JSON (the questions are a decision's: the service and `--log` give them)."""
    return fastjson.dumps(answer.model_dump(mode="json"), indent=True)


def to_text(answer: Answer, questions=None) -> str:
    """The answer for a person; with `questions` (ranked) a provisional answer says which facts it waits for."""
    rec = answer.recommendation
    lines = [f"{rec.kind.upper()}  ({answer.status})", rec.summary, ""]
    par = rec.parallelism
    plan = _present([("nodes", rec.nodes), ("gpus/node", rec.gpus_per_node), ("gpu", rec.gpu),
                     ("precision", rec.precision), ("replicas", rec.replicas)])
    parallelism = " ".join(_present([("tp", par.tp), ("pp", par.pp), ("dp", par.dp), ("sharding", par.sharding)]))
    plan += [parallelism] if parallelism else []
    plan += _present([("interconnect", rec.interconnect)])
    lines += ["Plan: " + ", ".join(plan)] + _per_gpu_line(answer) + [""] + quote_text(answer)
    if answer.status == "provisional" and questions:
        lines += [provisional_heading(len(questions))] + numbered(provisional_lines(questions), "  ") + [""]
    if answer.warnings:
        lines.append("Warnings:")
        lines += [f"  ! [{w.code}] {w.message} ({', '.join(w.heuristics)})" for w in answer.warnings]
        lines.append("")
    if answer.alternatives:
        lines.append("Alternatives:")
        lines += [f"  {'+' if a.works else '-'} {alternative_plan(a)} ({deciding_figure(a)}"
                  f"{alternative_price(a, answer)}): {a.why}" for a in answer.alternatives]
        lines.append("")
    lines.append("Why:")
    for step in answer.trace:
        lines.append(f"  {step.step:2d}. {step.rule} [{', '.join(step.heuristics)}] {step.file}:{step.line}")
        lines.append(f"      {step.because}")
    if answer.assumptions:
        lines += ["", "Assumed:"]
        lines += [f"  - {a.fact} = {a.value}: {a.why}" for a in answer.assumptions]
    lines += ["", f"Rule set {answer.ruleset.digest[:16]} ({answer.ruleset.engine}) from {answer.ruleset.directory}"]
    return "\n".join(lines) + "\n"


def _per_gpu_line(answer: Answer) -> list[str]:
    """'Per GPU: 57 GB (60% of the card); per user: 26 tokens/s' from the plan figures, when the answer has them."""
    figures = answer.figures
    parts = []
    if "plan_gpu_memory_gb" in figures and "plan_gpu_memory_fraction" in figures:
        parts.append(f"Per GPU: {figures['plan_gpu_memory_gb'].value:,.0f} GB "
                     f"({figures['plan_gpu_memory_fraction'].value:.0%} of the card)")
    if "per_user_tokens_per_s" in figures:
        parts.append(f"per user: {_figure(figures['per_user_tokens_per_s'].value)} tokens/s")
    return ["; ".join(parts)] if parts else []


def to_markdown(answer: Answer, questions=None, charts: ChartContext | None = None) -> str:
    """The answer as a Markdown report; with `questions` (ranked) a provisional answer says which facts it
    waits for; with `charts` (the context of the rules that answered), the charts' text equivalents too
    (without it, the charts are drawn without the policy's lines)."""
    rec = answer.recommendation
    out = [f"# Recommendation: {rec.kind}", "", f"**Status:** {answer.status}  ", rec.summary, "",
           "| nodes | GPUs/node | GPU | precision | replicas | TP | PP | DP | sharding | interconnect |",
           "|---|---|---|---|---|---|---|---|---|---|",
           "| " + " | ".join(_blank(v) for v in (rec.nodes, rec.gpus_per_node, rec.gpu, rec.precision, rec.replicas,
                                                 rec.parallelism.tp, rec.parallelism.pp, rec.parallelism.dp,
                                                 rec.parallelism.sharding, rec.interconnect)) + " |", ""]
    out += quote_markdown(answer)
    if answer.status == "provisional" and questions:
        out += ["## Why provisional", "", provisional_heading(len(questions)), ""]
        out += numbered(provisional_lines(questions)) + [""]
    if answer.warnings:
        out += ["## Warnings", ""]
        out += [f"- **{w.code}** ({', '.join(w.heuristics)}): {w.message}" for w in answer.warnings] + [""]
    if answer.alternatives:
        out += ["## Alternatives", "", "| build | works | deciding figure | price, power | why |",
                "|---|---|---|---|---|"]
        out += [f"| {alternative_plan(a)} | {'yes' if a.works else 'no'} | {_figure_cell(a)} | "
                f"{alternative_price(a, answer).removeprefix(', ')} | {a.why} |" for a in answer.alternatives] + [""]
    drawn = charts_of(answer.model_dump(mode="json"), charts or ChartContext())
    if drawn:
        out += ["## Charts", ""] + [line for chart in drawn for line in chart_markdown(chart)]
    out += ["## Trace", "", "| # | rule | heuristics | where | because |", "|---|---|---|---|---|"]
    for step in answer.trace:
        out.append(f"| {step.step} | `{step.rule}` | {', '.join(step.heuristics)} | {step.file}:{step.line} "
                   f"| {step.because} |")
    out += ["", "## Figures", "", "| figure | value | unit |", "|---|---|---|"]
    out += [f"| {name} | {_figure(f.value)} | {f.unit} |" for name, f in answer.figures.items()]
    if answer.assumptions:
        out += ["", "## Assumptions", ""] + [f"- `{a.fact}` = {a.value}: {a.why}" for a in answer.assumptions]
    out += ["", "## Rule set", "", f"- digest: `{answer.ruleset.digest}`", f"- engine: {answer.ruleset.engine}",
            f"- rules: `{answer.ruleset.directory}`", f"- knowledge: `{answer.ruleset.knowledge_directory}`"]
    out += [f"- `{name}`: `{digest[:16]}`" for name, digest in sorted(answer.ruleset.files.items())]
    if answer.price_list is not None:
        out += [f"- price list: `{answer.price_list.file}` of {answer.price_list.date}, digest "
                f"`{answer.price_list.digest}`"]
    return "\n".join(out) + "\n"


def _figure_cell(alternative) -> str:
    figure = alternative.figure
    if figure is None or figure.value is None:
        return ""
    return f"{figure.name} = {_figure(figure.value)} {figure.unit}".rstrip()


FORMATS = {"text": to_text, "json": to_json, "markdown": to_markdown}


def render(fmt: str, answer: Answer, questions=None, charts: ChartContext | None = None) -> str:
    """The answer in a format of FORMATS; the Markdown report's charts drawn with the `charts` context."""
    return to_markdown(answer, questions, charts) if fmt == "markdown" else FORMATS[fmt](answer, questions)
