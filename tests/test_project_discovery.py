"""Commands use the rules/ and knowledge/ of the checkout they run in, else the packaged ones, and say which."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kentino_expert
from kentino_expert.errors import KentinoError
from kentino_expert.paths import bundled, find_project, locate

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_PARENT = Path(kentino_expert.__file__).resolve().parent.parent
BAD_PRECISION = "E026: unknown precision 'fp16'"


@pytest.fixture(autouse=True)
def _no_directory_variables(monkeypatch):
    """The environment variables would win over what these tests set up."""
    monkeypatch.delenv("KENTINO_RULES", raising=False)
    monkeypatch.delenv("KENTINO_KNOWLEDGE", raising=False)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


class TestFindProject:
    """The walk up from the current directory, as ruff finds its configuration."""

    def test_nearest_project_file_wins_and_keys_are_relative_to_it(self, tmp_path):
        """From a subdirectory the nearest file counts, and its paths are read from its own directory."""
        _write(tmp_path / "kentino.toml", 'rules = "outer-rules"\n')
        _write(tmp_path / "inner" / "pyproject.toml", '[tool.kentino]\nrules = "policy"\n')
        (tmp_path / "inner" / "policy").mkdir()
        (tmp_path / "inner" / "deep").mkdir()
        assert locate("rules", start=tmp_path / "inner" / "deep") == tmp_path / "inner" / "policy"

    def test_pyproject_without_the_table_is_passed_over(self, tmp_path):
        """A pyproject.toml of another tool is not a Kentino project: the walk goes on upwards."""
        _write(tmp_path / "kentino.toml", 'knowledge = "facts"\n')
        (tmp_path / "facts").mkdir()
        _write(tmp_path / "sub" / "pyproject.toml", '[tool.ruff]\nline-length = 120\n')
        assert find_project(tmp_path / "sub").path == tmp_path / "kentino.toml"
        assert locate("knowledge", start=tmp_path / "sub") == tmp_path / "facts"

    def test_kentino_toml_wins_over_pyproject_in_one_directory(self, tmp_path):
        """Both files in one directory: kentino.toml is read (ruff's own file wins over pyproject.toml too)."""
        _write(tmp_path / "kentino.toml", 'rules = "a"\n')
        _write(tmp_path / "pyproject.toml", '[tool.kentino]\nrules = "b"\n')
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        assert locate("rules", start=tmp_path) == tmp_path / "a"

    def test_a_key_left_out_means_the_packaged_directory(self, tmp_path):
        """A project of rules only still uses the packaged knowledge."""
        _write(tmp_path / "kentino.toml", 'rules = "."\n')
        assert locate("knowledge", start=tmp_path) == bundled("knowledge")
        assert locate("rules", start=tmp_path) == tmp_path

    def test_outside_any_project_the_packaged_directories_answer(self, tmp_path):
        """No project file above: the packaged rules."""
        if find_project(tmp_path) is not None:
            pytest.skip(f"{find_project(tmp_path).path} above the temporary directory is a Kentino project")
        assert locate("rules", start=tmp_path) == bundled("rules")

    def test_option_then_environment_then_project(self, tmp_path, monkeypatch):
        """--rules beats KENTINO_RULES, which beats the project; paths come back absolute."""
        _write(tmp_path / "kentino.toml", 'rules = "project"\n')
        (tmp_path / "project").mkdir()
        monkeypatch.chdir(tmp_path)
        assert locate("rules") == tmp_path / "project"
        monkeypatch.setenv("KENTINO_RULES", "from-env")
        assert locate("rules") == tmp_path / "from-env"
        assert locate("rules", "given") == tmp_path / "given"

    @pytest.mark.parametrize("text, message", [
        ('rules = "missing"\n', "kentino.toml: rules = 'missing': no such directory"),
        ('rules = 3\n', "kentino.toml: rules must be a directory path (a string)"),
        ('rule = "rules"\n', "kentino.toml: unknown key rule (known: rules, knowledge) (did you mean 'rules'?)"),
        ('[x]\nrules = rules\n', "kentino.toml:2:9: invalid TOML: Invalid value"),
        ('rules = ', "kentino.toml:1:9: invalid TOML: Invalid value"),  # tomllib: "(at end of document)"
    ])
    def test_a_broken_project_file_is_an_error_naming_it(self, tmp_path, text, message):
        """A wrong project file is never silently skipped: it is an error naming the file (and line:col)."""
        _write(tmp_path / "kentino.toml", text)
        with pytest.raises(KentinoError) as error:
            locate("rules", start=tmp_path)
        assert str(error.value).startswith(str(tmp_path / message)) and "\n" not in str(error.value)

    def test_this_repository_is_a_project(self):
        """The checkout's pyproject.toml names its rules/ and knowledge/."""
        assert locate("rules", start=ROOT / "docs") == ROOT / "rules"
        assert locate("knowledge", start=ROOT / "docs") == ROOT / "knowledge"


@pytest.fixture()
def checkout(tmp_path) -> Path:
    """A copy of this checkout's project (pyproject.toml, rules/, knowledge/) with an invalid edit a PM might make."""
    target = tmp_path / "clone"
    for name in ("rules", "knowledge"):
        shutil.copytree(ROOT / name, target / name)
    shutil.copy(ROOT / "pyproject.toml", target / "pyproject.toml")
    rule_file = target / "rules" / "must-scale.yaml"
    text = rule_file.read_text()
    marker = "id: hyperscale-multi-tenant"
    head, tail = text.split(marker, 1)
    rule_file.write_text(head + marker + tail.replace("precision: fp8", "precision: fp16", 1))
    (target / "docs").mkdir()
    return target


def _installed_command(args, cwd: Path) -> subprocess.CompletedProcess:
    """`kentino-expert ARGS` as the installed command runs it: the package that is imported here (not one in
    the current directory, -P), whose packaged rules are this checkout's unedited ones."""
    env = {k: v for k, v in os.environ.items() if k not in ("KENTINO_RULES", "KENTINO_KNOWLEDGE")}
    env["PYTHONPATH"] = str(PACKAGE_PARENT)
    return subprocess.run([sys.executable, "-P", "-m", "kentino_expert", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


class TestCommandsInACheckout:
    """The product manager's trap: an installed command must check the checkout's edit, not the packaged copy."""

    def test_rules_check_inside_the_checkout_finds_the_edit(self, checkout):
        """From a subdirectory of the checkout, `rules check` reads its rules/, finds the error and names them."""
        result = _installed_command(["rules", "check"], checkout / "docs")
        assert result.returncode == 2
        line = next(number for number, text in enumerate(
            (checkout / "rules" / "must-scale.yaml").read_text().splitlines(), 1) if "precision: fp16" in text)
        assert f"rules/must-scale.yaml:{line}:20: {BAD_PRECISION}" in result.stdout
        assert result.stdout.splitlines()[-1] == \
            f"1 error(s), 0 warning(s) (rules: {checkout / 'rules'}, knowledge: {checkout / 'knowledge'})"

    def test_rules_check_outside_uses_the_packaged_rules(self, checkout, tmp_path):
        """Outside any checkout the packaged rules are checked, and named."""
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        if find_project(elsewhere) is not None:
            pytest.skip(f"{find_project(elsewhere).path} above the temporary directory is a Kentino project")
        result = _installed_command(["rules", "check"], elsewhere)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout == \
            f"0 error(s), 0 warning(s) (rules: {bundled('rules')}, knowledge: {bundled('knowledge')})\n"

    def test_explicit_rules_beat_the_checkout(self, checkout):
        """--rules inside the checkout reads the directory given."""
        result = _installed_command(["rules", "check", "--rules", str(ROOT / "rules")], checkout)
        assert result.returncode == 0
        assert f"(rules: {ROOT / 'rules'}, knowledge: {checkout / 'knowledge'})" in result.stdout

    def test_an_answer_names_the_directories_it_came_from(self, checkout):
        """The JSON answer carries both directories; the text answer's last line names the rules."""
        (checkout / "rules" / "must-scale.yaml").write_text((ROOT / "rules" / "must-scale.yaml").read_text())
        facts = str(ROOT / "examples" / "70b-chat.yaml")
        answer = json.loads(_installed_command(["recommend", facts, "--format", "json"], checkout / "docs").stdout)
        assert answer["ruleset"]["directory"] == str(checkout / "rules")
        assert answer["ruleset"]["knowledge_directory"] == str(checkout / "knowledge")
        text = _installed_command(["recommend", facts], checkout).stdout
        assert text.rstrip("\n").splitlines()[-1].endswith(f") from {checkout / 'rules'}")

    def test_a_broken_project_file_is_one_line_and_exit_2(self, checkout):
        """An unreadable [tool.kentino] table stops the command with one line naming the file."""
        pyproject = checkout / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace('rules = "rules"', 'rules = "rulez"'))
        result = _installed_command(["rules", "list"], checkout)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == (f"error: {pyproject}: tool.kentino.rules = 'rulez': no such directory "
                                 f"{checkout / 'rulez'}\n")


class TestEveryCommandNamesItsDirectories:
    """Each command that reads rules says which: text in its report, JSON in two keys, program output on stderr."""

    @pytest.fixture(scope="class")
    def copied(self, tmp_path_factory) -> Path:
        """A copy of the rules outside any project, so that the name shown can only come from --rules."""
        target = tmp_path_factory.mktemp("named") / "my-rules"
        shutil.copytree(ROOT / "rules", target)
        return target

    def _run(self, *args):
        from click.testing import CliRunner

        from kentino_expert.cli.main import main
        return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)

    @pytest.mark.parametrize("args", [["rules", "list"], ["rules", "examples"], ["schema", "facts"],
                                      ["rules", "check", "--format", "json"]])
    def test_program_output_names_them_on_stderr(self, copied, args):
        """A table, YAML, a schema or a JSON list keeps stdout clean and names the directories on stderr."""
        result = self._run(*args, "--rules", copied)
        assert result.exit_code == 0
        assert result.stderr == f"rules: {copied}, knowledge: {locate('knowledge')}\n"
        # a rule's file:line:col (rules list) opens from here; no other part of stdout names the directory
        assert str(copied) not in re.sub(r"\S+\.yaml:\d+:\d+", "", result.stdout)

    def test_json_reports_carry_them(self, copied):
        """`test` and `rules diff` JSON reports hold rules_directory and knowledge_directory."""
        scenarios = ROOT / "tests" / "scenarios" / "policy.yaml"
        for args in (["test", scenarios, "--format", "json"],
                     ["rules", "diff", "--base", ROOT / "rules", scenarios, "--format", "json"]):
            report = json.loads(self._run(*args, "--rules", copied).stdout)
            assert (report["rules_directory"], report["knowledge_directory"]) == (str(copied), str(locate("knowledge")))

    def test_text_reports_name_them(self, copied, tmp_path):
        """`test`, `rules diff`, `rules docs` and the Markdown answer say it in their own output."""
        named = f"rules: {copied}, knowledge: {locate('knowledge')}"
        scenarios = ROOT / "tests" / "scenarios" / "policy.yaml"
        assert self._run("test", scenarios, "--rules", copied).stdout.splitlines()[0] == named
        diff = self._run("rules", "diff", "--base", ROOT / "rules", scenarios, "--rules", copied).stdout
        assert diff.splitlines()[0] == f"base: {ROOT / 'rules'}, {named}"
        assert self._run("rules", "docs", tmp_path / "docs", "--rules", copied).stdout.endswith(f" ({named})\n")
        example = ROOT / "examples" / "70b-chat.yaml"
        markdown = self._run("recommend", example, "--format", "markdown", "--rules", copied)
        assert f"- rules: `{copied}`" in markdown.stdout and f"- knowledge: `{locate('knowledge')}`" in markdown.stdout
