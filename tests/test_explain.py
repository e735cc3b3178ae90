"""Explanations as Markdown and self-contained HTML (rendered in headless Chromium when it is installed)."""
from __future__ import annotations

import json
import re
import shutil

import pytest
from click.testing import CliRunner

from headless import CHROMIUM, SKIP_REASON, chromium, distinct_pixels
from kentino_expert.answer.explain import explain_html, explain_markdown
from kentino_expert.decisions.connect import open_log

FINETUNE = {"task": "full-finetune", "model": "llama-3.1-70b"}


def test_markdown_shows_answer_rules_heuristics_and_digest(expert):
    """The markdown has the kind, each fired rule with file:line, conditions with values, heuristic sentences,
    assumptions, why-not and digest."""
    answer = expert.recommend(FINETUNE)
    text = explain_markdown(expert, answer)
    assert text.startswith(f"# Recommendation: {answer.recommendation.kind}")
    assert answer.recommendation.summary in text
    for step in answer.trace:
        assert f"`{step.rule}` ({step.file}:{step.line})" in text
        for hid in step.heuristics:
            assert expert.knowledge.heuristics[hid]["text"] in text
    decider = next(s for s in answer.trace if s.concluded.get("recommended_kind"))
    rule = expert.ruleset.by_id[decider.rule]
    for condition in rule.source.when:
        assert f"`{condition.text}` | yes |" in text
    params = expert.ruleset.parameter_values
    used = [n for c in rule.source.when for n in re.findall(r"[a-z_][a-z0-9_]*", c.text) if n in params]
    for name in used:
        assert f"{name} = " in text
    for assumption in answer.assumptions:
        assert f"`{assumption.fact}`" in text
    assert "## Why not the other kinds" in text and " was not chosen: " in text
    assert answer.ruleset.digest in text and "same digest" in text


def test_markdown_of_a_logged_decision_and_of_facts(expert, tmp_path):
    """A decision from the log explains with its id and source; plain facts explain without a log."""
    with open_log(tmp_path / "x.db") as log:
        decision_id = log.record(FINETUNE, expert.recommend(FINETUNE), "mcp", session_id="s9", turn=2)
        text = explain_markdown(expert, log.get(decision_id))
    assert f"Decision `{decision_id}` via mcp" in text and "session `s9` turn 2" in text
    assert explain_markdown(expert, dict(FINETUNE)).startswith("# Recommendation: ")


def test_html_is_self_contained(expert):
    """The page has inline CSS and no scripts, external links or remote resources."""
    page = explain_html(expert, expert.recommend(FINETUNE))
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert "<script" not in page.lower() and "<link" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert 'id="kind"' in page


def test_html_escapes_what_it_shows(expert):
    """Text from the answer is HTML-escaped."""
    answer = expert.recommend(FINETUNE).model_dump(mode="json")
    answer["recommendation"]["summary"] = "<script>alert(1)</script>"
    page = explain_html(expert, answer)
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page


def test_cli_explain_formats(expert, tmp_path):
    """`explain ID` and `explain answer.json` print markdown or html; a missing file exits 2."""
    from kentino_expert.cli.main import main as standalone
    db = str(tmp_path / "cli.db")
    with open_log(db) as log:
        decision_id = log.record(FINETUNE, expert.recommend(FINETUNE), "cli")
    runner = CliRunner()
    by_id = runner.invoke(standalone, ["explain", decision_id, "--db", db])
    assert by_id.exit_code == 0 and by_id.output.startswith("# Recommendation: ")
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(expert.recommend(FINETUNE).model_dump(mode="json")))
    page = runner.invoke(standalone, ["explain", str(trace), "--format", "html"])
    assert page.exit_code == 0 and page.output.startswith("<!DOCTYPE html>")
    missing = runner.invoke(standalone, ["explain", str(tmp_path / "nope.json")])
    assert missing.exit_code == 2 and "no such file" in missing.output


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_html_renders_in_headless_chromium(expert, tmp_path):
    """Chromium renders the page to a non-trivial, many-coloured PNG, and its DOM holds the kind and the rule ids."""
    answer = expert.recommend(FINETUNE)
    page = tmp_path / "explain.html"
    page.write_text(explain_html(expert, answer), encoding="utf-8")
    shot = tmp_path / "explain.png"
    chromium([f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri()], tmp_path)
    assert shot.exists() and shot.stat().st_size > 20_000, "screenshot missing or tiny"
    width, height, pixels = distinct_pixels(shot)
    assert (width, height) == (1200, 2000)
    assert len(pixels) > 20, f"the screenshot has only {len(pixels)} colours"
    dom = chromium(["--dump-dom", page.as_uri()], tmp_path).stdout
    assert f'id="kind">{answer.recommendation.kind}<' in dom
    for step in answer.trace:
        assert f'data-rule="{step.rule}"' in dom


def test_other_rules_do_not_contradict_the_stored_trace(expert, tmp_path):
    """Explained under a changed rule set, a decision shows its stored trace without today's conditions or why-not."""
    from kentino_expert.expert import Expert
    from kentino_expert.paths import bundled
    rules = tmp_path / "rules"
    shutil.copytree(bundled("rules"), rules)
    params = rules / "parameters.yaml"
    params.write_text(params.read_text().replace("workload_fraction_max:\n    value: 0.9",
                                                 "workload_fraction_max:\n    value: 0.1"))
    other = Expert(rules)
    assert other.ruleset.digest != expert.ruleset.digest, "the edit must change the digest"
    with open_log(tmp_path / "x.db") as log:
        facts = {"task": "inference", "model": "llama-3.1-70b"}
        decision_id = log.record(facts, expert.recommend(facts), "cli")
        text = explain_markdown(other, log.get(decision_id))
    assert "| no |" not in text and " was not chosen: " not in text
    assert f"kentino-expert decisions replay {decision_id}" in text and "the current rule set differs" in text
    other.close()


def test_explained_under_rules_of_another_directory_it_names_the_deciding_ones(expert, tmp_path):
    """Explained with rules read from another directory, the report does not say the rule set changed since: it
    names the deciding rules' digest and directory, and `--rules DIR` to explain it whole."""
    from kentino_expert.expert import Expert
    from kentino_expert.paths import bundled
    rules = tmp_path / "rules"
    shutil.copytree(bundled("rules"), rules)
    (rules / "fit.yaml").write_text((rules / "fit.yaml").read_text() + "# a comment\n")
    other = Expert(rules)
    answer = expert.recommend({"task": "inference", "model": "llama-3.1-70b"})
    text = explain_markdown(other, {"decision_id": "d-1", "facts": {}, "answer": answer.model_dump(mode="json")})
    other.close()
    assert "changed since" not in text
    assert (f"are not the ones that decided ({answer.ruleset.digest[:16]}, in {answer.ruleset.directory})"
            in text and f"`--rules {answer.ruleset.directory}` explains it whole" in text)


def _malformed(answer: dict) -> dict:
    """Answer files that are wrong in one place each, with the words the error must hold."""
    def changed(edit):
        copy = json.loads(json.dumps(answer))
        edit(copy)
        return json.dumps(copy)
    return {
        "bad kind": (changed(lambda a: a["recommendation"].update(kind="bogus")),
                     "recommendation.kind: Input should be"),
        "facts a string": (json.dumps({"answer": {"recommendation": 5}, "facts": "x"}), "facts: must be an object"),
        "recommendation a number": (json.dumps({"answer": {**answer, "recommendation": 5}}),
                                    "answer.recommendation: Input should be a valid dictionary"),
        "alternatives a string": (changed(lambda a: a.update(alternatives="x")),
                                  "alternatives: Input should be a valid list"),
        "step missing": (changed(lambda a: a["trace"][0].pop("step")), "trace.0.step: Field required"),
        "trace of strings": (changed(lambda a: a.update(trace=["x"])), "trace.0: Input should be a valid dictionary"),
        "answer a number": (json.dumps({"answer": 5}), "answer: Input should be a valid dictionary"),
        "100,000 deep": ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "JSON nests too deeply"),
        "deep inside the answer": (changed(lambda a: a["facts"].update(x=json.loads("[" * 900 + "]" * 900))),
                                   "nests too deeply to explain"),
        "duplicate key": ('{"task": "inference", "task": "lora"}', "duplicate key 'task'"),
        "NaN": ('{"task": "inference", "params_b": NaN}', "NaN is not a number"),
        "a list": ("[1]", "expected a JSON object (an answer, a decision or facts), not a list"),
        "over 1 MB": ('{"a": "' + "x" * 1_000_000 + '"}', "input larger than 1 MB"),
    }


@pytest.mark.parametrize("case", ["bad kind", "facts a string", "recommendation a number", "alternatives a string",
                                  "step missing", "trace of strings", "answer a number", "100,000 deep",
                                  "deep inside the answer", "duplicate key", "NaN", "a list", "over 1 MB"])
def test_cli_explain_refuses_a_malformed_file_in_one_line(expert, tmp_path, case):
    """A malformed answer or decision file is `error: FILE: field: problem`, exit 2, and no -o file written."""
    from kentino_expert.cli.main import main as standalone
    text, words = _malformed(expert.recommend(FINETUNE).model_dump(mode="json"))[case]
    path, out = tmp_path / "answer.json", tmp_path / "out.md"
    path.write_text(text)
    result = CliRunner().invoke(standalone, ["explain", str(path), "-o", str(out)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), (result.output, result.exception)
    assert result.output.splitlines() == [result.output.strip()], result.output
    assert result.output.startswith(f"error: {path}: ") and words in result.output, result.output
    assert not out.exists()

def test_cli_explain_reads_a_decisions_show_file(expert, tmp_path):
    """What `decisions show` prints explains as the decision it is, with its id."""
    from kentino_expert.cli.main import main as standalone
    db = str(tmp_path / "cli.db")
    with open_log(db) as log:
        decision_id = log.record(FINETUNE, expert.recommend(FINETUNE), "cli", session_id="s1", turn=3)
    runner = CliRunner()
    shown = runner.invoke(standalone, ["decisions", "show", decision_id, "--db", db])
    path = tmp_path / "decision.json"
    path.write_text(shown.output)
    result = runner.invoke(standalone, ["explain", str(path)])
    assert result.exit_code == 0 and f"Decision `{decision_id}` via cli" in result.output, result.output
