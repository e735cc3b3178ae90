"""Adding to the catalog (issue 30, item 7): the fields a card, a model and a link need are a generated, documented
list that follows the specs; a shipped card missing from selection.yaml is a warning; the question for `gpu`
lists the cards the catalog ships."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import PositiveFloat

from kentino_expert.authoring.catalog_fields import SPECS, field_rows
from kentino_expert.domain.catalog import GpuSpec, load_knowledge
from kentino_expert.paths import bundled
from kentino_expert.rulecheck import check_directory
from kentino_expert.ruleset.compiler import compile_ruleset
from kentino_expert.ruleset.schemas import facts_schema

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the rules and of the knowledge where Kentino ships one more card: the L40S (a reference card of
    the catalog until then)."""
    shutil.copytree(bundled("rules"), tmp_path / "rules")
    shutil.copytree(bundled("knowledge"), tmp_path / "knowledge")
    gpus = tmp_path / "knowledge" / "gpus.yaml"
    text = gpus.read_text(encoding="utf-8")
    old = "    kentino_ships: false\n    source: NVIDIA L40S data sheet"
    assert old in text
    new = "    kentino_ships: true\n    node_shapes: [8]\n    source: NVIDIA L40S data sheet"
    gpus.write_text(text.replace(old, new), encoding="utf-8")
    return tmp_path


def test_a_shipped_card_needs_a_price(project):
    """The build search quotes every card it ships: the new card without a line in rules/prices.yaml is E042,
    naming it."""
    errors = [str(d) for d in check_directory(project / "rules", project / "knowledge").errors]
    assert len(errors) == 1 and "E042" in errors[0] and "'l40s'" in errors[0]


def _priced(project: Path) -> None:
    prices = project / "rules" / "prices.yaml"
    line = "    - part: l40s\n      price: 7500\n      source: a test\n"
    prices.write_text(prices.read_text(encoding="utf-8") + line, encoding="utf-8")


def test_a_shipped_card_missing_from_the_card_preference_is_a_warning(project):
    """The new card (priced) is sized by the build search but ranked after every card `cards` lists: W310 at
    `cards`."""
    _priced(project)
    report = check_directory(project / "rules", project / "knowledge")
    text = (project / "rules" / "selection.yaml").read_text(encoding="utf-8")
    line = next(number for number, row in enumerate(text.splitlines(), 1) if row.startswith("  cards: "))
    assert [str(d) for d in report.diagnostics] == [
        f"rules/selection.yaml:{line}:10: W310: card 'l40s' ships (kentino_ships: true in knowledge/gpus.yaml) but "
        "selection.cards does not list it: the build search ranks it after every card listed; list it where it ranks"]
    selection = project / "rules" / "selection.yaml"
    selection.write_text(text.replace("  cards: [rtx-pro-6000, l40,", "  cards: [rtx-pro-6000, l40s, l40,"),
                         encoding="utf-8")
    assert check_directory(project / "rules", project / "knowledge").diagnostics == ()


def test_the_gpu_question_lists_the_cards_the_catalog_ships(project):
    """The question for `gpu` followed the old cards by hand; it is filled from the catalog: the L40S is in it,
    the H100 (not shipped) is not."""
    _priced(project)
    knowledge = load_knowledge(project / "knowledge")
    ruleset = compile_ruleset(project / "rules", knowledge)
    ask = ruleset.fact_policies["gpu"].ask
    assert ask == ("Which card do you have in mind: rtx-pro-6000 (96 GB), rtx-5090 (32 GB), l40 (48 GB), l4 (24 GB) "
                   "or l40s (48 GB)?")
    assert facts_schema(ruleset, knowledge)["properties"]["gpu"]["x-ask"] == ask


def test_an_unknown_name_in_a_question_is_e106_at_it(project):
    facts = project / "rules" / "facts.yaml"
    text = facts.read_text(encoding="utf-8")
    facts.write_text(text.replace("{shipped_cards}", "{shipped_card}"), encoding="utf-8")
    _priced(project)
    line = next(number for number, row in enumerate(text.splitlines(), 1) if "{shipped_cards}" in row)
    errors = [str(d) for d in check_directory(project / "rules", project / "knowledge").errors]
    assert errors == [f"rules/facts.yaml:{line}:10: E106: ask of 'gpu': unknown name 'shipped_card' (did you mean "
                      "'shipped_cards'?)"]


class CardWithFp6(GpuSpec):
    """The card spec with a field added the way FP4 and the board power were."""

    fp6_dense_tflops: PositiveFloat | None = None  # dense FP6 tensor throughput, TFLOPS


def test_the_field_list_follows_the_spec():
    """A field added to a spec is listed with its type, default and the comment on its line, with no other edit
    (as the card's FP4 throughput and board power were, by another hand)."""
    rows = {row[0]: row[1:] for row in field_rows(CardWithFp6)}
    assert rows["`fp6_dense_tflops`"] == ("no (none)", "number > 0", "Dense FP6 tensor throughput, TFLOPS.")
    assert rows["`memory_gb`"][:2] == ("yes", "number > 0") and rows["`node_shapes`"][0] == "no (empty)"
    card = {row[0]: row[1:] for row in field_rows(GpuSpec)}
    assert card["`board_power_w`"] == ("no (none)", "number > 0", "The data sheet's maximum board power.")


@pytest.mark.parametrize("kind", list(SPECS))
def test_the_guide_lists_every_field_of_each_spec(kind):
    """docs/knowledge.md holds a row for every field of the card, model and link specs, nested parts included."""
    text = (ROOT / "docs" / "knowledge.md").read_text(encoding="utf-8")
    rows = field_rows(SPECS[kind])
    assert len(rows) >= len(SPECS[kind].model_fields)
    missing = [row[0] for row in rows if f"| {row[0]} | {row[1]} |" not in text]
    assert not missing, missing
