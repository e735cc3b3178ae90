"""Why-not and explain print a conclusion no rule drew as false, with the figure and threshold that kept it so;
the CLI text answer and the explain report say why an answer is provisional: the missing facts, ranked, with
their questions."""
from __future__ import annotations

import json

from click.testing import CliRunner

from kentino_expert.answer.explain import explain_html, explain_markdown
from kentino_expert.answer.questions import given_facts, rank_questions
from kentino_expert.answer.whynot import why_not
from kentino_expert.cli.main import main
from kentino_expert.decisions.connect import open_log

SEVENTY_B = {"task": "inference", "model": "llama-3.1-70b"}
FINAL = {"task": "lora", "model": "llama-3.1-8b", "gpu": "rtx-pro-6000", "gpus_per_node": 8,
         "interconnect": "hdr-200g-ib", "proposed_build": {"nodes": 1, "gpus_per_node": 8}}


def _multi_node_why_not(expert, facts):
    return next(item for item in why_not(expert, facts) if item.kind == "multi-node-ib")


def test_why_not_prints_an_undrawn_conclusion_as_false_with_its_figure(expert):
    """For 70B, `beyond_cliff` is false (not unknown), with params_b and the cliff threshold that kept it so."""
    item = _multi_node_why_not(expert, SEVENTY_B)
    assert item.rule == "beyond-cliff-at-production-latency"
    assert "beyond_cliff is unknown" not in item.text
    assert "beyond_cliff is false" in item.text
    assert "rule 'at-or-beyond-the-405b-cliff' needs params_b >= cliff_params_b" in item.text
    assert "params_b is 70.6" in item.text and "cliff_params_b = 405" in item.text
    assert item.failing[0].values == {"beyond_cliff": False}


def test_why_not_keeps_facts_not_given_apart_from_false(expert):
    """A fact the buyer did not give reads 'not given' (its value stays null), never false."""
    item = next(i for i in why_not(expert, SEVENTY_B) if i.kind == "single-node-int4")
    assert "precision is not given" in item.text
    assert item.failing[0].values["precision"] is None and item.failing[0].values["beyond_cliff"] is False


def test_a_conclusion_drawn_reads_true_and_names_no_reason(expert):
    """For 405B the same conclusion is drawn: the why-not of single-node shows it true, with no 'false' reason."""
    facts = {"task": "inference", "model": "llama-3.1-405b", "latency": "production"}
    single = next(i for i in why_not(expert, facts) if i.kind == "single-node")
    assert "beyond_cliff is true" in single.text and "beyond_cliff is false" not in single.text


def test_explain_shows_the_false_conclusion_and_its_threshold(expert):
    """The explain report's condition table shows `not beyond_cliff` holding because beyond_cliff is false, with why."""
    text = explain_markdown(expert, expert.recommend(SEVENTY_B))
    row = next(line for line in text.splitlines() if line.startswith("| `not beyond_cliff` |"))
    assert "| yes |" in row and "beyond_cliff is false" in row and "params_b is 70.6; cliff_params_b = 405" in row
    assert "beyond_cliff is unknown" not in text
    page = explain_html(expert, expert.recommend(SEVENTY_B))
    assert "beyond_cliff is false, as no rule concluded it" in page


def _ranked_facts(expert, facts):
    answer = expert.recommend(facts)
    return [q.fact for q in rank_questions(expert, facts, answer.recommendation.kind)]


def test_cli_text_says_why_the_answer_is_provisional(expert, tmp_path):
    """The text answer lists every missing fact in rank order with its question, and the kinds it could lead to."""
    result = CliRunner().invoke(main, ["recommend", "-"], input=json.dumps(SEVENTY_B))
    assert result.exit_code == 0, result.output
    ranked = rank_questions(expert, SEVENTY_B, "single-node")
    assert ranked, "the 70B facts leave questions open"
    assert f"Provisional because {len(ranked)} fact(s) worth asking for are not given" in result.output
    positions = [result.output.index(f"  {n}. {q.fact}: {q.ask}") for n, q in enumerate(ranked, start=1)]
    assert positions == sorted(positions)
    leading = next(q for q in ranked if q.alternatives)
    assert f"could lead to {', '.join(leading.alternatives)}" in result.output


def test_a_question_that_moves_only_the_nodes_says_how_far(expert):
    """A RAG service's prompt length, not given, moves the purchase from the nodes of the 1k prompt assumed to
    those of a long one: the question says the spread of nodes the values tried need, as its probes found it."""
    facts = {"task": "inference", "model": "llama-3.3-70b", "qps": 2, "context_tokens": 131072, "concurrency": 16,
             "latency": "production"}
    result = CliRunner().invoke(main, ["recommend", "-"], input=json.dumps(facts))
    question = next(q for q in rank_questions(expert, facts) if q.fact == "prompt_tokens")
    nodes = sorted({probe.nodes for probe in question.probes})
    assert not question.alternatives and nodes[-1] >= 6 * nodes[0], nodes
    assert f"not the kind: the values tried need {nodes[0]:,} to {nodes[-1]:,} nodes" in result.output


def test_cli_text_of_a_final_answer_has_no_provisional_section(expert):
    """With every fact given the answer is final and says nothing about missing facts."""
    result = CliRunner().invoke(main, ["recommend", "-"], input=json.dumps(FINAL))
    assert result.exit_code == 0, result.output
    assert result.output.startswith("SINGLE-NODE  (final)") and "Provisional because" not in result.output


def test_cli_markdown_and_logged_text_say_why_provisional(expert, tmp_path):
    """`--format markdown` has a 'Why provisional' section; with `--log` the decision's own questions are shown."""
    result = CliRunner().invoke(main, ["recommend", "-", "--format", "markdown"], input=json.dumps(SEVENTY_B))
    assert "## Why provisional" in result.output and f"1. {_ranked_facts(expert, SEVENTY_B)[0]}: " in result.output
    logged = CliRunner().invoke(main, ["recommend", "-", "--log", str(tmp_path / "d.db")], input=json.dumps(SEVENTY_B))
    assert logged.exit_code == 0 and "Provisional because" in logged.output


def test_explain_report_ranks_the_missing_facts_of_a_logged_decision(expert, tmp_path):
    """Markdown and HTML of a logged provisional decision list its missing facts in the rank rank_questions gives."""
    with open_log(tmp_path / "x.db") as log:
        decision_id = log.record(SEVENTY_B, expert.recommend(SEVENTY_B), "cli")
        decision = log.get(decision_id)
    text = explain_markdown(expert, decision)
    ranked = _ranked_facts(expert, SEVENTY_B)
    section = text.split("## Why provisional", 1)[1].split("## ", 1)[0]
    listed = [line.split(". ", 1)[1].split(":", 1)[0] for line in section.splitlines() if line[:1].isdigit()]
    assert listed == ranked
    page = explain_html(expert, decision)
    assert '<section class="provisional">' in page and page.count("<li>concurrency: ") == 1


def test_explain_of_an_answer_finds_its_given_facts(expert):
    """From an answer alone, the facts given are its facts without the defaults it assumed."""
    answer = expert.recommend(SEVENTY_B).model_dump(mode="json")
    assert given_facts(answer) == SEVENTY_B
    assert "## Why provisional" not in explain_markdown(expert, expert.recommend(FINAL))


def test_explain_under_other_rules_says_why_the_missing_facts_are_not_listed(expert, tmp_path):
    """A provisional decision explained under another rule set says the facts are not listed, and why."""
    with open_log(tmp_path / "x.db") as log:
        decision = log.get(log.record(SEVENTY_B, expert.recommend(SEVENTY_B), "cli"))
    decision["answer"]["ruleset"]["digest"] = "0" * 64
    text = explain_markdown(expert, decision)
    assert "## Why provisional" in text and "the missing facts are not listed: the rules read now" in text
