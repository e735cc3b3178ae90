"""The editor schema (docs/schema/rules.schema.json) and `rules check` agree (issue 10): the schema is generated
from the reader's own tables, and both give the same verdict on the bundled rules and on good and bad files."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from kentino_expert.authoring.diagnostic_examples import copy_project, write_into
from kentino_expert.rulecheck import check_directory
from kentino_expert.ruleset import policies, rulefile
from kentino_expert.ruleset.diagnostics import REGISTRY
from kentino_expert.ruleset.schemas import rules_schema
from kentino_expert.yamlsrc import load_yaml, to_plain

jsonschema = pytest.importorskip("jsonschema", reason="the schema is checked with jsonschema (a test dependency)")
ROOT = Path(__file__).resolve().parent.parent
SCHEMA = rules_schema()
RULE = "rules:\n  - id: big-model\n    heuristics: [H-CLIFF-405B]\n    when: params_b >= cliff_params_b\n"
THEN = "    then:\n      conclude: {big_model: true}\n"
BECAUSE = "    because: The model is past the single-node cliff.\n"

# (name, file, text): files that both `rules check` and the schema take
GOOD = [
    ("parameter given as its value alone", "rules/parameters.yaml", "parameters:\n  spare_share: 0.70\n"),
    ("a YAML 1.2 number", "rules/parameters.yaml", "parameters:\n  big_qps:\n    value: 1e5\n    unit: req/s\n"),
    ("a fact with description and ask", "rules/facts.yaml",
     "facts:\n  batch_size:\n    description: Sequences per step.\n    ask: How many sequences per step?\n"),
    ("a default with a condition", "rules/facts.yaml",
     "facts:\n  batch_size:\n    description: d\n    ask: a?\n    default:\n      - when: task == 'lora'\n"
     "        value: 8\n"),
    ("one heuristic id alone, a true/false condition", "rules/example.yaml",
     RULE.replace("[H-CLIFF-405B]", "H-CLIFF-405B").replace("params_b >= cliff_params_b", "true") + THEN + BECAUSE),
    ("empty optional keys", "rules/example.yaml", RULE + "    description:\n    example:\n" + THEN + BECAUSE),
    ("a recommendation", "rules/example.yaml",
     RULE + "    priority: 1\n    then:\n      recommend: {kind: frontier, precision: fp8, nodes: 2}\n" + BECAUSE),
]
# files that both refuse, besides the example of every code the registry marks `schema` (the three
# disagreements of issue 10 first: they once passed the schema, or failed it while `rules check` passed)
BAD = [
    ("a rule without because", "rules/example.yaml", RULE + THEN),
    ("a fact without ask", "rules/facts.yaml", "facts:\n  batch_size:\n    description: Sequences per step.\n"),
    ("a unit that is not text", "rules/parameters.yaml", "parameters:\n  spare:\n    value: 1\n    unit: 5\n"),
    ("a heuristics list that is empty", "rules/example.yaml", RULE.replace("[H-CLIFF-405B]", "[]") + THEN + BECAUSE),
    ("a parameter written as text", "rules/parameters.yaml", "parameters:\n  spare_share: lots\n"),
    ("a warn without message", "rules/example.yaml", RULE + "    then:\n      warn: {code: big}\n" + BECAUSE),
    ("a priority past the limit", "rules/example.yaml", RULE + "    priority: 2000000\n" + THEN + BECAUSE),
]
BAD += [(f"the example of {code.id}", code.file, code.example) for code in REGISTRY.values() if code.schema]


def verdicts(file: str, text: str) -> tuple[bool, bool]:
    """(`rules check` passes, the schema passes) for a copy of the bundled rules with `text` in `file`."""
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch)
        rules = copy_project(project)
        write_into(project, file, text)
        checked = not check_directory(rules, project / "knowledge").errors
        data = to_plain(load_yaml((project / file).read_text(encoding="utf-8"), file))
        return checked, jsonschema.Draft202012Validator(SCHEMA).is_valid(data)


@pytest.mark.parametrize("path", sorted((ROOT / "rules").glob("*.yaml")), ids=lambda p: p.name)
def test_the_bundled_rules_pass_both(path):
    """Every bundled rule file validates against the schema, read as `rules check` reads it (YAML 1.2)."""
    jsonschema.validate(to_plain(load_yaml(path.read_text(encoding="utf-8"), str(path))), SCHEMA)


@pytest.mark.parametrize("name,file,text", GOOD, ids=[g[0] for g in GOOD])
def test_good_files_pass_both(name, file, text):
    """What `rules check` takes, the schema takes."""
    assert verdicts(file, text) == (True, True)


@pytest.mark.parametrize("name,file,text", BAD, ids=[b[0] for b in BAD])
def test_bad_files_fail_both(name, file, text):
    """What `rules check` refuses for its shape, the schema refuses too."""
    assert verdicts(file, text) == (False, False)


def _rule_properties():
    return SCHEMA["properties"]["rules"]["items"]


class TestGeneratedFromTheReader:
    """Each mapping of the schema has exactly the reader's keys, and requires exactly what the reader requires."""

    def test_a_rule(self):
        """A rule's keys and required keys are rulefile.RULE_KEYS and RULE_REQUIRED."""
        rule = _rule_properties()
        assert tuple(rule["properties"]) == rulefile.RULE_KEYS and rule["required"] == list(rulefile.RULE_REQUIRED)
        assert rule["additionalProperties"] is False and "because" in rule["required"]

    def test_then_recommend_and_warn(self):
        """`then`, `recommend` and `warn` follow THEN_KEYS, RECOMMEND_KEYS/RECOMMEND_REQUIRED and WARN_KEYS."""
        then = _rule_properties()["properties"]["then"]
        assert tuple(then["properties"]) == rulefile.THEN_KEYS
        recommend, warn = then["properties"]["recommend"], then["properties"]["warn"]
        assert tuple(recommend["properties"]) == rulefile.RECOMMEND_KEYS
        assert recommend["required"] == list(rulefile.RECOMMEND_REQUIRED)
        assert tuple(warn["properties"]) == rulefile.WARN_KEYS == tuple(warn["required"])

    def test_parameters_and_facts(self):
        """A parameter (or its value alone), a fact and a default follow the tables of policies.py."""
        parameter = SCHEMA["properties"]["parameters"]["additionalProperties"]["oneOf"]
        assert parameter[0] == {"type": "number", "description": "the value alone (`name: 0.70`)"}
        assert tuple(parameter[1]["properties"]) == policies.PARAMETER_KEYS
        assert parameter[1]["required"] == list(policies.PARAMETER_REQUIRED)
        fact = SCHEMA["properties"]["facts"]["additionalProperties"]
        assert tuple(fact["properties"]) == policies.FACT_KEYS and fact["required"] == list(policies.FACT_REQUIRED)
        default = fact["properties"]["default"]["items"]
        assert tuple(default["properties"]) == policies.DEFAULT_KEYS
        assert default["required"] == list(policies.DEFAULT_REQUIRED)

    def test_a_key_without_a_kind_cannot_be_generated(self, monkeypatch):
        """A key added to the reader's table but not given a kind in schemas.py breaks generation, loudly."""
        from kentino_expert.ruleset import schemas
        monkeypatch.setattr(schemas, "RULE_KEYS", rulefile.RULE_KEYS + ("owner",))
        with pytest.raises(KeyError, match="owner"):
            schemas.rules_schema()
