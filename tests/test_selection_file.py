"""rules/selection.yaml is checked like a rule file: each mistake is one located diagnostic, and the policy it
holds is what the search reads."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.errors import RuleFileError
from kentino_expert.ruleset.compiler import compile_ruleset

ROOT = Path(__file__).resolve().parent.parent
KNOWLEDGE = load_knowledge(ROOT / "knowledge")


def _compile_with(tmp_path, old: str, new: str):
    """Compile a copy of the bundled rules whose selection.yaml has `old` replaced by `new`."""
    rules = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", rules)
    path = rules / "selection.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return compile_ruleset(rules, KNOWLEDGE)


def _diagnostic(tmp_path, old, new):
    with pytest.raises(RuleFileError) as caught:
        _compile_with(tmp_path, old, new)
    [diagnostic] = caught.value.diagnostics
    return diagnostic


class TestBundledPolicy:
    """The policy as shipped."""

    def test_reads_what_the_file_says(self):
        """Order, kinds, cards, precisions and the works conditions come from the file."""
        policy = compile_ruleset(ROOT / "rules", KNOWLEDGE).selection
        assert policy.order[:2] == ("named-build", "buildable") and policy.cards[0] == "rtx-pro-6000"
        assert policy.precisions["inference"] == ("fp8", "int4")
        written = yaml.safe_load((ROOT / "rules" / "selection.yaml").read_text())["selection"]["works"]
        assert [w.id for w in policy.works] == [entry["id"] for entry in written]
        assert [w.figure for w in policy.works] == [entry["figure"] for entry in written]
        assert {"recommended_kind", "time_to_result_days", "deadline_days"} <= policy.reads

    def test_a_rule_set_without_the_file_has_no_policy(self, tmp_path):
        """selection.yaml is optional: without it the rule set has no selection."""
        rules = tmp_path / "rules"
        shutil.copytree(ROOT / "rules", rules)
        (rules / "selection.yaml").unlink()
        assert compile_ruleset(rules, KNOWLEDGE).selection is None


class TestMistakes:
    """Each mistake is a diagnostic at its line, with a suggestion where one helps."""

    def test_unknown_criterion(self, tmp_path):
        """A misspelt criterion is E035 with the right one suggested."""
        found = _diagnostic(tmp_path, "cheapest, flow-precision", "cheapest, flow-precison")
        assert (found.code, Path(found.location.file).name) == ("E035", "selection.yaml")
        assert found.location.line > 1 and found.suggestion == "flow-precision"

    def test_ranking_by_price_needs_a_price_list(self, tmp_path):
        """`cheapest` in the order without rules/prices.yaml is E035 at the order, naming the file it needs; the
        order without it loads, and its answers carry no quote."""
        rules = tmp_path / "rules"
        shutil.copytree(ROOT / "rules", rules)
        (rules / "prices.yaml").unlink()
        with pytest.raises(RuleFileError) as raised:
            compile_ruleset(rules, KNOWLEDGE)
        found = [d for d in raised.value.diagnostics if d.code == "E035"]
        assert found and "prices.yaml" in found[0].message and Path(found[0].location.file).name == "selection.yaml"
        path = rules / "selection.yaml"
        path.write_text(path.read_text().replace("task-precision, cheapest, flow-precision",
                                                 "task-precision, flow-precision"))
        assert compile_ruleset(rules, KNOWLEDGE).prices is None

    def test_unknown_card(self, tmp_path):
        """A card that is not in knowledge/gpus.yaml is E035."""
        found = _diagnostic(tmp_path, "cards: [rtx-pro-6000,", "cards: [rtx-pro-600,")
        assert found.code == "E035" and found.suggestion == "rtx-pro-6000"

    @pytest.mark.parametrize("key", ["order", "kinds", "cards"])
    def test_an_empty_list(self, tmp_path, key):
        """An empty order, kinds or cards is E035 at its key: an empty order would not even rank buildable first."""
        text = (ROOT / "rules" / "selection.yaml").read_text()
        line = next(line for line in text.splitlines() if line.strip().startswith(f"{key}:"))
        found = _diagnostic(tmp_path, line, f"  {key}: []")
        assert (found.code, found.message) == ("E035", f"selection.{key}: needs at least one value")

    def test_unknown_name_in_a_condition(self, tmp_path):
        """A works condition on a name that does not exist is E102 at its column."""
        found = _diagnostic(tmp_path, "not time_to_result_days > deadline_days", "not time_to_result > deadline_days")
        assert found.code == "E102" and found.suggestion == "time_to_result_days" and found.location.column > 1

    def test_condition_that_does_not_parse(self, tmp_path):
        """A works condition with a syntax error is E101."""
        assert _diagnostic(tmp_path, "not recommended_kind == 'frontier'", "not recommended_kind ==").code == "E101"

    def test_unknown_figure(self, tmp_path):
        """The figure of a works condition must be a name the plan has."""
        found = _diagnostic(tmp_path, 'figure: recommended_nodes\n      says: "Frontier',
                            'figure: recommended_node\n      says: "Frontier')
        assert found.code == "E102" and found.suggestion == "recommended_nodes"

    def test_unknown_heuristic(self, tmp_path):
        """A works condition cites heuristics of the catalog."""
        assert _diagnostic(tmp_path, "[H-FLOW-5, H-MS-PRETRAIN]", "[H-FLOW-6, H-MS-PRETRAIN]").code == "E104"

    def test_bad_template(self, tmp_path):
        """A `says` template with an unknown name is E106."""
        assert _diagnostic(tmp_path, "past the {deadline_days:g}-day", "past the {deadline:g}-day").code == "E106"

    def test_unknown_key(self, tmp_path):
        """A misspelt key of the policy is E002."""
        found = _diagnostic(tmp_path, "  shown:", "  shwn:")
        assert found.code == "E002" and found.suggestion == "shown"

    def test_shown_figure_must_exist(self, tmp_path):
        """A `shown` entry that names no figure (for any precision) is E102."""
        assert _diagnostic(tmp_path, "plan_gpu_memory_fraction]", "plan_gpu_memory_share]").code == "E102"

    def test_unknown_task_in_precisions(self, tmp_path):
        """Precisions are listed per task of the vocabulary."""
        found = _diagnostic(tmp_path, "    qlora: [int4]", "    q-lora: [int4]")
        assert found.code == "E035" and found.suggestion == "qlora"
