"""The rule language keeps the README's promises on both backends, and `rules check` refuses what it cannot keep."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kentino_expert.engine.durable.engine import DurableEngine
from kentino_expert.engine.durable.terms import ShapeError, translate
from kentino_expert.engine.reference import ReferenceEngine
from kentino_expert.lang import nodes
from kentino_expert.lang.parser import parse

ROOT = Path(__file__).resolve().parent.parent


# --- a rule set of bare conditions, run on both backends --------------------------------------------

def _ruleset(conditions):
    """One rule per condition; each writes `fired_<i>` once (the compiler's guard, by hand)."""
    rules = []
    for index, node in enumerate(conditions):
        guard = nodes.Not(0, nodes.Exists(0, nodes.Name(0, f"fired_{index}")))
        rules.append(SimpleNamespace(id=f"r{index}", order=index + 1, conditions=(node, guard), location="test",
                                     reads=tuple(n.id for n in nodes.names_in(node)), writes=(f"fired_{index}",)))
    by_id = {rule.id: rule for rule in rules}
    return SimpleNamespace(rules=tuple(rules), rule=by_id.__getitem__)


def _apply(rule, state):
    return {f"fired_{rule.id[1:]}": True}


def both_backends(texts, states):
    """[(durable firings, reference firings)] for each state."""
    ruleset = _ruleset([parse(text) if isinstance(text, str) else text for text in texts])
    engine, reference = DurableEngine(ruleset), ReferenceEngine(ruleset)
    try:
        return [(sorted(engine.run(dict(s), _apply)[0]), sorted(reference.run(dict(s), _apply)[0])) for s in states]
    finally:
        engine.close()


class TestDurableAgreesWithTheReference:
    """Defect 1 and 2: division and unknown right-hand names mean the same on durable as in the reference."""

    def test_integer_zero_divisor_does_not_kill_the_process(self):
        """`g / (g - 8)` with g = 8 was an integer division by zero in the C core (SIGFPE, exit 136)."""
        code = ("from tests.test_rule_language import both_backends as b;"
                "print(b(['g > g / (g - 8)', 'not g > g / (g - 8)'], [{'g': 8}]))")
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[(['r1'], ['r1'])]"  # unknown: false, its negation true

    @pytest.mark.parametrize("texts,state", [
        (["c >= g / 3"], {"c": 2, "g": 8}),                          # 8 / 3 is 2.67, not 2
        (["c > g / z", "c < g / z", "c != g / z"], {"c": 2, "g": 8, "z": 0.0}),  # not +inf
        (["g > p"], {"g": 8}),                                       # an unknown right side is false
        (["c > q * 1", "c == q * 0", "c != q * 1"], {"c": 2}),
        (["not c > q * 1", "not c < g / z"], {"c": 2, "g": 1, "z": 0}),   # ...and its negation true
    ])
    def test_reviewed_cases(self, texts, state):
        """The reviewer's reproductions agree."""
        [(durable, reference)] = both_backends(texts, [state])
        assert durable == reference

    @settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def test_generated_conditions(self, data):
        """Generated arithmetic conditions (/ * + -, unknown names, zero divisors, ints and floats)."""
        conditions = data.draw(st.lists(_conditions, min_size=1, max_size=6))
        kept = [c for c in conditions if _translatable(c)]
        if not kept:
            return
        states = data.draw(st.lists(_states, min_size=1, max_size=4))
        for durable, reference in both_backends(kept, states):
            assert durable == reference


NAMES = ("a", "b", "c")
_numbers = st.one_of(st.integers(-3, 3), st.sampled_from([0.0, 0.5, -1.5, 2.5, 1e-3]))
_leaves = st.one_of(st.sampled_from(NAMES).map(lambda n: nodes.Name(0, n)), _numbers.map(lambda v: nodes.Literal(0, v)))
_values = st.recursive(_leaves, lambda inner: st.one_of(
    st.builds(lambda op, left, right: nodes.Arith(0, op, left, right), st.sampled_from("+-*/"), inner, inner),
    st.builds(lambda v: nodes.Neg(0, v), inner)), max_leaves=5)
_compares = st.builds(lambda name, op, right: nodes.Compare(0, op, nodes.Name(0, name), right),
                      st.sampled_from(NAMES), st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), _values)
_conditions = st.recursive(_compares, lambda inner: st.one_of(
    st.builds(lambda c: nodes.Not(0, c), inner),
    st.builds(lambda left, right: nodes.And(0, (left, right)), inner, inner),
    st.builds(lambda left, right: nodes.Or(0, (left, right)), inner, inner)), max_leaves=3)
_states = st.dictionaries(st.sampled_from(NAMES), _numbers)


def _translatable(condition) -> bool:
    try:
        translate(condition)
    except ShapeError:
        return False  # refused by `rules check` (E201): never reaches the engine
    return True


# --- `rules check` on a copy of the bundled rules with one more rule ---------------------------------

from kentino_expert.rulecheck import check_directory  # noqa: E402


def _rule(when='"qps > 1"', then='warn: {code: r1, message: "m"}', extra=""):
    # `when` stands on line 5 and its text starts at column 12 (after `    when: "`)
    return ("rules:\n  - id: r1\n    heuristics: [H-FIT-CAPACITY]\n    priority: 590\n"
            f"    when: {when}\n    then:\n      {then}\n    because: \"x\"\n{extra}")


@pytest.fixture
def check(tmp_path):
    """check(rule file text) -> the diagnostics of the bundled rules plus that file, as strings."""
    import shutil
    rules = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", rules)

    def run(text):
        (rules / "x.yaml").write_text(text)
        return [str(d) for d in check_directory(rules).diagnostics if d.severity == "error"]
    return run


def _only(diagnostics, code, *words):
    assert len(diagnostics) == 1, diagnostics
    assert f": {code}: " in diagnostics[0], diagnostics
    for word in words:
        assert word in diagnostics[0], diagnostics
    return diagnostics[0]


class TestDivisorsAndConstants:
    """Defects 1, 12, 13: what the engine cannot run safely is E201 at the culprit's column."""

    def test_guardable_divisors_pass(self, check):
        """A divisor the translation can guard against zero is accepted."""
        assert check(_rule('"gpus_per_node > gpus_per_node / (gpus_per_node - 8)"')) == []

    def test_unguardable_divisor_is_e201_at_its_column(self, check):
        """A divisor of no guardable shape is refused where it stands, not at the rule's id."""
        text = '"gpus_per_node > gpus_per_node / (gpus_per_node * 2 - 8 * gpus_per_node)"'
        column = 12 + text.strip('"').index("- 8")  # the `-` of the divisor that cannot be guarded
        _only(check(_rule(text)), "E201", f"x.yaml:5:{column}:", "guard this divisor")

    def test_left_arithmetic_is_e201_at_the_comparison(self, check):
        """The E201 column is the comparison's, inside the condition."""
        _only(check(_rule('"qps + 1 > 3"')), "E201", "x.yaml:5:20:")

    @pytest.mark.parametrize("when", ['"qps > hyperscale_qps * 1e300 * 1e300"', '"qps > 1' + "0" * 400 + '"',
                                      '"qps > hyperscale_qps * 1e304"'])
    def test_overflowing_constants_are_refused(self, check, when):
        """A folded constant beyond a double is E201, not an OverflowError in the encoder."""
        _only(check(_rule(when)), "E201", "x.yaml:5:", "finite number")

    def test_hundreds_of_factors_are_too_deep(self, check):
        """The reviewer's `hyperscale_qps * ...` with hundreds of factors: refused before folding (with a short
        name: 300 of the long one make a text past the bound of a rule file's text, E039)."""
        _only(check(_rule('"qps > ' + " * ".join(["qps"] * 300) + '"')), "E101", "nests deeper")

    def test_huge_recommend_constant_is_refused(self, check):
        """recommend.nodes folded to infinity would crash every answer's int()."""
        then = "recommend: {kind: single-node, nodes: hyperscale_qps * 1e300 * 1e300}"
        assert any(": E028: recommend.nodes" in d for d in check(_rule('"true"', then)))


    @pytest.mark.parametrize("then,code", [("recommend: {kind: single-node, nodes: .inf}", "E027"),
                                           ("recommend: {kind: single-node, nodes: .nan}", "E027"),
                                           ("conclude: {my_flag: .inf}", "E021")])
    def test_non_finite_literal_is_refused(self, check, then, code):
        """A YAML .inf/.nan written as a literal (not an expression) once passed and broke every answer."""
        assert any(f": {code}: " in d and "finite" in d for d in check(_rule('"true"', then)))


    @pytest.mark.parametrize("field,value,allowed", [
        ("nodes", "-1", "from 1 to 1e24"), ("nodes", "0", "from 1 to 1e24"), ("nodes", "1e300", "from 1 to 1e24"),
        ("nodes", "1.5", "from 1 to 1e24"), ("replicas", "0", "from 1 to 1e24"), ("tp", "2.5", "from 1 to 1e24"),
        ("pp", "-3", "from 1 to 1e24"), ("dp", "1e25", "from 1 to 1e24"), ("gpus_per_node", "32", "from 1 to 16")])
    def test_a_constant_count_outside_its_range_is_refused_at_the_value(self, check, field, value, allowed):
        """`nodes: -1` printed a plan of -1 nodes, 1e300 a 301-digit count, 1.5 was truncated to 1 (audit D10)."""
        then = f"recommend: {{kind: single-node, {field}: {value}}}"
        column = 6 + then.index(f"{field}: ") + len(field) + 3  # then stands on line 7 after 6 spaces
        _only(check(_rule('"true"', then)), "E027", f"x.yaml:7:{column}: E027: recommend.{field} must be a whole "
              f"number {allowed}, not {value}")

    def test_a_count_expression_that_folds_to_a_bad_constant_is_refused(self, check):
        """Parameters folded in can make a count expression a constant too: `min_multi_nodes - 5` is -3 nodes."""
        then = 'recommend: {kind: single-node, nodes: "min_multi_nodes - 5"}'
        _only(check(_rule('"true"', then)), "E027", "recommend.nodes must be a whole number from 1 to 1e24, not -3")

    def test_whole_constant_counts_pass(self, check):
        """A whole count in range is fine, also written as 2.0."""
        assert check(_rule('"true"', "recommend: {kind: single-node, nodes: 2.0, tp: 8, pp: 1, dp: 1, "
                                     "replicas: 1, gpus_per_node: 16}")) == []

    @pytest.mark.parametrize("when,divisor", [('"params_b > params_b / 0"', "/ 0"),
                                              ('"not params_b > concurrency / 0.0"', "/ 0"),
                                              ('"params_b > params_b / (1 - 1)"', "/ ("),
                                              ('"params_b > params_b / (min_multi_nodes - 2)"', "/ (")])
    def test_a_constant_zero_divisor_is_refused_at_the_slash(self, check, when, divisor):
        """x / 0 is unknown by design, so a rule dividing by a constant 0 can never fire (or always does,
        negated): `rules check` accepted it and recommend's answer flipped (audit D9)."""
        column = 12 + when.strip('"').index(divisor)
        _only(check(_rule(when)), "E208", f"x.yaml:5:{column}: E208: the condition: divides by 0")

    def test_a_recommend_field_divided_by_zero_is_refused_at_the_slash(self, check):
        """`dp: gpus_per_node / 0` dropped dp from every plan silently."""
        then = 'recommend: {kind: single-node, dp: "gpus_per_node / 0"}'
        _only(check(_rule('"true"', then)), "E208", f"x.yaml:7:{6 + then.index('/ 0') + 1}: E208: recommend.dp: "
              "divides by 0")

    def test_a_works_condition_divided_by_zero_is_refused(self, tmp_path):
        """selection.yaml's `works` conditions are checked the same way."""
        import shutil
        rules = Path(shutil.copytree(ROOT / "rules", tmp_path / "rules"))
        text = (rules / "selection.yaml").read_text()
        old = 'when: "not time_to_result_days > deadline_days"'
        assert old in text
        (rules / "selection.yaml").write_text(text.replace(old, old[:-1] + ' / 0"'))
        line = text[:text.index(old)].count("\n") + 1
        column = text.index(old) - text.rfind("\n", 0, text.index(old)) + len(old)  # the `/` after the name
        errors = [str(d) for d in check_directory(rules).errors]
        _only(errors, "E208", f"rules/selection.yaml:{line}:{column}: E208: the condition: divides by 0")


class TestParsing:
    """Defects 6 and 13: malformed or hostile conditions are E101 at the column, never a traceback."""

    def test_bad_escape_is_e101_at_the_column(self, check):
        """`'a\\x'` once died with UnicodeDecodeError in the unicode_escape codec."""
        _only(check(_rule("\"model == 'a\\\\x'\"")), "E101", "x.yaml:5:23:", "bad escape")

    @pytest.mark.parametrize("when, column", [("qps >> 1", 11), ('"qps >> 1"', 12), ("'qps >> 1'", 12),
                                              ("[qps >> 1]", 12), ('["qps >> 1"]', 13)])
    def test_quoted_or_plain_the_column_is_the_characters(self, check, when, column):
        """The same mistake is reported at its own character whether the condition is plain, quoted or a list
        item (the reader records which scalars were quoted: no file is read again to find out)."""
        _only(check(_rule(when)), "E101", f"x.yaml:5:{column + 5}:")  # the second `>`, 5 characters in

    @pytest.mark.parametrize("number", ["\u09e8\u09e6", "\uff12\uff10", "1\u0663", "\u0661.5"])
    def test_a_number_is_written_with_ascii_digits(self, check, number):
        """Bengali, Arabic-Indic or fullwidth digits are no number (Python's `\\d` and float() read '২০' as 20): the
        condition is E101 at the first such digit, in words."""
        column = 12 + next(index for index, char in enumerate(number) if not "0" <= char <= "9" and char != ".")
        _only(check(_rule(f'"qps > {number}"')), "E101", f"x.yaml:5:{column + 6}:", "is not a digit 0-9")

    @pytest.mark.parametrize("spec", ["\u09e8\u09e6", ">\uff15", ".\u0663f"])
    def test_a_template_width_is_written_with_ascii_digits(self, check, spec):
        """A width or precision in other digits is no format spec (format() reads them, past the width check)."""
        _only(check(_rule().replace('because: "x"', f'because: "{{qps:{spec}}}"')), "E106", "is not a format spec")

    def test_escapes(self):
        """The documented escapes work, and UTF-8 text next to an escape is not read as Latin-1."""
        assert parse(r"model == 'a\'b\\c\u0161 č'").right.value == "a'b\\cš č"

    @pytest.mark.parametrize("when", ['"' + "(" * 200 + "qps > 1" + ")" * 200 + '"', '"' + "not " * 300 + 'fits_fp8"',
                                      '"qps > ' + " + ".join(["1"] * 300) + '"',
                                      '"qps > ' + "max(" * 200 + "1" + ")" * 200 + '"'])
    def test_deep_nesting_is_e101_with_a_location(self, check, when):
        """Deep nesting is reported at file:line:col as E101 (was `<dir>: E003`, now E207, from a RecursionError)."""
        _only(check(_rule(when)), "E101", "x.yaml:5:", "nests deeper")

    def test_long_in_list_is_refused_with_the_limit(self, check):
        """Defect 8: ~500 literals made each evaluation hang; the cap is stated as an engine-safety limit."""
        items = ", ".join(str(i) for i in range(500))
        _only(check(_rule(f'"concurrency in [{items}]"')), "E201", "x.yaml:5:24:", "at most 64", "engine-safety")


    def test_a_long_list_of_wrong_items_is_a_few_lines(self, check):
        """2,000 items of the wrong type give ten E103 lines and one for the rest, not 2,000 lines (10,000 of them
        are a condition past the bound of any text of a rule file, E040)."""
        items = ", ".join(f"'x{i}'" for i in range(2_000))
        found = [d for d in check(_rule(f'"concurrency in [{items}]"')) if "E103" in d]
        assert len(found) == 11 and sum("(1990 not checked)" in line for line in found) == 1


class TestNamesAndTypes:
    """Defects 3, 4 and the catalog: values that would break or silently skip answers."""

    @pytest.mark.parametrize("then", ["recommend: {kind: single-node, nodes: \"'many'\"}",
                                      "recommend: {kind: single-node, tp: gpu}",
                                      "recommend: {kind: single-node, replicas: fits_fp8}"])
    def test_text_in_a_numeric_field_is_e103(self, check, then):
        """A text in nodes/tp/... crashed recommend (ValueError in int())."""
        _only(check(_rule('"true"', then)), "E103", "must be a number")

    def test_text_in_a_text_field_passes(self, check):
        assert check(_rule('"true"', "recommend: {kind: single-node, interconnect: \"'none'\", gpu: gpu}")) == []

    @pytest.mark.parametrize("name,kind", [("recommended_replicas: 3", "recommendation field"),
                                           ("hyperscale_qps: 5", "parameter"),
                                           ("warn__operations_tax: true", "warning key"),
                                           ("qps: 3", "a fact"), ("node_vram_gb: 3", "a figure")])
    def test_reserved_conclusions_are_refused(self, check, name, kind):
        """A conclusion may not take the name of a fact, figure, parameter, recommendation or warning."""
        _only(check(_rule('"true"', f"conclude: {{{name}}}")), "E023", "x.yaml:7:18:", kind)

    @pytest.mark.parametrize("when,suggestion", [
        ("\"gpu == 'l44'\"", "l4"), ("\"model in ['llama-3.1-8', 'qwen2.5-72b']\"", None),
        ("\"proposed_gpu != 'h100'\"", "h100-sxm"), ("\"interconnect == 'hdr-200-ib'\"", None)])
    def test_catalog_literals_are_checked(self, check, when, suggestion):
        """A misspelt catalog id never matches (the state holds catalog ids)."""
        found = _only(check(_rule(when)), "E103", "of the knowledge catalog")
        assert suggestion is None or f"did you mean '{suggestion}'" in found

    @pytest.mark.parametrize("then,when,says", [
        ("conclude: {my_flag: 'yes'}", "my_flag", "(its rules conclude it as text ('yes'))"),
        ("conclude: {my_flag: true}", "node_vram_gb", "(the figure is a number)")])
    def test_a_name_used_as_a_condition_says_what_it_is(self, check, then, when, says):
        """A non-true/false name used as a condition says what it is, so a conclusion written as 'yes' can be
        found from the rules that read it."""
        found = check(_rule(f'"{when}"', then))
        assert any(f"'{when}' is not true/false {says}; compare it with a value" in d for d in found), found

    def test_catalog_ids_pass(self, check):
        assert check(_rule("\"gpu in ['l4', 'h100-sxm'] and model == 'llama-3.1-8b'\"")) == []


class TestRuleKeys:
    """Defects 5, 7, 10."""

    @pytest.mark.parametrize("priority", [".nan", ".inf", "-.inf", "1" + "0" * 400, "2000000"])
    def test_priority_must_be_finite_and_sane(self, check, priority):
        """NaN sorts nowhere; a 400-digit integer crashed `rules list` with OverflowError."""
        _only(check(_rule().replace("priority: 590", f"priority: {priority}")), "E012", "x.yaml:4:15:", "priority")

    @pytest.mark.parametrize("example,column,words", [("{task: lorra}", 21, "task"),
                                                      ("{task: lora, gpus: 3}", 33, "gpus: unknown fact"),
                                                      ("{task: lora, gpu: l44}", 32, "did you mean 'l4'")])
    def test_invalid_example_is_refused(self, check, example, column, words):
        """An example must be a valid workload: `rules docs` and `rules examples` run it."""
        _only(check(_rule(extra=f"    example: {example}\n")), "E018", f"x.yaml:9:{column}:", "example", words)

    def test_docs_survive_an_invalid_example(self):
        """A rule page with an invalid example says so instead of raising."""
        from kentino_expert.authoring import rule_pages as docs
        from kentino_expert.errors import InputError

        class Refusing:
            def recommend(self, facts):
                raise InputError("unknown fact", field="gpus")
        rule = SimpleNamespace(source=SimpleNamespace(example={"task": "lora", "gpus": 3}))
        assert "not a valid workload" in "\n".join(docs._example(rule, Refusing()))

    def test_a_warning_code_given_twice_is_an_error_naming_both(self, check):
        """The second rule giving a code could never fire (each code is given at most once)."""
        found = _only(check(_rule(then='warn: {code: operations-tax, message: "m"}')), "E105", "x.yaml:7:20:")
        assert "advice.yaml:" in found and "operations-tax" in found


class TestTemplates:
    """Defects 11 and 13: format specs are checked, at the template's own location."""

    @pytest.mark.parametrize("field,words", [("{qps:zz}", "not a format spec"), ("{gpu:.0f}", "does not format a text"),
                                             ("{qps:>99999999}", "at most 40"), ("{qps:.500f}", "at most 40"),
                                             ("{qps!r}", "conversion (!r)")])
    def test_bad_specs_are_e106(self, check, field, words):
        """Each was accepted, and `{qps:>99999999}` wrote a 100 MB answer."""
        _only(check(_rule().replace('because: "x"', f'because: "{field}"')), "E106", "x.yaml:8:14:", words)

    def test_good_specs_pass(self, check):
        text = "{qps:,.0f} {node_vram_gb:.0%} {params_b:g} {task:>10} {fits_fp8} {gpus_per_node:d}"
        assert check(_rule().replace('because: "x"', f'because: "{text}"')) == []

    def test_warn_message_is_located_at_message(self, check):
        """E106 in warn.message points at `message:`, not at `warn:`."""
        then = 'warn:\n        code: r1\n        message: "{qqps}"'
        _only(check(_rule(then=then)), "E106", "x.yaml:9:18:", "warn.message")


class TestScenarioFiles:
    """Defect 9: expectations that name what does not exist are input errors, with a suggestion."""

    def _file(self, tmp_path, expect):
        path = tmp_path / "s.yaml"
        path.write_text("- name: x\n  facts: {task: lora, model: llama-3.1-8b}\n  expect:\n" + expect)
        return path

    def test_unknown_kind_is_an_input_error(self, tmp_path):
        from kentino_expert.authoring.scenarios import load_scenarios
        from kentino_expert.errors import InputError
        with pytest.raises(InputError, match="singel-node.*did you mean 'single-node'") as info:
            load_scenarios([self._file(tmp_path, "    kind: singel-node\n")])
        assert info.value.location.line == 4

    @pytest.mark.parametrize("expect,words", [
        ("    not_rules: [lora-fits-one-nod]\n", "did you mean 'lora-fits-one-node'"),
        ("    rules: [no-such-rule]\n", "'no-such-rule' is not a rule"),
        ("    warnings: [pcie-sxm-penalt]\n", "did you mean 'pcie-sxm-penalty'"),
        ("    not_warnings: [nope]\n", "not a warning code"),
        ("    heuristics: [H-FIT-CAPACTY]\n", "did you mean 'H-FIT-CAPACITY'")])
    def test_unknown_ids_are_refused(self, tmp_path, expect, words):
        """A misspelt not_rules entry used to pass forever."""
        from kentino_expert.authoring.scenarios import load_scenarios, run_all
        from kentino_expert.errors import InputError
        from kentino_expert.expert import Expert
        expert = Expert()
        path = self._file(tmp_path, expect)
        with pytest.raises(InputError, match=words) as info:
            load_scenarios([path], expert.ruleset)
        assert info.value.location.line == 4
        [outcome], _ = run_all(expert, load_scenarios([path]))
        assert not outcome.passed and words in outcome.error and "s.yaml:4:" in outcome.error
