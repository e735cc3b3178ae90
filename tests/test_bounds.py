"""What a rule set can make an answer cost is bounded (issue 30, item 3): `rules check` refuses the attack's rule
sets at the place that passes a bound (lang/limits.py), and rendering keeps every answer within them at run time."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kentino_expert.expert import Expert
from kentino_expert.lang import limits
from kentino_expert.lang.templates import render_layers
from kentino_expert.paths import bundled
from kentino_expert.rulecheck import check_directory
from kentino_expert.sandbox import Limits, check_in_sandbox
from kentino_expert.service.decide import decide

RULE = ("  - id: {id}\n    heuristics: [H-CLIFF-405B]\n    priority: {priority}\n    when: {when}\n    then:\n"
        "      {then}\n    because: {because}\n")


def rule(id="mine", when="params_b > 0", then="conclude: {mine: true}", because="Mine.", priority=590) -> str:
    return RULE.format(id=id, when=when, then=then, because=because, priority=priority)


@pytest.fixture
def rules(tmp_path) -> Path:
    return Path(shutil.copytree(bundled("rules"), tmp_path / "rules"))


def errors_of(rules: Path, name: str, text: str) -> list[str]:
    (rules / name).write_text(text, encoding="utf-8")
    return [str(d) for d in check_directory(rules).errors]


class TestTheAttack:
    """The attack run's rule sets passed `rules check` without a warning; each is refused where it is now."""

    def test_a_because_of_100000_fields(self, rules):
        """4 MB per answer: the template is refused at its line, before anything reads it."""
        because = '"' + "{params_b}" * 100_000 + '"'
        errors = errors_of(rules, "mine.yaml", "rules:\n" + rule(because=because))
        assert errors == ["rules/mine.yaml:8:14: E040: a text of 1,000,000 characters; a text of a rule file is at "
                          "most 20,000"]

    def test_a_template_of_25_fields(self, rules):
        """Fewer fields, still past the bound: E107 at the template."""
        errors = errors_of(rules, "mine.yaml", "rules:\n" + rule(because='"' + "{params_b} " * 25 + '"'))
        assert errors == ["rules/mine.yaml:8:14: E107: because: 25 fields; a template has at most 24 (each is "
                          "rendered in every answer the rule is in) [mine]"]

    @pytest.mark.parametrize("size, code", [(3_000_000, "E040"), (201, "E039")])
    def test_a_long_literal_in_a_conclusion(self, rules, size, code):
        """A 5 MB conclusion was in the trace of every answer (a file of 5 MB is refused as read now, past 4 MiB);
        past a fact's length a literal is refused at the value."""
        errors = errors_of(rules, "mine.yaml", "rules:\n" + rule(then="conclude: {mine: '" + "x" * size + "'}"))
        assert len(errors) == 1 and errors[0].startswith(f"rules/mine.yaml:7:24: {code}: ")

    def test_a_long_literal_in_a_condition_is_refused_at_its_column(self, rules):
        errors = errors_of(rules, "mine.yaml", "rules:\n" + rule(when='"model == \'' + "x" * 300 + '\'"'))
        assert errors == ["rules/mine.yaml:5:21: E039: a literal of 300 characters; a literal is at most 200 (as long "
                          "as a fact's text may be) [mine]"]

    @pytest.mark.parametrize("size, code", [(1_000_000, "E040"), (150, "E038")])
    def test_a_long_rule_id(self, rules, size, code):
        """A 1 MB rule id was in every trace and log row; an id is at most 100 characters."""
        errors = errors_of(rules, "mine.yaml", "rules:\n" + rule(id="a" * size))
        assert len(errors) == 1 and errors[0].startswith(f"rules/mine.yaml:2:9: {code}: "), errors
        assert len(errors[0]) < 300, "the message quotes no more than the start of the id"

    def test_long_names_and_codes(self, rules):
        """A conclusion's name (a key), a warning code and a heuristic id are ids too."""
        name, code = "n" * 101, "c" * 101
        errors = errors_of(rules, "mine.yaml", "rules:\n" + rule(then=f"warn: {{code: {code}, message: M.}}")
                           + rule(id="other", then=f"conclude: {{{name}: true}}"))
        assert [e.split(": ")[1] for e in errors] == ["E038"] and "rules/mine.yaml:14:18:" in errors[0]
        errors = errors_of(rules, "mine.yaml", "rules:\n" + rule(then=f"warn: {{code: {code}, message: M.}}"))
        assert errors and errors[0].startswith("rules/mine.yaml:7:20: E038: the warning code")

    def test_a_question_longer_than_a_sentence(self, rules):
        """facts.yaml's questions and reasons are sentences of a decision: E108 at the text."""
        path = rules / "facts.yaml"
        text = path.read_text(encoding="utf-8")
        old = "    ask: How many GPUs per node are you planning?\n"
        errors = errors_of(rules, "facts.yaml", text.replace(old, "    ask: " + "Really? " * 300 + "\n"))
        line = text[:text.index(old)].count("\n") + 1
        assert errors == [f"rules/facts.yaml:{line}:10: E108: ask: 2,399 characters; a sentence is at most 2,000"]


class TestRuleCount:
    """E207 for a 10,000-rule file pointed at a bundled rule's example (the sandbox timed out answering it): the
    count is bounded, and the error stands in the product manager's own file."""

    @staticmethod
    def many(count: int) -> str:
        return "rules:\n" + "".join(f"  - {{id: extra-{n}, heuristics: [H-CLIFF-405B], when: params_b >= {n}, then: "
                                    f"{{conclude: {{big_{n}: true}}}}, because: Big.}}\n" for n in range(count))

    def test_a_10000_rule_file_is_refused_in_that_file(self, rules):
        """`rules check` (the sandboxed trial included) says so in zz-generated.yaml, not in a bundled file, and
        no E207."""
        (rules / "zz-generated.yaml").write_text(self.many(10_000), encoding="utf-8")
        report = check_in_sandbox(rules, limits=Limits(seconds=60))
        assert [d.code for d in report.errors] == ["E209"], [str(d) for d in report.errors]
        bundled_rules = len(Expert().ruleset.rules)
        first_past = limits.MAX_RULES - bundled_rules + 1  # the bundled rules are counted first
        assert str(report.errors[0]).startswith(f"rules/zz-generated.yaml:{first_past + 1}:5: E209: the rule set "
                                                f"holds {10_000 + bundled_rules:,} rules, 10,000 of them in this file")

    def test_a_file_read_first_is_still_the_one_named(self, rules):
        """Read before the bundled files (its name sorts first), the file holding the most rules is named."""
        errors = errors_of(rules, "aa-mine.yaml", self.many(limits.MAX_RULES))
        assert len(errors) == 1 and errors[0].startswith("rules/aa-mine.yaml:") and ": E209: " in errors[0]


def _decision(rules: Path, facts: dict) -> dict:
    expert = Expert(rules)
    try:
        return decide(expert, None, facts, "test").model_dump(mode="json")
    finally:
        expert.close()


class TestAtRunTime:
    """A rule set `rules check` passes keeps its answers within the bounds, whatever the values rendered."""

    def test_fields_and_sentences_are_cut(self):
        long_text = "t" * 500
        assert render_layers("{x}", ({"x": long_text},)) == "t" * 199 + "\u2026"
        assert render_layers("{x:,.0f} and {x:.0%}", ({"x": 1.7e300},)) == "1.7e+300 and 1.7e+302%"
        assert render_layers("{x:,.0f}", ({"x": 1.7e308},)) == "1.7e+308"
        assert render_layers("{x}", ({"x": 10 ** 400},)) == "1" + "0" * 38 + "\u2026"
        sentence = render_layers("{x} " * 24, ({"x": long_text},))
        assert len(sentence) == limits.MAX_SENTENCE_CHARS and sentence.endswith("\u2026")

    def test_the_heaviest_rule_set_check_passes_answers_within_the_bound(self, rules, tmp_path):
        """Rules that all fire, each with a warning and a `because` of 12 fields of a 200-character conclusion
        (4,800 characters rendered, cut at 2,000): as many as `rules check` passes. Every answer of the set holds
        its sentences at the bound, and the decision grows by less than the answer's bound over the bundled rules'
        (what the facts, the figures and the alternatives add is the same under both)."""
        text = "'" + "{long_text} " * 12 + "'"
        first = rule("says-long", then="conclude: {long_text: '" + "y" * 200 + "'}", priority=150)

        def write(count: int) -> list[str]:
            body = "".join(rule(f"long-{n}", when="exists long_text", because=text,
                                then=f"warn: {{code: long-{n}, message: {text}}}") for n in range(count))
            (rules / "zz-long.yaml").write_text("rules:\n" + first + body, encoding="utf-8")
            return [d.code for d in check_directory(rules).errors]
        count = 40
        while count < 100 and write(count + 1) == []:
            count += 1
        assert write(count + 1) == ["E210"] and write(count) == [], "the most rules the bound lets through"
        facts = {"task": "inference", "model": "llama-3.1-70b", "concurrency": 48}
        answer, base = (_decision(directory, facts) for directory in (rules, bundled("rules")))
        sentences = [step["because"] for step in answer["trace"] if step["rule"].startswith("long-")]
        assert len(sentences) == count and all(len(s) == limits.MAX_SENTENCE_CHARS for s in sentences)
        assert len(json.dumps(answer)) - len(json.dumps(base)) < limits.MAX_ANSWER_CHARS
