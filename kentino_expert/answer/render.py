"""Answers for people (text), machines (json) and audit files (markdown)."""
from __future__ import annotations

from .. import fastjson
from .model import Answer


def _figure(value) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _present(pairs) -> list[str]:
    """`name=value` for each value the plan has; absent (None) values are left out."""
    return [f"{name}={value}" for name, value in pairs if value is not None]


def _blank(value) -> str:
    return "" if value is None else str(value)


def to_json(answer: Answer) -> str:
    return fastjson.dumps(answer.model_dump(mode="json"), indent=True)


def to_text(answer: Answer) -> str:
    rec = answer.recommendation
    lines = [f"{rec.kind.upper()}  ({answer.status})", rec.summary, ""]
    par = rec.parallelism
    plan = _present([("nodes", rec.nodes), ("gpus/node", rec.gpus_per_node), ("gpu", rec.gpu),
                     ("precision", rec.precision), ("replicas", rec.replicas)])
    parallelism = " ".join(_present([("tp", par.tp), ("pp", par.pp), ("dp", par.dp), ("sharding", par.sharding)]))
    plan += [parallelism] if parallelism else []
    plan += _present([("interconnect", rec.interconnect)])
    lines += ["Plan: " + ", ".join(plan)] + _per_gpu_line(answer) + [""]
    if answer.warnings:
        lines.append("Warnings:")
        lines += [f"  ! [{w.code}] {w.message} ({', '.join(w.heuristics)})" for w in answer.warnings]
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


def to_markdown(answer: Answer) -> str:
    rec = answer.recommendation
    out = [f"# Recommendation: {rec.kind}", "", f"**Status:** {answer.status}  ", rec.summary, "",
           "| nodes | GPUs/node | GPU | precision | replicas | TP | PP | DP | sharding | interconnect |",
           "|---|---|---|---|---|---|---|---|---|---|",
           "| " + " | ".join(_blank(v) for v in (rec.nodes, rec.gpus_per_node, rec.gpu, rec.precision, rec.replicas,
                                                 rec.parallelism.tp, rec.parallelism.pp, rec.parallelism.dp,
                                                 rec.parallelism.sharding, rec.interconnect)) + " |", ""]
    if answer.warnings:
        out += ["## Warnings", ""]
        out += [f"- **{w.code}** ({', '.join(w.heuristics)}): {w.message}" for w in answer.warnings] + [""]
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
    return "\n".join(out) + "\n"


FORMATS = {"text": to_text, "json": to_json, "markdown": to_markdown}
