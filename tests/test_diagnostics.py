"""Diagnostics like ruff's (issue 10): every code emitted is registered and documented, each code's example
gives that code, `rules check --explain` explains, and a mistake is reported once, root cause first."""
from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kentino_expert.authoring.diagnostic_examples import example_diagnostics
from kentino_expert.cli.main import main
from kentino_expert.domain.vocabulary import PRECISIONS
from kentino_expert.paths import bundled
from kentino_expert.rulecheck import check_directory
from kentino_expert.ruleset.diagnostic_code import CODE_PATTERN, DiagnosticCode
from kentino_expert.ruleset.diagnostics import CODES, REGISTRY, RETIRED, explain

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kentino_expert"
CODE_LITERAL = re.compile(r"^[EW][0-9]{3}$")


def code_literals() -> list[tuple[str, str]]:
    """(file:line, code) of every string literal in the package that is a diagnostic code, read with `ast`."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE_LITERAL.match(node.value):
                found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node.value))
    return found


@pytest.fixture
def rules_copy(tmp_path) -> Path:
    return Path(shutil.copytree(bundled("rules"), tmp_path / "rules"))


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _lines(report) -> list[str]:
    return [str(d) for d in report.diagnostics]


class TestRegistry:
    """Each code has its id, severity, summary, explanation, example and fix; nothing emits an unknown code."""

    def test_every_code_the_package_emits_is_registered(self):
        """Every code literal of the package (sink calls, backend limits, the sandbox) is in the registry; a
        retired code appears only in the registry's note about it."""
        literals = code_literals()
        unknown = [(where, code) for where, code in literals if code not in REGISTRY and code not in RETIRED]
        retired = [where for where, code in literals if code in RETIRED and "ruleset/diagnostics.py" not in where]
        assert len(literals) > 60 and not unknown and not retired, (unknown, retired)

    def test_every_registered_code_is_emitted_somewhere(self):
        """No registered code is dead: each is written in the code that reports it."""
        emitted = {code for where, code in code_literals() if "/codes_" not in where}
        assert set(REGISTRY) - emitted == set()

    @pytest.mark.parametrize("code", list(REGISTRY), ids=list(REGISTRY))
    def test_each_code_is_documented_in_full(self, code):
        """Summary, explanation and fix are sentences; the example is YAML text; E is an error, W a warning."""
        entry = REGISTRY[code]
        assert entry.id == code and CODE_PATTERN.match(code)
        assert entry.severity == {"E": "error", "W": "warning"}[code[0]]
        assert len(entry.summary) > 10 and "\n" not in entry.summary
        assert len(entry.explanation) > 60 and entry.explanation.endswith(".")
        assert entry.fix.endswith(".") and entry.example.endswith("\n")
        assert CODES[code] == entry.summary

    def test_a_malformed_code_is_refused(self):
        """A registry entry whose id and severity disagree cannot be made."""
        with pytest.raises(ValueError, match="W123"):
            DiagnosticCode("W301", "error", "s", "e", "x\n", "f.")

    def test_the_diagnostics_page_documents_every_code(self):
        """docs/diagnostics.md has a section per code with its example (generated from the registry)."""
        page = (ROOT / "docs" / "diagnostics.md").read_text(encoding="utf-8")
        for code, entry in REGISTRY.items():
            assert f"\n### {code}\n" in page and f"[`{code}`](#{code.lower()})" in page, code
            assert entry.example.rstrip() in page, code


@pytest.mark.parametrize("code", list(REGISTRY), ids=list(REGISTRY))
def test_each_example_gives_its_code(code):
    """The code's example, made in a copy of the bundled rules and knowledge, gives that code in the example's
    file and no other error; a root cause is listed first."""
    entry = REGISTRY[code]
    found = example_diagnostics(entry)
    mine = [d for d in found if d.code == code]
    errors = {d.code for d in found if d.severity == "error"}
    assert mine, [str(d) for d in found]
    assert errors == ({code} if entry.severity == "error" else set()), [str(d) for d in found]
    expected_file = "rules" if entry.environment else entry.file
    assert all(d.location.file == expected_file for d in mine), [str(d) for d in mine]
    if entry.root:
        assert found[0].code == code


class TestExplain:
    """`rules check --explain CODE` prints the code's page; an unknown code is a one-line error, exit 2."""

    def test_explains_a_code(self):
        """The page holds the summary, the explanation, the example indented as a block, and the fix."""
        result = CliRunner().invoke(main, ["rules", "check", "--explain", "e026"])
        entry = REGISTRY["E026"]
        assert result.exit_code == 0, result.output
        assert result.output.startswith(f"E026 (error): {entry.summary}\n")
        assert "    rules:\n      - id: big-model\n" in result.output
        assert "precision: fp16" in result.output and f"\nFix: {entry.fix}" in result.output
        assert all(precision in entry.fix for precision in PRECISIONS)  # the fix names every precision there is

    def test_a_trial_code_says_how_it_is_found(self):
        """W306 is found in the sandbox, E207 with the limit it is checked with."""
        assert explain("W306").startswith("W306 (warning, found by answering the examples in the sandbox): ")
        assert "With: `rules check` run with `KENTINO_SANDBOX_SECONDS=0.05`." in explain("E207")

    @pytest.mark.parametrize("code,fragment", [("W36", "(did you mean 'W306'?)"),
                                               ("E999", "known codes: E001-E002, E004, E010-E018"),
                                               ("nonsense\x1b", "unknown diagnostic code 'nonsense\\x1b'"),
                                               ("E" * 100_000, "'" + "E" * 40 + "...'")],
                             ids=["close", "far", "control", "huge"])
    def test_an_unknown_code_is_one_line_with_a_suggestion(self, code, fragment):
        """Exit 2, one printable line on stderr, nothing on stdout; the closest code or the known ones."""
        result = CliRunner().invoke(main, ["rules", "check", "--explain", code])
        assert result.exit_code == 2 and result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: unknown diagnostic code") and fragment in lines[0]

    def test_a_retired_code_says_what_it_became(self):
        """E003, split by issue 10, names the codes that replaced it."""
        result = CliRunner().invoke(main, ["rules", "check", "--explain", "E003"])
        assert result.exit_code == 0 and "split into specific codes: E010-E018" in result.output


class TestRootCauseFirst:
    """A mistake is reported once, in words, before anything else; what it would cause is not reported."""

    @pytest.mark.parametrize("old,new,line,words", [
        ("\n  workload_fraction_max:\n", "\n   workload_fraction_max:\n", 15, "indented 3 spaces"),
        ("\n    value: 0.90\n", "\n     value: 0.90\n", 16, "line 16 is indented 5 spaces, and the lines after it 4"),
        ("\n    value: 0.90\n", "\n   value: 0.90\n", 16, "line 16 is indented 3 spaces, and the lines after it 4"),
        ("\n    unit: fraction of node VRAM\n    heuristics: [H-FIT-WORKLOAD",
         "\n    unit: fraction of node VRAM\n     heuristics: [H-FIT-WORKLOAD", 18,
         "line 18 is indented 5 spaces, more than line 17 above it (4), whose value follows its ':'")])
    def test_a_one_space_slip_is_one_indentation_error(self, rules_copy, old, new, line, words):
        """A one-space slip in parameters.yaml is one E001 that says "indentation" and names the lines (it was 89
        diagnostics, the real one 88th, before the checks stopped at what could not be read)."""
        _edit(rules_copy / "parameters.yaml", old, new)
        lines = _lines(check_directory(rules_copy))
        assert len(lines) == 1 and lines[0].startswith(f"rules/parameters.yaml:{line}:"), lines
        assert "E001: YAML syntax error: indentation: " in lines[0] and words in lines[0]

    def test_a_tab_is_named(self, rules_copy):
        """A tab in the indentation is "a tab character", at the tab (PyYAML: "cannot start any token")."""
        _edit(rules_copy / "parameters.yaml", "\n    value: 0.90\n", "\n\tvalue: 0.90\n")
        assert _lines(check_directory(rules_copy)) == [
            "rules/parameters.yaml:16:1: E001: YAML syntax error: a tab character: YAML indents with spaces "
            "(replace the tab with spaces)"]

    def test_a_file_without_its_top_level_key_is_one_error(self, rules_copy):
        """`parameter:` for `parameters:` is one E004 at that key, not the 88 unknown names it would cause."""
        _edit(rules_copy / "parameters.yaml", "\nparameters:\n", "\nparameter:\n")
        assert _lines(check_directory(rules_copy)) == [
            "rules/parameters.yaml:4:1: E004: expected a top-level 'parameters:' mapping (found parameter:)"]

    @pytest.mark.parametrize("name", ["parameters.yaml", "facts.yaml"])
    def test_an_empty_special_file_is_one_error(self, rules_copy, name):
        """An empty parameters.yaml (or facts.yaml) is one E004, not the parameters it lacks one by one."""
        (rules_copy / name).write_text("# emptied by mistake\n")
        key = name.removesuffix(".yaml")
        assert _lines(check_directory(rules_copy)) == [
            f"rules/{name}:1:1: E004: expected a top-level '{key}:' mapping (the file holds no mapping)"]

    def test_root_causes_come_first_and_reading_errors_stay(self, rules_copy):
        """An unreadable parameters.yaml is listed before a reading error of another file (which is still
        reported); nothing that reads the parameters is."""
        _edit(rules_copy / "parameters.yaml", "\n    value: 0.90\n", "\n\tvalue: 0.90\n")
        _edit(rules_copy / "fit.yaml", "    priority: 110\n", "    prority: 110\n")
        codes = [(d.location.file, d.code) for d in check_directory(rules_copy).diagnostics]
        assert codes == [("rules/parameters.yaml", "E001"), ("rules/fit.yaml", "E002")]

    @pytest.mark.parametrize("name", ["min_multi_nodes", "workload_fraction_max"])
    def test_a_bad_parameter_value_stops_the_checks_that_read_it(self, rules_copy, name):
        """A parameter whose value is not a number is one E031: no E206 from ranges computed with a stand-in."""
        text = (rules_copy / "parameters.yaml").read_text()
        start = text.index("value: ", text.index(f"  {name}:"))
        end = text.index("\n", start)
        (rules_copy / "parameters.yaml").write_text(text[:start] + "value: two" + text[end:])
        assert [d.code for d in check_directory(rules_copy).diagnostics] == ["E031"]

    def test_a_missing_rule_id_keeps_its_conclusions_known(self, rules_copy):
        """A rule without an id is E004, and the rules reading what it concludes are not told the name is
        unknown."""
        _edit(rules_copy / "fit.yaml", "  - id: node-capacity\n    heuristics:", "  - heuristics:")
        lines = _lines(check_directory(rules_copy))
        assert len(lines) == 1 and "E004: a rule needs an 'id' in kebab-case" in lines[0], lines

    def test_malformed_heuristics_are_not_also_missing(self, rules_copy):
        """`heuristics: 405` is E014 alone, not also "must cite at least one heuristic"."""
        _edit(rules_copy / "fit.yaml", "heuristics: [H-FIT-CAPACITY]", "heuristics: 405")
        assert [d.code for d in check_directory(rules_copy).diagnostics] == ["E014"]


@pytest.mark.parametrize("name, kind", [("gpus_per_node", "fact"), ("concurrency", "fact"),
                                        ("node_vram_gb", "figure")])
def test_a_parameter_named_like_a_fact_is_a_warning_at_it(rules_copy, name, kind):
    """Issue 30: a parameter named like a fact passed without a word; the rules read it in place of the fact
    while the sizing and the answer read the fact. W309 at its name in parameters.yaml."""
    path = rules_copy / "parameters.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text + f"  {name}:\n    value: 4\n    unit: GPUs\n", encoding="utf-8")
    line = text.count("\n") + 1
    found = [str(d) for d in check_directory(rules_copy).diagnostics]
    assert found == [f"rules/parameters.yaml:{line}:3: W309: parameter '{name}' has the name of a {kind}: the rules "
                     f"that name '{name}' read this parameter's 4, the sizing and the answer read the {kind}'s value; "
                     "give the parameter a name of its own"], found


class TestPathsOpenFromHere:
    """Issue 30: diagnostics named files relative to the rule directory's parent (`pm-rules/x.yaml`), which an
    editor cannot open from the working directory; now as ruff prints them: relative to it when the file is
    under it, else absolute."""

    @pytest.fixture
    def project(self, tmp_path, rules_copy) -> Path:
        _edit(rules_copy / "fit.yaml", "    priority: 110\n", "    priority: 110\n    colour: red\n")
        (tmp_path / "elsewhere").mkdir()
        return tmp_path

    @pytest.mark.parametrize("cwd, shown", [("elsewhere", "{rules}/fit.yaml"), (".", "rules/fit.yaml"),
                                            ("rules", "fit.yaml")])
    def test_rules_check_prints_a_path_that_opens_from_here(self, project, monkeypatch, cwd, shown):
        monkeypatch.chdir(project / cwd)
        rules = project / "rules"
        for fmt in ("text", "json"):
            result = CliRunner().invoke(main, ["rules", "check", "--rules", str(rules), "--format", fmt])
            assert result.exit_code == 2, result.output
            expected = shown.format(rules=rules)
            if fmt == "text":
                assert result.output.startswith(f"{expected}:21:5: E002: unknown key 'colour'"), result.output
            else:
                import json
                found = json.loads(result.output[result.output.index("["):])
                assert [d["file"] for d in found] == [expected]
            assert (project / cwd / expected).is_file()

    def test_another_command_prints_them_so_too(self, project, monkeypatch):
        """A command that loads a rule set with errors (here `rules list`) names the file the same way."""
        monkeypatch.chdir(project / "elsewhere")
        result = CliRunner().invoke(main, ["rules", "list", "--rules", str(project / "rules")])
        assert result.exit_code == 2
        assert result.output.startswith(f"error: {project / 'rules' / 'fit.yaml'}:21:5: E002: "), result.output

    def test_rule_places_in_listings_and_test_failures_open_from_here(self, tmp_path, monkeypatch):
        """`rules list` named each rule at `rules/fit.yaml:5:5` and a failing scenario's deciding rule at
        `rules/flow.yaml:N` (from the rule directory's parent) wherever the command ran; now as diagnostics are."""
        import json
        rules = Path(shutil.copytree(bundled("rules"), tmp_path / "project" / "rules"))
        (tmp_path / "elsewhere").mkdir()
        scenario = tmp_path / "elsewhere" / "wrong.yaml"
        scenario.write_text("- name: 70B chat on one node, expected on two\n  facts: {task: inference, model: "
                            "llama-3.1-70b, concurrency: 48, latency: production, tenancy: single}\n"
                            "  expect: {nodes: 2}\n", encoding="utf-8")
        monkeypatch.chdir(tmp_path / "elsewhere")
        listed = CliRunner().invoke(main, ["rules", "list", "--rules", str(rules)])
        assert listed.exit_code == 0, listed.output
        places = [line.split()[-1] for line in listed.output.splitlines()[1:]]
        assert places and all(place.startswith(f"{rules}/") for place in places), places[:3]
        assert all(Path(place.rsplit(":", 2)[0]).is_file() for place in places)
        tested = CliRunner().invoke(main, ["test", "wrong.yaml", "--rules", str(rules), "--format", "json"])
        assert tested.exit_code == 1, tested.output
        decided = json.loads(tested.output)["failures"][0]["decided_by"]
        assert decided and all(f"({rules}/" in item for item in decided), decided
        text = CliRunner().invoke(main, ["test", "wrong.yaml", "--rules", str(rules), "--no-coverage"]).output
        assert f"(decided by {decided[0].split(' (')[0]} ({rules}/" in text, text
