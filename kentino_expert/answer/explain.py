"""Explanations of an answer or a logged decision, as Markdown and as one self-contained HTML page.

Both show the answer; why it is provisional (the missing facts, ranked, with their questions); then
each rule that fired, with its conditions as actual value vs threshold (a conclusion no rule drew reads
false, with the figure and threshold that kept it so), the heuristics it encodes in the document's own
words, its file:line; the assumptions; why the other kinds were not chosen; and the rule-set digest (and
whether the current rules still match it).
"""
from __future__ import annotations

import html
from datetime import datetime

from ..errors import KentinoError
from ..lang.semantics import truth_of
from .charts import ChartContext, charts_of, context_of
from .charts.svg import to_svg
from .charts.text import to_html as chart_html
from .charts.text import to_markdown as chart_markdown
from .explain_quote import bill_html, bill_markdown, price_list_html, price_list_markdown
from .explain_style import CSS
from .questions import given_facts, rank_questions
from .render import numbered, provisional_heading, provisional_lines
from .subject import checked_subject
from .whynot import absent_notes, condition_values, describe_values, state_of, why_not_from


def _normalise(expert, subject) -> tuple[dict, dict | None]:
    """(answer dict, decision metadata or None) from an Answer, an answer dict, a decision or facts."""
    if hasattr(subject, "model_dump"):
        return subject.model_dump(mode="json"), None
    if not isinstance(subject, dict):
        raise TypeError(f"cannot explain a {type(subject).__name__}")
    if "answer" in subject:  # a logged decision: another program may have written its row, so its shape is checked
        subject = checked_subject(subject)
        meta = {k: subject.get(k) for k in ("decision_id", "created_at", "source", "session_id", "turn", "digest")}
        return subject["answer"], meta
    if "recommendation" in subject and "trace" in subject:
        meta = {"decision_id": subject["decision_id"]} if subject.get("decision_id") else None
        return subject, meta
    return expert.recommend(subject).model_dump(mode="json"), None


def build_report(expert, subject) -> dict:
    """The structured content both renderers show."""
    answer, meta = _normalise(expert, subject)
    ruleset = expert.ruleset
    digest = (answer.get("ruleset") or {}).get("digest")
    # Under other rules, today's conditions and why-not would contradict the stored trace (a rule shown
    # as fired whose condition "does not hold"): they are shown only for the rule set that decided.
    same_rules = digest == ruleset.digest
    firings, state, error = _rerun(expert, answer, meta, same_rules)
    steps = [_report_step(expert, step, same_rules, state) for step in answer.get("trace", [])]
    not_chosen = [item.model_dump(mode="json") for item in why_not_from(expert, firings, state)] if not error else []
    # The policy's lines (limits, floor) are the deciding rule set's: under other rules they are left out.
    charts = charts_of(answer, context_of(expert) if same_rules else ChartContext())
    return {"answer": answer, "decision": meta, "steps": steps, "why_not": not_chosen, "why_not_error": error,
            "questions": _questions(expert, subject, answer, same_rules) if not error else [], "charts": charts,
            "digest": digest, "engine": (answer.get("ruleset") or {}).get("engine"),
            "current_digest": ruleset.digest, "digest_matches": same_rules, "current_rules": str(expert.rules_dir)}


def _questions(expert, subject, answer: dict, same_rules: bool) -> list[dict]:
    """The facts a provisional answer waits for, ranked (by the deciding rule set only: others would ask
    for other facts)."""
    if answer.get("status") != "provisional" or not same_rules:
        return []
    given = subject.get("facts") if isinstance(subject, dict) and isinstance(subject.get("answer"), dict) else None
    facts = given if isinstance(given, dict) else given_facts(answer)
    return [q.model_dump(mode="json") for q in rank_questions(expert, facts, answer["recommendation"]["kind"])]


def _rerun(expert, answer: dict, meta: dict | None, same_rules: bool) -> tuple[list | None, dict, str | None]:
    """(firings, final state, None) of the answer's facts on the current rules, or ([], {}, why they are not
    shown): the why-not and the reasons a conclusion is false come from this run."""
    if not same_rules:
        return [], {}, _other_rules(expert, answer, meta)
    try:
        firings, state = state_of(expert, answer)
    except KentinoError as exc:
        return [], {}, str(exc)
    return firings, state, None


def _other_rules(expert, answer: dict, meta: dict | None) -> str:
    """Why the conditions and the why-not are not shown: the rules read now are not the deciding ones (changed
    since, or another directory: then where the deciding ones were, which explain them whole if unchanged)."""
    decision_id = meta.get("decision_id") if meta else None
    decided = answer.get("ruleset") or {}
    where = decided.get("directory")
    text = (f"the rules read now ({expert.ruleset.digest[:16]}) are not the ones that decided "
            f"({str(decided.get('digest') or 'unknown')[:16]}{f', in {where}' if where else ''}); "
            f"`kentino-expert decisions replay {decision_id or 'ID'}` re-evaluates it with the rules read now")
    if where and str(where) != str(expert.rules_dir):
        text += f", and `--rules {where}` explains it whole if those files are unchanged"
    return text


def _report_step(expert, step: dict, same_rules: bool, state: dict) -> dict:
    """One fired rule: its conditions as actual vs threshold (only under the deciding rule set); a name with
    no value when it fired reads as what it is (a conclusion no rule drew: false, and why, from `state`)."""
    ruleset, heuristics = expert.ruleset, expert.knowledge.heuristics
    rule = ruleset.by_id.get(step["rule"])
    matched = step.get("matched") or {}
    params = ruleset.parameter_values
    env = {**params, **matched}
    conditions = []
    for condition in (rule.source.when if rule is not None and same_rules else ()):
        actual, thresholds = condition_values(condition.node, matched, params, ruleset)
        notes = absent_notes(actual, matched, state or matched, ruleset, params)
        conditions.append({"text": condition.text, "holds": truth_of(condition.node, env), "actual": actual,
                           "thresholds": thresholds, "values": describe_values(actual, thresholds, notes)})
    return {
        "step": step["step"], "rule": step["rule"], "file": step["file"], "line": step["line"],
        "description": rule.description if rule else "", "because": step.get("because", ""),
        "in_current_rules": rule is not None, "conditions": conditions, "concluded": step.get("concluded", {}),
        "heuristics": [{"id": hid, "section": heuristics.get(hid, {}).get("section", ""),
                        "text": heuristics.get(hid, {}).get("text", "(not in the current knowledge catalog)")}
                       for hid in step.get("heuristics", [])],
    }


def _plan_rows(rec: dict) -> list[tuple[str, str]]:
    par = rec.get("parallelism") or {}
    rows = [("nodes", rec.get("nodes")), ("GPUs per node", rec.get("gpus_per_node")), ("GPU", rec.get("gpu")),
            ("precision", rec.get("precision")), ("replicas", rec.get("replicas")), ("TP", par.get("tp")),
            ("PP", par.get("pp")), ("DP", par.get("dp")), ("sharding", par.get("sharding")),
            ("interconnect", rec.get("interconnect"))]
    return [(name, str(value)) for name, value in rows if value is not None]


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _decision_line(meta: dict | None) -> str | None:
    if not meta or not meta.get("decision_id"):
        return None
    parts = [f"Decision `{meta['decision_id']}`"]
    if meta.get("source"):
        parts.append(f"via {meta['source']}")
    if meta.get("created_at"):
        parts.append(f"at {meta['created_at']}")
    if meta.get("session_id"):
        turn = f" turn {meta['turn']}" if meta.get("turn") is not None else ""
        parts.append(f"session `{meta['session_id']}`{turn}")
    return " ".join(parts)


def chart_files(expert, answer_dict_or_decision) -> dict[str, str]:
    """Each chart of the explanation as a standalone SVG document, by file name (KEY.svg)."""
    return {f"{chart.key}.svg": '<?xml version="1.0" encoding="utf-8"?>\n' + to_svg(chart) + "\n"
            for chart in build_report(expert, answer_dict_or_decision)["charts"]}


def explain_markdown(expert, answer_dict_or_decision) -> str:
    """A Markdown explanation of an answer (Answer or dict), a logged decision, or facts."""
    report = build_report(expert, answer_dict_or_decision)
    answer, rec = report["answer"], report["answer"]["recommendation"]
    out = [f"# Recommendation: {rec['kind']}", ""]
    line = _decision_line(report["decision"])
    if line:
        out += [line, ""]
    out += [f"**Status:** {answer.get('status')}", "", rec.get("summary", ""), "", "| plan | value |", "|---|---|"]
    out += [f"| {name} | {_cell(value)} |" for name, value in _plan_rows(rec)]
    out.append("")
    if report["questions"]:
        out += ["## Why provisional", "", provisional_heading(len(report["questions"])), ""]
        out += numbered(provisional_lines(report["questions"])) + [""]
    elif answer.get("status") == "provisional" and report["why_not_error"]:
        out += ["## Why provisional", "", f"(the missing facts are not listed: {report['why_not_error']})", ""]
    if answer.get("warnings"):
        out += ["## Warnings", ""]
        out += [f"- **{w['code']}** ({', '.join(w['heuristics'])}, rule `{w['rule']}`): {w['message']}"
                for w in answer["warnings"]]
        out.append("")
    out += bill_markdown(answer) + _markdown_alternatives(answer.get("alternatives") or [])
    if report["charts"]:
        out += ["## Charts", ""]
        for chart in report["charts"]:
            out += chart_markdown(chart)
    out += ["## Why: the rules that fired", ""]
    for step in report["steps"]:
        out += _markdown_step(step)
    return "\n".join(out + _markdown_tail(report)) + "\n"


def _alternative_rows(alternatives: list) -> list[tuple[str, str, str, str]]:
    """(build, works, deciding figure, why) of each alternative of an answer dict."""
    rows = []
    for item in alternatives:
        nodes = f"{item.get('nodes')} x " if item.get("nodes") is not None else ""
        at = f" at {item['precision']}" if item.get("precision") else ""
        figure = item.get("figure") or {}
        shown = f"{figure.get('name')} = {_number(figure.get('value'))} {figure.get('unit') or ''}".rstrip() \
            if figure else ""
        rows.append((f"{item.get('kind')}, {nodes}{item.get('gpus_per_node')} x {item.get('gpu')}{at}",
                     "yes" if item.get("works") else "no", shown, item.get("why", "")))
    return rows


def _number(value) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _markdown_alternatives(alternatives: list) -> list[str]:
    if not alternatives:
        return []
    out = ["## Alternatives", "", "| build | works | deciding figure | why |", "|---|---|---|---|"]
    out += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in _alternative_rows(alternatives)]
    return out + [""]


def _markdown_step(step: dict) -> list[str]:
    out = [f"### {step['step']}. `{step['rule']}` ({step['file']}:{step['line']})", ""]
    if step["description"]:
        out += [f"*{step['description']}*", ""]
    if step["because"]:
        out += [f"Because: {step['because']}", ""]
    if not step["in_current_rules"]:
        out += ["(This rule is not in the current rule set; its conditions cannot be shown.)", ""]
    if step["conditions"]:
        out += ["| condition | holds | actual vs threshold |", "|---|---|---|"]
        out += [f"| `{_cell(c['text'])}` | {'yes' if c['holds'] else 'no'} | {_cell(c['values']) or '-'} |"
                for c in step["conditions"]]
        out.append("")
    for h in step["heuristics"]:
        section = f" ({h['section']})" if h["section"] else ""
        out += [f"> **{h['id']}**{section}: {h['text']}", ">"]
    if step["heuristics"]:
        out[-1] = ""
    return out


def _markdown_tail(report: dict) -> list[str]:
    """Assumptions, why not, and the rule set."""
    answer, out = report["answer"], []
    if answer.get("assumptions"):
        out += ["## Assumptions", ""]
        out += [f"- `{a['fact']}` = {a['value']}: {a['why']}" for a in answer["assumptions"]]
        out.append("")
    out += ["## Why not the other kinds", ""]
    if report["why_not_error"]:
        out += [f"(not shown: {report['why_not_error']})", ""]
    out += [f"- **{item['kind']}**: {item['text']}" for item in report["why_not"]]
    out += ["", "## Rule set", "", f"- digest: `{report['digest']}`", f"- engine: {report['engine']}"]
    if report["digest_matches"]:
        out.append("- the current rule set has the same digest")
    else:
        out.append(f"- the current rule set differs: `{report['current_digest']}` (so the conditions and the "
                   "why-not, which only the deciding rule set can show truly, are left out)")
    out.append(f"- the current rules: `{report['current_rules']}`")
    return out + price_list_markdown(answer)


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def explain_html(expert, answer_dict_or_decision) -> str:
    """The same explanation as one self-contained HTML page (inline CSS, no scripts, no network)."""
    report = build_report(expert, answer_dict_or_decision)
    answer, rec = report["answer"], report["answer"]["recommendation"]
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>Kentino recommendation: {_e(rec['kind'])}</title><style>{CSS}</style></head><body><main>"]
    parts += _html_header(answer, report["decision"])
    parts.append('<section class="plan"><h2>Plan</h2><table><tr>'
                 + "".join(f"<th>{_e(name)}</th>" for name, _ in _plan_rows(rec)) + "</tr><tr>"
                 + "".join(f"<td>{_e(value)}</td>" for _, value in _plan_rows(rec)) + "</tr></table></section>")
    if report["questions"]:
        heading = provisional_heading(len(report["questions"]))
        parts.append(f'<section class="provisional"><h2>Why provisional</h2><p>{_e(heading)}</p><ol class="questions">')
        parts += [f"<li>{_e(line)}</li>" for line in provisional_lines(report["questions"])]
        parts.append("</ol></section>")
    elif answer.get("status") == "provisional" and report["why_not_error"]:
        parts.append(f'<section class="provisional"><h2>Why provisional</h2><p>the missing facts are not listed: '
                     f'{_e(report["why_not_error"])}</p></section>')
    if answer.get("warnings"):
        parts.append('<section><h2>Warnings</h2><ul class="warnings">')
        parts += [f"<li><strong>{_e(w['code'])}</strong> ({_e(', '.join(w['heuristics']))}, rule "
                  f"<code>{_e(w['rule'])}</code>): {_e(w['message'])}</li>" for w in answer["warnings"]]
        parts.append("</ul></section>")
    parts += bill_html(answer, _e)
    if answer.get("alternatives"):
        parts.append('<section class="alternatives"><h2>Alternatives</h2><table><tr><th>build</th><th>works</th>'
                     '<th>deciding figure</th><th>why</th></tr>')
        parts += ["<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>"
                  for row in _alternative_rows(answer["alternatives"])]
        parts.append("</table></section>")
    if report["charts"]:
        parts.append('<section class="charts"><h2>Charts</h2>')
        parts += [chart_html(chart) for chart in report["charts"]]
        parts.append("</section>")
    parts.append('<section class="trace"><h2>Why: the rules that fired</h2>')
    for step in report["steps"]:
        parts += _html_step(step)
    parts.append("</section>")
    parts += _html_tail(report)
    return "\n".join(parts) + "\n"


def _html_header(answer: dict, meta: dict | None) -> list[str]:
    rec, status = answer["recommendation"], answer.get("status") or "final"
    parts = [f'<header class="answer"><h1>Recommendation: <span class="kind" id="kind">{_e(rec["kind"])}</span></h1>',
             f'<p><span class="status {_e(status)}">{_e(status)}</span></p><p>{_e(rec.get("summary"))}</p>']
    if meta and meta.get("decision_id"):
        parts.append(f'<p class="decision">Decision <code>{_e(meta["decision_id"])}</code>'
                     + (f" via {_e(meta.get('source'))}" if meta.get("source") else "")
                     + (f" at {_e(meta.get('created_at'))}" if meta.get("created_at") else "")
                     + (f", session <code>{_e(meta.get('session_id'))}</code>" if meta.get("session_id") else "")
                     + (f" turn {_e(meta.get('turn'))}" if meta.get("turn") is not None else "") + "</p>")
    parts.append("</header>")
    return parts


def _html_step(step: dict) -> list[str]:
    parts = [f'<div class="rule" id="rule-{_e(step["rule"])}" data-rule="{_e(step["rule"])}">'
             f'<h3>{step["step"]}. <code>{_e(step["rule"])}</code></h3>'
             f'<div class="where">{_e(step["file"])}:{_e(step["line"])}</div>']
    if step["description"]:
        parts.append(f"<p><em>{_e(step['description'])}</em></p>")
    if step["because"]:
        parts.append(f"<p>Because: {_e(step['because'])}</p>")
    if not step["in_current_rules"]:
        parts.append("<p>This rule is not in the current rule set; its conditions cannot be shown.</p>")
    if step["conditions"]:
        parts.append("<table><tr><th>condition</th><th>holds</th><th>actual vs threshold</th></tr>")
        parts += [f"<tr><td><code>{_e(c['text'])}</code></td>"
                  f"<td class=\"{'yes' if c['holds'] else 'no'}\">{'yes' if c['holds'] else 'no'}</td>"
                  f"<td>{_e(c['values']) or '-'}</td></tr>" for c in step["conditions"]]
        parts.append("</table>")
    for h in step["heuristics"]:
        section = f" ({_e(h['section'])})" if h["section"] else ""
        parts.append(f'<blockquote><span class="hid">{_e(h["id"])}</span>{section}: {_e(h["text"])}</blockquote>')
    parts.append("</div>")
    return parts


def _html_tail(report: dict) -> list[str]:
    """Assumptions, why not, and the footer with the rule set."""
    answer, parts = report["answer"], []
    if answer.get("assumptions"):
        parts.append('<section><h2>Assumptions</h2><ul class="assumptions">')
        parts += [f"<li><code>{_e(a['fact'])}</code> = {_e(a['value'])}: {_e(a['why'])}</li>"
                  for a in answer["assumptions"]]
        parts.append("</ul></section>")
    parts.append('<section><h2>Why not the other kinds</h2><ul class="whynot">')
    if report["why_not_error"]:
        parts.append(f"<li>not shown: {_e(report['why_not_error'])}</li>")
    parts += [f"<li><strong>{_e(item['kind'])}</strong>: {_e(item['text'])}</li>" for item in report["why_not"]]
    parts.append("</ul></section>")
    same = ("the current rule set has the same digest" if report["digest_matches"]
            else f"the current rule set differs: {_e(report['current_digest'])}")
    parts.append(f'<footer>Rule set digest <code>{_e(report["digest"])}</code> ({_e(report["engine"])}); {same} '
                 f'(the current rules: <code>{_e(report["current_rules"])}</code>){price_list_html(answer, _e)}. '
                 f"Generated {_e(datetime.now().astimezone().isoformat(timespec='seconds'))}.</footer>")
    parts.append("</main></body></html>")
    return parts
