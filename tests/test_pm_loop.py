"""The product manager's loop: check, scenario tests with coverage, diff, rule pages, schemas, YAML-only policy."""
from __future__ import annotations

import difflib
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kentino_expert.authoring.rule_pages import write_docs
from kentino_expert.cli.main import main
from kentino_expert.domain.quote import QUOTE_FIGURES
from kentino_expert.expert import Expert
from kentino_expert.rulecheck import check_directory
from kentino_expert.ruleset.schemas import facts_schema, rules_schema
from kentino_expert.yamlsrc import load_yaml, to_plain

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules"
SCENARIOS = ROOT / "tests" / "scenarios"
CARDS_REVERSED = ("cards: [rtx-pro-6000, l40, rtx-5090, l4]", "cards: [l4, rtx-5090, l40, rtx-pro-6000]")


@pytest.fixture
def rules_copy(tmp_path) -> Path:
    target = tmp_path / "rules"
    shutil.copytree(RULES, target)
    return target


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _changed_rows(rules_copy: Path, file: str, old: str, new: str, *scenarios) -> list[dict]:
    """The JSON rows of `rules diff` from the bundled rules to `rules_copy` with `old` of `file` made `new`
    (the diff exits 1: something changed)."""
    _edit(rules_copy / file, old, new)
    result = cli("rules", "diff", "--base", RULES, "--rules", rules_copy, *scenarios, "--format", "json")
    assert result.exit_code == 1, result.output
    return json.loads(result.output)["changed"]


def _rows_by_card_preference(rules_copy: Path, file: str, old: str, new: str) -> list[dict]:
    """As _changed_rows, with `cheapest` taken out of selection.yaml's order on both sides: the card preference
    decides among the builds that work, as it did before the price list."""
    base = rules_copy.parent / "base-rules"
    shutil.copytree(rules_copy, base)
    for side in (base, rules_copy):
        _edit(side / "selection.yaml", "task-precision, cheapest, flow-precision", "task-precision, flow-precision")
    _edit(rules_copy / file, old, new)
    result = cli("rules", "diff", "--base", base, "--rules", rules_copy, "--format", "json")
    assert result.exit_code == 1, result.output
    return json.loads(result.output)["changed"]


def _edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, count))


class TestRulesCheck:
    """`rules check` reports every problem at once, located to the column."""

    def test_bundled_rules_are_clean(self):
        """The shipped rule set has no errors and no warnings."""
        report = check_directory()
        assert report.diagnostics == ()

    def test_a_bad_parameter_value_is_one_diagnostic(self, rules_copy):
        """A non-numeric parameter value is reported once, at its line, not again at every rule using it."""
        params = rules_copy / "parameters.yaml"
        text = params.read_text()
        start = text.index("value: ", text.index("workload_fraction_max:"))
        params.write_text(text[:start] + "value: 0.8O" + text[text.index("\n", start):])
        result = cli("rules", "check", "--rules", rules_copy)
        assert result.exit_code == 2
        lines = [line for line in result.output.splitlines() if ": E" in line]
        assert len(lines) == 1 and "parameters.yaml" in lines[0] and "E031" in lines[0], result.output

    def test_a_parameter_the_sizing_reads_cannot_be_deleted(self, rules_copy):
        """Deleting min_multi_nodes is a clean error naming it (the sizing reads it), never a traceback."""
        params = rules_copy / "parameters.yaml"
        text = params.read_text()
        start = text.index("  min_multi_nodes:")
        params.write_text(text[:start] + text[text.index("  frontier_min_gpus:", start):])
        result = cli("rules", "check", "--rules", rules_copy)
        assert result.exit_code == 2 and "Traceback" not in result.output
        lines = [line for line in result.output.splitlines() if ": E" in line]
        assert lines == [f"{rules_copy}/parameters.yaml:5:3: E032: parameter 'min_multi_nodes' is missing: "
                         "the sizing uses it (kentino_expert/domain/figure_specs.py, SIZING_PARAMETERS)"], result.output

    def test_missing_sizing_parameters_in_an_empty_list_stand_at_the_file_start(self, rules_copy):
        """With `parameters: {}` each missing sizing parameter is an E032 at 1:1, never a line-less diagnostic."""
        (rules_copy / "parameters.yaml").write_text("parameters: {}\n")
        result = cli("rules", "check", "--rules", rules_copy)
        lines = [line for line in result.output.splitlines() if ": E032: " in line]
        start = f"{rules_copy}/parameters.yaml:1:1: E032: "
        assert lines and all(line.startswith(start) for line in lines), result.output

    @pytest.mark.parametrize("name", ["extra.yml", "EXTRA.YAML", "more/extra.yaml"])
    def test_a_rule_file_that_is_not_read_is_a_warning(self, rules_copy, name):
        """A rule file saved as .yml, .YAML or in a subdirectory is not read, and `rules check` says so (W308)."""
        target = rules_copy / name
        target.parent.mkdir(exist_ok=True)
        target.write_text("rules:\n  - id: x\n    heuristics: [H-NOPE]\n    when: nope\n    because: b.\n")
        result = cli("rules", "check", "--rules", rules_copy)
        assert f"rules/{name}:1:1: W308: '{Path(name).name if '/' not in name else name}' is not read" \
            in result.output, result.output

    def test_hidden_files_are_not_rules(self, rules_copy):
        """An editor's lock file (Emacs' dangling `.#advice.yaml` link) or any hidden .yaml is not read, as
        `rules publish` does not store it: checking and publishing see the same rule set."""
        from kentino_expert.decisions.published import read_files
        (rules_copy / ".#advice.yaml").symlink_to("you@host.1234:1700000000")
        (rules_copy / ".extra.yaml").write_text("rules:\n  - id: x\n    heuristics: [H-NOPE]\n    when: nope\n"
                                                "    because: b.\n")
        result = cli("rules", "check", "--rules", rules_copy)
        assert result.exit_code == 0 and "0 error(s), 0 warning(s)" in result.output, result.output
        assert not any(name.startswith("rules/.") for name in read_files(rules_copy, ROOT / "knowledge"))

    def test_a_rule_set_without_the_optional_full_node_parameter_still_loads(self, rules_copy):
        """An older rule set without full_node_gpus (and its rule) loads and answers; it just lacks the full-node
        figures."""
        params = rules_copy / "parameters.yaml"
        text = params.read_text()
        start = text.index("  full_node_gpus:")
        params.write_text(text[:start] + text[text.index("  min_multi_nodes:", start):])
        advice = rules_copy / "advice.yaml"
        text = advice.read_text()
        start = text.index("  - id: part-filled-nodes-where-one-full-node-does")
        advice.write_text(text[:start] + text[text.index("  - id: pcie-penalty-for-fine-tuning", start):])
        answer = Expert(rules_copy).recommend({"task": "full-finetune", "params_b": 13, "gpus_per_node": 2})
        assert answer.recommendation.kind == "multi-node-ib" and "full_node_vram_gb" not in answer.figures

    def test_every_problem_is_reported(self, rules_copy):
        """Five different mistakes in two files give five located diagnostics, not just the first."""
        _edit(rules_copy / "fit.yaml", "weights_fraction_fp8 <= weights_fraction_max",
              "weights_fractoin_fp8 <= weights_fraction_max")
        _edit(rules_copy / "fit.yaml", "heuristics: [H-CLIFF-405B]", "heuristics: [H-CLIF-405B]")
        _edit(rules_copy / "fit.yaml", "    when: gpu_nvlink == false", "    wen: gpu_nvlink == false")
        _edit(rules_copy / "advice.yaml", "- id: tight-headroom", "- id: operations-tax")
        _edit(rules_copy / "flow.yaml", "task == 'qlora'", "task == 'qlor'")
        result = cli("rules", "check", "--rules", rules_copy)
        assert result.exit_code == 2
        out = result.output
        rows = (rules_copy / "fit.yaml").read_text().splitlines()
        line = next(i for i, row in enumerate(rows, 1) if "weights_fractoin_fp8" in row)
        assert re.search(rf"fit\.yaml:{line}:9: E102: unknown name 'weights_fractoin_fp8' "
                         r"\(did you mean 'weights_fraction_fp8'\?\)", out)
        assert "E104: unknown heuristic 'H-CLIF-405B' (did you mean 'H-CLIFF-405B'?)" in out
        assert "E002: unknown key 'wen' in a rule (did you mean 'when'?)" in out
        assert "E105: rule id 'operations-tax' is already used" in out
        assert "E103: 'qlor' is not one of" in out and "(did you mean 'qlora'?)" in out

    def test_misspelt_precision_is_located_with_a_suggestion(self, rules_copy):
        """A recommend.precision outside bf16/fp8/int4 is an error at its column, with the closest precision."""
        _edit(rules_copy / "flow.yaml",
              "recommend: {kind: single-node, precision: fp8, nodes: 1, tp: tp_fp8, dp: gpus_per_node / tp_fp8}\n"
              "    because: \"{params_b:g}B fits one",
              "recommend: {kind: single-node, precision: fp9, nodes: 1, tp: tp_fp8, dp: gpus_per_node / tp_fp8}\n"
              "    because: \"{params_b:g}B fits one")
        result = cli("rules", "check", "--rules", rules_copy)
        assert result.exit_code == 2
        rows = (rules_copy / "flow.yaml").read_text().splitlines()
        line = next(i for i, row in enumerate(rows, 1) if "precision: fp9" in row)
        column = rows[line - 1].index("fp9") + 1
        assert (f"flow.yaml:{line}:{column}: E026: unknown precision 'fp9' (did you mean 'fp8'?) "
                "[inference-fits-one-node]") in result.output

    def test_answered_by_names_a_fact(self, rules_copy):
        """A fact policy's answered_by that names no fact of facts.yaml is a located E102 with a suggestion."""
        _edit(rules_copy / "facts.yaml", "answered_by: [qps]", "answered_by: [qsp]")
        report = check_directory(rules_copy)
        [found] = [d for d in report.errors if d.code == "E102"]
        assert found.location.file == "rules/facts.yaml" and found.location.line > 0
        assert "'qsp'" in found.message and found.suggestion == "qps"

    def test_an_emptied_rule_file_is_named(self, rules_copy):
        """A rule file cut to nothing is W307 at its own first line (its loss showed only as errors elsewhere)."""
        (rules_copy / "fit.yaml").write_text("# moved\n")
        report = check_directory(rules_copy)
        [found] = [d for d in report.diagnostics if d.code == "W307"]
        assert (found.location.file, found.location.line, found.severity) == ("rules/fit.yaml", 1, "warning")

    def test_a_misspelt_task_is_located_with_a_suggestion(self, rules_copy):
        """A `tasks` entry that is no task is E037 at it (the fact would never be asked for that task)."""
        _edit(rules_copy / "facts.yaml", "    tasks: [inference, batch-inference]\n",
              "    tasks: [inference, batch-inferense]\n")
        [found] = [d for d in check_directory(rules_copy).errors if d.code == "E037"]
        assert found.location.file == "rules/facts.yaml" and found.suggestion == "batch-inference"

    def test_a_default_the_fact_cannot_take_is_refused(self, rules_copy):
        """A default of 0 GPUs per node, which a caller could not give, is E037 at the default."""
        _edit(rules_copy / "facts.yaml", "      - value: 8\n        why: The document's decision flow",
              "      - value: 0\n        why: The document's decision flow")
        [found] = [d for d in check_directory(rules_copy).errors if d.code == "E037"]
        assert "default of 'gpus_per_node': 0 is not a value the fact can take" in found.message
        assert found.location.line == 33

    def test_contradiction_unused_parameter_and_shadowing_are_warnings(self, rules_copy):
        """Dead rules, unused parameters and shadowed rules warn; --strict turns them into a failure."""
        _edit(rules_copy / "fit.yaml", "    when: gpu_nvlink == false",
              "    when: [gpu_nvlink == false, params_b > 5, params_b < 3]")
        with (rules_copy / "parameters.yaml").open("a") as handle:
            handle.write("  forgotten_threshold:\n    value: 3\n")
        _edit(rules_copy / "flow.yaml", "      - task == 'batch-inference'\n      - fits_fp8\n",
              "      - task == 'batch-inference'\n      - fits_fp8\n      - tenancy == 'multi'\n")
        (rules_copy / "flow.yaml").write_text((rules_copy / "flow.yaml").read_text().replace(
            "  - id: batch-runs-on-one-node", "  - id: batch-runs-on-one-node-shadowed"))
        (rules_copy / "zz-shadow.yaml").write_text(
            "rules:\n  - id: generic-batch\n    heuristics: [H-NS-BATCH]\n    priority: 1\n"
            "    when: task == 'batch-inference'\n    then:\n      recommend: {kind: single-node, nodes: 1}\n"
            "    because: x\n")
        report = check_directory(rules_copy)
        codes = {d.code for d in report.diagnostics}
        assert {"W301", "W303", "W302"} <= codes
        assert not report.errors
        assert cli("rules", "check", "--rules", rules_copy).exit_code == 0
        assert cli("rules", "check", "--rules", rules_copy, "--strict").exit_code == 2

    def test_unencoded_heuristic_warns(self, rules_copy):
        """Deleting the only rule citing a heuristic reports that heuristic as not encoded."""
        data = yaml.safe_load((rules_copy / "advice.yaml").read_text())
        data["rules"] = [r for r in data["rules"] if "H-CLIFF-LATENCY" not in r["heuristics"]]
        (rules_copy / "advice.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        report = check_directory(rules_copy)
        assert any(d.code == "W304" and "H-CLIFF-LATENCY" in d.message for d in report.diagnostics)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def test_corruptions_never_crash(self, tmp_path_factory, data):
        """Deleted lines, swapped values, wrong types and random keys give diagnostics, never a traceback."""
        target = tmp_path_factory.mktemp("corrupt") / "rules"
        shutil.copytree(RULES, target)
        path = target / data.draw(st.sampled_from(sorted(p.name for p in RULES.glob("*.yaml"))))
        lines = path.read_text().splitlines()
        kind = data.draw(st.sampled_from(["delete", "swap", "type", "key", "garbage"]))
        index = data.draw(st.integers(0, len(lines) - 1))
        guaranteed = False
        if kind == "delete":
            del lines[index]
        elif kind == "swap":
            other = data.draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
        elif kind == "type":
            row = lines[index]
            if ": " in row and not row.strip().startswith("#"):
                lines[index] = row.split(": ", 1)[0] + ": [1, [2, {x: 3}]]"
        elif kind == "key":
            lines.insert(2, "zz_" + data.draw(st.text("abcdefgh", min_size=1, max_size=8)) + ": 1")
            guaranteed = True
        else:
            lines.insert(index, data.draw(st.text(min_size=1, max_size=30)))
        path.write_text("\n".join(lines) + "\n")
        report = check_directory(target)  # must not raise
        if guaranteed:
            assert report.errors


class TestScenarioRunner:
    """`kentino-expert test` runs scenario files like `opa test`."""

    def test_project_suite_passes_with_full_coverage(self):
        """Every project scenario passes and every rule fires at least once."""
        result = cli("test", SCENARIOS, "--min-coverage", "100")
        assert result.exit_code == 0, result.output
        assert "rule coverage: 100.0%" in result.output
        assert re.search(r"^\d+ passed, 0 failed$", result.output, re.M)

    def test_failure_names_expected_actual_and_decider(self, tmp_path):
        """A failing expectation prints expected vs actual and the rule that decided."""
        path = tmp_path / "s.yaml"
        path.write_text("- name: wrong on purpose\n  facts: {task: lora, model: llama-3.1-70b}\n"
                        "  expect: {kind: frontier, warnings: [operations-tax]}\n")
        result = cli("test", path, "--no-coverage")
        assert result.exit_code == 1
        assert ("kind: expected frontier, got single-node (decided by lora-fits-one-node (rules/flow.yaml:"
                in result.output)
        assert "warnings: expected ['operations-tax']" in result.output
        assert result.output.strip().endswith("0 passed, 1 failed")

    def test_json_and_min_coverage(self, tmp_path):
        """--format json reports counts and coverage; --min-coverage fails a narrow suite."""
        path = tmp_path / "s.yaml"
        path.write_text("- name: one\n  facts: {task: lora, model: llama-3.1-8b}\n  expect: {kind: single-node}\n")
        result = cli("test", path, "--format", "json")
        report = json.loads(result.output)
        assert report["passed"] == 1 and report["failed"] == 0
        assert "operations-tax" in report["coverage"]["never_fired"]
        assert cli("test", path, "--min-coverage", "90").exit_code == 1

    def test_misspelt_rule_id_in_an_expectation_stops_the_run(self, tmp_path):
        """A `not_rules` id the rule set does not have would always pass: the run stops with exit 2 and a suggestion."""
        path = tmp_path / "s.yaml"
        path.write_text("- name: x\n  facts: {task: lora, model: llama-3.1-70b, gpu: l4}\n"
                        "  expect: {not_rules: [pcie-penalty-for-finetuning]}\n")
        result = cli("test", path)
        assert result.exit_code == 2, result.output
        assert "s.yaml:3:" in result.output and "did you mean 'pcie-penalty-for-fine-tuning'" in result.output

    def test_bad_scenario_file_is_a_clean_error(self, tmp_path):
        """An unknown expectation key is refused with its location and a suggestion."""
        path = tmp_path / "s.yaml"
        path.write_text("- name: x\n  facts: {task: lora}\n  expect: {knid: single-node}\n")
        result = cli("test", path)
        assert result.exit_code == 2
        assert "unknown expectation 'knid'" in result.output and "did you mean 'kind'" in result.output

    @pytest.mark.parametrize("body, message", [
        ("  expects: {kind: frontier}\n", "3:3: unknown scenario key 'expects' (did you mean 'expect'?)"),
        ("  expect: {warnings: not-a-list}\n", "3:12: expect.warnings: must be a list of names"),
        ("  expect: {nodes: two}\n", "3:12: expect.nodes: must be a whole number"),
        ("  expect: {figures: {node_vram_gb: {mn: 3}}}\n", "expect.figures: figure 'node_vram_gb' needs a number"),
        ("  expect: {figures: {node_vram_gb: {min: .nan}}}\n",
         "3:12: expect.figures: figure 'node_vram_gb' needs a finite number, not nan"),
        ("  expect: {figures: {node_vram_gb: {max: .inf}}}\n", "needs a finite number, not inf"),
        ("  expect: {figures: {node_vram_gb: -.inf}}\n", "needs a finite number, not -inf"),
        ("  expect: {nodes_min: 3, nodes_max: 2}\n",
         "3:12: expect.nodes_min: 3 is above nodes_max 2: no answer can pass"),
        ("  expect: {figures: {node_vram_gb: {min: 5, max: 1}}}\n",
         "3:12: expect.figures: figure 'node_vram_gb': min 5 is above max 1: no answer can pass"),
        ("  expect: {figures: {replicas_needed_fp9: 3}}\n",
         "3:12: expect.figures: 'replicas_needed_fp9' is not a figure an answer gives (did you mean "
         "'replicas_needed_fp8'?)"),
        ("", "s.yaml:1:3: each scenario needs 'name', 'facts' and 'expect': 'expect' is missing"),
        ("  expect:\n", "s.yaml:3:3: each scenario needs 'name', 'facts' and 'expect': 'expect' has no value"),
    ])
    def test_misshapen_scenario_is_refused_not_ignored(self, tmp_path, body, message):
        """A misspelt key or a wrongly typed expectation is a located error, never a silent pass."""
        path = tmp_path / "s.yaml"
        path.write_text("- name: x\n  facts: {task: lora}\n" + body)
        result = cli("test", path)
        assert result.exit_code == 2 and message in result.output, result.output


    def test_scenario_without_a_name_is_refused(self, tmp_path):
        """A scenario without `name` is refused at its location, as the error for a malformed item says."""
        path = tmp_path / "s.yaml"
        path.write_text("- facts: {task: lora, model: llama-3.1-8b}\n  expect: {kind: single-node}\n")
        result = cli("test", path)
        assert result.exit_code == 2, result.output
        assert "s.yaml:1:3: each scenario needs 'name', 'facts' and 'expect': 'name' is missing" in result.output

    def test_an_empty_expect_is_a_deliberate_evaluation_check(self, tmp_path):
        """`expect: {}` is written on purpose: the scenario passes when its facts evaluate."""
        path = tmp_path / "s.yaml"
        path.write_text("- name: evaluates\n  facts: {task: lora, model: llama-3.1-8b}\n  expect: {}\n")
        result = cli("test", path, "--no-coverage")
        assert result.exit_code == 0 and result.output.strip().endswith("1 passed, 0 failed"), result.output

    @pytest.mark.parametrize("layout", ["empty directory", "directory of other files", "empty list", "beside good"])
    def test_a_path_with_no_scenarios_is_an_error(self, tmp_path, layout):
        """A named path that holds no scenario exits 2 naming it, even beside a path that holds some."""
        empty = tmp_path / "suite"
        empty.mkdir()
        args = [empty]
        if layout == "directory of other files":
            (empty / "notes.yml").write_text("- name: x\n  facts: {task: lora}\n  expect: {}\n")
        elif layout == "empty list":
            empty = empty / "none.yaml"
            empty.write_text("[]\n")
            args = [empty]
        elif layout == "beside good":
            args = [SCENARIOS / "reference.yaml", empty]
        result = cli("test", *args, "--no-coverage")
        assert result.exit_code == 2, result.output
        assert result.output.startswith(f"error: {empty}: holds no scenarios"), result.output


class TestDiff:
    """`rules diff` shows what a rule change does to the answers."""

    def test_unchanged_rules_exit_zero(self):
        """Diffing the rules against themselves changes nothing."""
        result = cli("rules", "diff", "--base", RULES, SCENARIOS / "reference.yaml")
        assert result.exit_code == 0 and "0 of 15 answers changed" in result.output

    def test_threshold_change_is_reported(self, rules_copy):
        """Lowering the cliff to 60B moves 70B batch work to INT4, with the rules whose firing changed."""
        _edit(rules_copy / "parameters.yaml", "    value: 405\n", "    value: 60\n")
        result = cli("rules", "diff", "--base", RULES, "--rules", rules_copy, "--format", "json")
        assert result.exit_code == 1
        report = json.loads(result.output)
        row = next(c for c in report["changed"] if c["scenario"] == "batch-inference llama-3.1-70b rtx-pro-6000 8")
        assert row["old"] == "single-node/1/fp8" and row["new"] == "single-node-int4/1/int4"
        assert "at-or-beyond-the-405b-cliff" in row["rules_changed"]
        assert report["base_digest"] != report["new_digest"]

    def test_grid_sees_a_demand_threshold(self, rules_copy):
        """Raising hyperscale_qps changes which rule decides the grid's 150,000-QPS workloads (exit 1)."""
        _edit(rules_copy / "parameters.yaml", "hyperscale_qps:\n    value: 100000",
              "hyperscale_qps:\n    value: 200000")
        result = cli("rules", "diff", "--base", RULES, "--rules", rules_copy, "--format", "json")
        assert result.exit_code == 1
        changed = json.loads(result.output)["changed"]
        assert changed and all("150000" in row["scenario"] for row in changed)
        assert all("hyperscale-multi-tenant" in row["rules_changed"] for row in changed)

    def test_a_warning_message_change_is_reported(self, rules_copy):
        """A parameter only a warning's message quotes changes that warning in the answers, and the diff says so."""
        changed = _changed_rows(rules_copy, "parameters.yaml", "ops_engineering_multiplier_high:\n    value: 5",
                                "ops_engineering_multiplier_high:\n    value: 9")
        assert changed and all(row["also_changed"] == ["warning operations-tax"] for row in changed)
        assert all(row["old"] == row["new"] and not row["rules_changed"] for row in changed)

    def test_a_plan_field_change_is_reported_in_text(self, rules_copy):
        """A changed recommend field beyond kind/nodes/precision (here the interconnect) is a changed answer."""
        _edit(rules_copy / "must-scale.yaml", "interconnect: \"'none'\"", "interconnect: \"'ethernet'\"")
        result = cli("rules", "diff", "--base", RULES, "--rules", rules_copy, SCENARIOS / "reference.yaml")
        assert result.exit_code == 1, result.output
        assert "(rules: -; also: interconnect (none) -> ethernet)" in result.output
        assert "only in the rest of the answer)" in result.output

    def test_every_changed_field_shows_its_old_and_new_value(self, rules_copy):
        """Issue 30: the diff said `also: tp, dp` without the values. A single-node FP8 plan made one TP group of
        the whole node: each changed field, old and new, in the text and in JSON."""
        _edit(rules_copy / "flow.yaml", "tp: tp_fp8, dp: gpus_per_node / tp_fp8}", "tp: gpus_per_node, dp: 1}")
        scenario = "inference llama-3.1-70b rtx-pro-6000 64"
        result = cli("rules", "diff", "--base", RULES, "--rules", rules_copy, "--format", "json")
        row = next(row for row in json.loads(result.output)["changed"] if row["scenario"] == scenario)
        # the alternatives' single-node FP8 plans are the edited rule's too, and the plan's price of the work moves
        # with its throughput
        assert row["also_changed"][:3] == ["tp", "dp", "summary"]
        assert all(name.startswith("alternative ") or name in QUOTE_FIGURES for name in row["also_changed"][3:]), row
        values = row["changed_values"]
        old_tp, old_dp = values["tp"]["old"], values["dp"]["old"]
        assert (values["tp"]["new"], values["dp"]["new"], old_tp * old_dp) == (8, 1, 8) and old_tp < 8
        assert f"(TP={old_tp} per replica" in values["summary"]["old"]
        assert "(TP=8 per replica" in values["summary"]["new"]
        result = cli("rules", "diff", "--base", RULES, "--rules", rules_copy)
        line = next(line for line in result.output.splitlines() if line.startswith(f"{scenario}:"))
        assert f"(rules: -; also: tp {old_tp} -> 8, dp {old_dp} -> 1, summary " in line, line
        assert f'"… KV: one node, done (TP={old_tp} per replica' in line, line

    def test_a_changed_sentence_shows_the_part_that_moved(self, rules_copy):
        """A warning's message, old and new, by the words that changed (a whole sentence would fill the line)."""
        _edit(rules_copy / "parameters.yaml", "ops_engineering_multiplier_high:\n    value: 5",
              "ops_engineering_multiplier_high:\n    value: 9")
        result = cli("rules", "diff", "--base", RULES, "--rules", rules_copy, SCENARIOS / "reference.yaml")
        assert 'also: warning operations-tax message "…e of one node. Budget 4-5x engineering time per a…" -> ' \
               '"…e of one node. Budget 4-9x engineering time per a…")' in result.output, result.output

    def test_a_default_assumption_change_is_reported(self, rules_copy):
        """Rewording why a default is assumed changes the answers that assume it, and the diff lists them."""
        changed = _changed_rows(rules_copy, "facts.yaml", "why: The lower end of the document",
                                "why: The LOWER end of the document", SCENARIOS)
        assert changed and all(row["also_changed"] == ["assumption concurrency"] for row in changed), changed
        assert {row["changed_values"]["assumption concurrency"]["new"]["why"][:13] for row in changed} == \
               {"The LOWER end"}

    def test_an_alternatives_figure_change_is_reported(self, rules_copy):
        """Dropping a figure from selection.yaml's `shown` changes the alternatives every answer lists."""
        rows = _rows_by_card_preference(rules_copy, "selection.yaml",
                                        "shown: [time_to_result_days, output_tokens_per_s, ",
                                        "shown: [time_to_result_days, ")
        row = next(c for c in rows if c["scenario"] == "inference llama-3.1-8b any-card 8")
        assert "alternative l40 x8" in row["also_changed"], row

    def test_a_price_change_is_reported_with_its_old_and_new_value(self, rules_copy):
        """Issue 29: a price of the list moves the quotes that hold the part, old and new, the recommendation's and
        the alternatives'; a dearer L40 leaves every plan and card as it was here."""
        rows = _changed_rows(rules_copy, "prices.yaml", "      price: 7169\n", "      price: 7500\n")
        row = next(c for c in rows if c["scenario"] == "inference llama-3.1-8b l40 8")
        assert row["old"] == row["new"] and row["rules_changed"] == [], row
        old, new = row["changed_values"]["price_total"]["old"], row["changed_values"]["price_total"]["new"]
        assert new - old == pytest.approx(8 * (7500 - 7169)), row
        other = next(c for c in rows if c["scenario"] == "inference llama-3.1-8b rtx-pro-6000 8")
        assert "alternative l40 x8" in other["also_changed"], other

    def test_warnings_of_rules_that_changed_firing_are_not_repeated(self, rules_copy):
        """A warning that comes or goes with a rule listed under rules is not listed again under also."""
        rows = _changed_rows(rules_copy, "parameters.yaml", "weights_fraction_comfortable:\n    value: 0.60",
                             "weights_fraction_comfortable:\n    value: 0.30")
        row = next(c for c in rows if c["scenario"] == "inference llama-3.1-70b l4 8")
        assert row["old"] == row["new"] and row["rules_changed"] == ["tight-headroom"], row
        assert row["also_changed"] == [], row

    def test_a_moved_plan_lists_no_also(self, rules_copy):
        """When kind/nodes/precision/card moved, the plan's other fields that follow are not listed under also."""
        rows = _rows_by_card_preference(rules_copy, "selection.yaml", *CARDS_REVERSED)
        moved = [row for row in rows if row["old"] != row["new"]]
        assert len(moved) > 10
        assert [row for row in moved if row["also_changed"]] == []

    def test_a_knowledge_change_is_diffed_with_base_knowledge(self, tmp_path):
        """--base-knowledge compares the answers of the old and the edited knowledge under the same rules."""
        knowledge = tmp_path / "knowledge"
        shutil.copytree(ROOT / "knowledge", knowledge)
        _edit(knowledge / "gpus.yaml", "memory_gb: 96", "memory_gb: 192")
        result = cli("rules", "diff", "--base-knowledge", ROOT / "knowledge", "--knowledge", knowledge,
                     "--format", "json")
        assert result.exit_code == 1, result.output
        row = next(c for c in json.loads(result.output)["changed"]
                   if c["scenario"] == "pretraining llama-3.1-405b rtx-pro-6000")
        old, new = (int(row[side].split("/")[1]) for side in ("old", "new"))
        assert row["old"].startswith("frontier/") and row["new"].startswith("frontier/"), row
        assert new < old, row  # twice the memory per card: fewer nodes hold the state

    def test_diff_needs_a_base(self):
        """Without --base and --base-knowledge there is nothing to compare with: a one-line error, exit 2."""
        result = cli("rules", "diff")
        assert result.exit_code == 2 and "needs --base" in result.output, result.output

    def test_grid_sees_a_card_preference_for_buyers_who_name_no_card(self, rules_copy):
        """Reversing selection.yaml's card preference moves the grid's answer for a buyer who names no card
        (before, every grid workload named a card, so the diff hid the change's main effect)."""
        rows = _rows_by_card_preference(rules_copy, "selection.yaml", *CARDS_REVERSED)
        row = next(c for c in rows if c["scenario"] == "lora llama-3.1-8b any-card")
        assert row["old"].endswith(" on rtx-pro-6000") and row["new"].endswith(" on l4"), row

    def test_markdown_for_review(self, rules_copy):
        """--format markdown gives a table a review comment can hold."""
        _edit(rules_copy / "parameters.yaml", "    value: 405\n", "    value: 60\n")
        result = cli("rules", "diff", "--base", RULES, "--rules", rules_copy, "--format", "markdown")
        assert result.output.startswith("### Rule change impact:") and "| scenario | old | new |" in result.output

    def test_git_revision_as_base(self):
        """--base HEAD reads rules/ from git; with an unmodified rules/ nothing changes."""
        import subprocess
        clean = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "rules"], cwd=ROOT).returncode == 0
        inside = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode == 0
        if not (clean and inside):
            pytest.skip("rules/ differs from HEAD (or no git checkout): the comparison would not be to itself")
        result = cli("rules", "diff", "--base", "HEAD", SCENARIOS / "reference.yaml")
        assert result.exit_code == 0, result.output

    def test_unknown_base_is_a_clean_error(self):
        """A base that is neither a directory nor a git revision exits 2."""
        result = cli("rules", "diff", "--base", "no-such-rev-or-dir")
        assert result.exit_code == 2 and "--base" in result.output

    @pytest.mark.parametrize("base", ["", "  "])
    def test_an_empty_base_is_refused(self, base):
        """An empty --base (an unset variable in a CI script) is refused, not read as the current directory."""
        result = cli("rules", "diff", "--base", base)
        assert result.exit_code == 2 and "--base is empty" in result.output, result.output


STORED_RULE_PAGES = sorted(p.name for p in (ROOT / "docs" / "rules").glob("*.md"))


@pytest.fixture(scope="module")
def fresh_rule_pages(tmp_path_factory) -> dict:
    """The rule pages as `kentino-expert rules docs` writes them now, by file name."""
    outdir = tmp_path_factory.mktemp("rule-pages")
    expert = Expert()
    try:
        write_docs(expert, outdir)
    finally:
        expert.close()
    return {p.name: p.read_text() for p in outdir.glob("*.md")}


class TestRulePages:
    """Rule pages are generated from the rule files and kept in the repo."""

    def test_rule_examples_scenarios_are_current(self):
        """tests/scenarios/rule-examples.yaml equals `kentino-expert rules examples` (regenerate after editing
        rules)."""
        from kentino_expert.authoring.rule_pages import rule_examples_yaml
        stored = (ROOT / "tests" / "scenarios" / "rule-examples.yaml").read_text()
        assert stored == rule_examples_yaml(Expert().ruleset)

    def test_docs_hold_a_page_per_rule(self, fresh_rule_pages):
        """docs/rules/ holds exactly the pages a fresh generation writes: one per rule and the index."""
        stored = sorted(p.name for p in (ROOT / "docs" / "rules").glob("*.md"))
        assert stored == sorted(fresh_rule_pages), "run `kentino-expert rules docs docs/rules`"

    @pytest.mark.parametrize("page", STORED_RULE_PAGES)
    def test_rule_page_snapshot(self, page, fresh_rule_pages):
        """The stored page (the rule's text, conditions and its example's trace step) equals a fresh generation."""
        stored = (ROOT / "docs" / "rules" / page).read_text()
        fresh = fresh_rule_pages.get(page, "")
        diff = "".join(difflib.unified_diff(stored.splitlines(True), fresh.splitlines(True), "stored", "fresh"))
        assert not diff, f"{page} is stale (run `kentino-expert rules docs docs/rules`):\n{diff}"

    def test_page_content(self, tmp_path):
        """A page names the heuristic's words, its conditions in plain language, parameters and an example that
        fires."""
        write_docs(Expert(), tmp_path)
        page = (tmp_path / "fp8-weights-leave-headroom.md").read_text()
        assert "weights should take 60-70% of VRAM" in page
        assert "weights_fraction_fp8 is at most weights_fraction_max" in page
        assert "parameter = 0.7" in page and "this rule fires on it" in page
        assert "rules/fit.yaml:" in page


class TestSchemas:
    """Editors get JSON Schemas for rule files and facts."""

    def test_stored_schemas_are_current(self):
        """docs/schema/*.json equal what `kentino-expert schema` prints."""
        assert json.loads((ROOT / "docs/schema/rules.schema.json").read_text()) == rules_schema()
        expert = Expert()
        written = json.loads((ROOT / "docs/schema/facts.schema.json").read_text())
        assert written == facts_schema(expert.ruleset, expert.knowledge)

    def test_rule_files_validate_and_carry_the_schema_comment(self):
        """Every rule file starts with the yaml-language-server comment and validates against the schema."""
        jsonschema = pytest.importorskip("jsonschema")
        for path in RULES.glob("*.yaml"):
            text = path.read_text()
            assert text.startswith("# yaml-language-server: $schema=../docs/schema/rules.schema.json"), path.name
            jsonschema.validate(to_plain(load_yaml(text, path.name)), rules_schema())  # read as YAML 1.2

    def test_facts_schema_has_questions(self):
        """The facts schema carries each fact's question for chat bots."""
        schema = facts_schema(Expert().ruleset)
        assert "x-ask" in schema["properties"]["concurrency"]
        assert schema["required"] == ["task"]


class TestPolicyLivesInYaml:
    """Policy changes need no Python: thresholds, deletions and new rules in YAML only."""

    def test_threshold_moves_answers(self, rules_copy):
        """Raising the hyperscale line above the asked QPS turns a hyperscale answer into plain replicas."""
        facts = {"task": "inference", "model": "llama-3.1-70b", "tenancy": "multi", "qps": 150000}
        before = Expert(rules_copy).recommend(facts)
        _edit(rules_copy / "parameters.yaml", "    value: 100000\n", "    value: 1000000\n")
        after = Expert(rules_copy).recommend(facts)
        assert "hyperscale-multi-tenant" in [s.rule for s in before.trace]
        assert "hyperscale-multi-tenant" not in [s.rule for s in after.trace]
        assert after.recommendation.kind == "dp-replicas"
        assert {"throughput-bound-replicas", "concurrency-bound-replicas"} & {s.rule for s in after.trace}

    def test_headroom_threshold_moves_fit(self, rules_copy):
        """With weights allowed only 5% of VRAM, 70B no longer fits at FP8 and goes to INT4."""
        facts = {"task": "inference", "model": "llama-3.1-70b"}
        _edit(rules_copy / "parameters.yaml", "    value: 0.70\n", "    value: 0.06\n")
        answer = Expert(rules_copy).recommend(facts)
        assert answer.recommendation.kind == "single-node-int4"

    def test_deleted_rule_leaves_the_trace(self, rules_copy):
        """Without the lab-trap rule, H-LAB-TRAP disappears from the trace of the lab scenario."""
        facts = {"task": "lora", "model": "llama-3.1-70b", "proposed_build": {"nodes": 2, "gpus_per_node": 4}}
        assert "H-LAB-TRAP" in {h for s in Expert(rules_copy).recommend(facts).trace for h in s.heuristics}
        data = yaml.safe_load((rules_copy / "advice.yaml").read_text())
        data["rules"] = [r for r in data["rules"] if r["id"] != "research-lab-trap"]
        (rules_copy / "advice.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        answer = Expert(rules_copy).recommend(facts)
        assert "H-LAB-TRAP" not in {h for s in answer.trace for h in s.heuristics}

    def test_new_rule_in_yaml_fires(self, rules_copy):
        """A new warning for L4 training, written only in YAML, fires with its rendered message."""
        (rules_copy / "l4.yaml").write_text(
            "rules:\n  - id: l4-is-for-inference\n    heuristics: [H-FIT-CAPACITY]\n    priority: 600\n"
            "    when:\n      - gpu == 'l4'\n      - task in ['lora', 'qlora', 'full-finetune', 'pretraining']\n"
            "    then:\n      warn: {code: l4-training, "
            "message: \"L4 nodes hold {node_vram_gb:.0f} GB: train elsewhere.\"}\n"
            "    because: \"{gpu} is an inference card.\"\n")
        answer = Expert(rules_copy).recommend({"task": "lora", "model": "llama-3.1-8b", "gpu": "l4"})
        warning = next(w for w in answer.warnings if w.code == "l4-training")
        assert warning.message == "L4 nodes hold 192 GB: train elsewhere."
        assert answer.trace[-1].because == "l4 is an inference card." or any(
            s.because == "l4 is an inference card." for s in answer.trace)
