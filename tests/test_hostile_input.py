"""Hostile input and hostile files (issue 9): refused in bounded time with one printable line, nothing left behind."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kentino_expert import yamlsrc
from kentino_expert.domain.workload import (
    MAX_TOKEN_TEXT,
    TOKEN_COUNT_SCHEMA,
    Workload,
    parse_token_count,
    read_facts,
    validate_facts,
)
from kentino_expert.errors import InputError, printable
from kentino_expert.paths import bundled
from kentino_expert.yamlsrc import MAX_DEPTH, MAX_EXPANDED, MAX_NODES, YamlSourceError, load_yaml

ROOT = Path(__file__).resolve().parent.parent
ATTACK_SECONDS = 60  # a hard stop for an attack; the fixed code answers in well under a second
HUGE_INT = "9" * 5000  # past Python's 4,300-digit limit on integer text
RAW_CONTROLS = ("\x1b", "\x07", "\x00", "\x85", "\u2028", "\u202e")


def run_cli(*args, stdin: str | None = None, env: dict | None = None, cwd: Path = ROOT, timeout=ATTACK_SECONDS):
    """`kentino-expert ARGS` as a user runs it, killed if it runs past `timeout`."""
    return subprocess.run([sys.executable, "-m", "kentino_expert", *map(str, args)], input=stdin, text=True,
                          capture_output=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout)


def assert_one_line_error(result, *fragments: str) -> str:
    """Exit 2, nothing on stdout, exactly one printable `error:` line holding every fragment."""
    assert result.returncode == 2, (result.returncode, result.stdout[-500:], result.stderr[-2000:])
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert lines[0].isprintable(), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture()
def rules_copy(tmp_path) -> Path:
    """A writable copy of the bundled rules."""
    return Path(shutil.copytree(bundled("rules"), tmp_path / "rules"))


class TestTokenCounts:
    """Token counts parse in linear time, ASCII only, and a refusal names the field."""

    def test_whitespace_attack_through_the_cli(self):
        """'1' + 400,000 spaces + 'x' (quadratic before: 100,000 held the server 67 s) is refused at once."""
        facts = {"task": "pretraining", "model": "llama-3.1-8b", "training_tokens": "1" + " " * 400_000 + "x"}
        result = run_cli("recommend", "-", stdin=json.dumps(facts), timeout=ATTACK_SECONDS / 2)
        assert_one_line_error(result, "training_tokens", f"longer than {MAX_TOKEN_TEXT} characters")

    @pytest.mark.parametrize("field", ["training_tokens", "corpus_tokens"])
    def test_long_text_is_refused_before_any_pattern(self, field):
        """Text past the cap is refused by its length, whatever it holds."""
        with pytest.raises(InputError) as caught:
            validate_facts({"task": "pretraining", field: "1" + " " * 50_000 + "x"})
        assert caught.value.field == field and f"longer than {MAX_TOKEN_TEXT} characters" in caught.value.message

    @pytest.mark.parametrize("text", ["٣٠٠B", "300B\x1f", "３００B", "\t300B", "300B\n", "300\u00a0B", "1e9", "B",
                                      "300BB", "300.B", "-300B", "+300B", "300 B x", "3 0 0B", ""])
    def test_non_ascii_digits_and_odd_whitespace_are_refused(self, text):
        """Unicode digits, control characters, tabs, newlines and other malformed counts are refused."""
        with pytest.raises(InputError) as caught:
            validate_facts({"task": "pretraining", "training_tokens": text})
        assert caught.value.field == "training_tokens"
        assert caught.value.render().isprintable()

    @pytest.mark.parametrize("value,expected", [
        ("300B", 3e11), ("15T", 1.5e13), ("15t", 1.5e13), ("2G", 2e9), ("500k", 5e5), ("7M", 7e6),
        (" 300 B ", 3e11), ("300 B", 3e11), ("1.5T", 1.5e12), ("  42  ", 42.0), ("0.5k", 500.0),
        (5e9, 5e9), (300_000_000_000, 3e11), ("1" * MAX_TOKEN_TEXT, None),
    ])
    def test_valid_forms_still_parse(self, value, expected):
        """Numbers, suffixed strings and plain spaces around them parse as before (40 ones is past the bound)."""
        if expected is None:
            with pytest.raises(ValueError, match="up to"):
                parse_token_count(value)
        else:
            assert parse_token_count(value) == expected

    def test_integer_beyond_any_float_is_refused_not_raised(self):
        """A 400-digit integer is an InputError on training_tokens, not an OverflowError traceback."""
        with pytest.raises(InputError) as caught:
            read_facts('{"task": "pretraining", "training_tokens": 1' + "0" * 400 + "}")
        assert caught.value.field == "training_tokens"

    def test_schema_pattern_agrees_with_the_parser(self):
        """The JSON Schema's pattern and maxLength accept and refuse what the parser does."""
        import re
        string_schema = TOKEN_COUNT_SCHEMA["anyOf"][1]
        assert string_schema["maxLength"] == MAX_TOKEN_TEXT
        pattern = re.compile(string_schema["pattern"].replace("$", r"\Z"))  # ECMA-262 '$' is the very end
        for text in ["300B", " 300 B ", "1.5T", "42", "٣٠٠B", "300B\x1f", "\t300B", "1e9", "300.B", "B"]:
            try:
                parse_token_count(text)
                accepted = True
            except ValueError:
                accepted = False
            assert bool(pattern.search(text)) == accepted, text


FORGED = "x\x1b[31mred\x07\nerror: forged"


NUMBER_FACTS = [name for name, info in Workload.model_fields.items() if info.annotation in (int | None, float | None)]


class TestFlagsAreNotNumbers:
    """true/false given for a number fact is refused naming the fact; pydantic alone would read them as 1 and 0."""

    @pytest.mark.parametrize("flag", [True, False])
    @pytest.mark.parametrize("fact", NUMBER_FACTS)
    def test_every_number_fact(self, fact, flag):
        """Each number fact of the input contract refuses either flag."""
        with pytest.raises(InputError, match="expected a number|token count") as caught:
            validate_facts({"task": "inference", fact: flag})
        assert caught.value.field == fact

    def test_the_proposed_builds_counts(self):
        """A proposed build's node count is a number too."""
        with pytest.raises(InputError, match="expected a number, not true") as caught:
            validate_facts({"task": "inference", "proposed_build": {"nodes": True, "gpus_per_node": 8}})
        assert caught.value.field == "proposed_build.nodes"

    def test_through_the_cli(self):
        """`params_b: true` in a facts file is one error line naming params_b, exit 2."""
        assert_one_line_error(run_cli("recommend", "-", stdin="task: inference\nparams_b: true\n"),
                              "params_b", "expected a number, not true")


class TestPrintableErrors:
    """Error text quotes the input with control characters escaped, one line per error."""

    def test_forged_line_through_the_cli(self):
        """ESC, BEL and a newline inside `model` give one stderr line with the characters escaped."""
        result = run_cli("recommend", "-", stdin=json.dumps({"task": "inference", "model": FORGED}))
        line = assert_one_line_error(result, "model", r"x\x1b[31mred\x07\nerror: forged")
        assert line.count("error:") == 2  # the prefix, and the escaped text that tried to forge a line

    def test_forged_text_through_the_library(self, expert):
        """InputError.render(), str() and .message carry no raw control character."""
        with pytest.raises(InputError) as caught:
            expert.recommend({"task": "inference", "model": FORGED})
        for text in (caught.value.render(), str(caught.value), caught.value.message):
            assert text.isprintable() and r"\x1b[31mred\x07\n" in text

    def test_unknown_key_is_escaped_as_the_field(self):
        """An unknown fact whose name holds control characters is named escaped."""
        with pytest.raises(InputError) as caught:
            validate_facts({"task": "inference", "mo\x1bdel\u2028": 1})
        assert caught.value.field == r"mo\x1bdel\u2028" and caught.value.render().isprintable()

    def test_a_long_unknown_key_is_clipped(self):
        """A megabyte-long unknown fact is quoted by its first 40 characters, not echoed whole (a 422 as big as
        the request)."""
        with pytest.raises(InputError) as caught:
            validate_facts({"task": "inference", "a" * 900_000: 1})
        assert caught.value.field == "a" * 40 + "..." and len(caught.value.render()) < 100

    @pytest.mark.parametrize("character", RAW_CONTROLS)
    def test_printable_escapes_every_non_printable(self, character):
        """C0, C1, NUL, line separators and bidi overrides become escapes; ordinary text is kept."""
        text = printable(f"ščť {character} 70b")
        assert text.isprintable() and text.startswith("ščť ") and text.endswith(" 70b")
        assert printable(text) == text  # escaping twice changes nothing

    def test_http_422_messages_are_escaped(self, tmp_path):
        """The service's 422 for a hostile model name or duplicate key carries no raw control character."""
        pytest.importorskip("fastapi", reason="the HTTP service needs fastapi")
        pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")
        from fastapi.testclient import TestClient

        from kentino_expert.decisions.connect import open_log
        from kentino_expert.service.app import create_app
        bodies = [json.dumps({"task": "inference", "model": FORGED}),
                  '{"task": "inference", "a\\u001b\\n": 1, "a\\u001b\\n": 2}']
        with open_log(tmp_path / "d.db") as log, TestClient(create_app(log=log), base_url="http://localhost") as client:
            for body in bodies:
                response = client.post("/v1/recommend", content=body, headers={"content-type": "application/json"})
                detail = response.json()["detail"][0]
                assert response.status_code == 422 and r"\x1b" in detail["message"], detail
                assert detail["message"].isprintable() and detail["field"].isprintable()

    def test_rule_file_diagnostics_are_escaped(self, rules_copy):
        """A template field holding ESC, BEL and a newline is reported on one printable line."""
        fit = rules_copy / "fit.yaml"
        text = fit.read_text()
        assert 'because: "One node holds {gpus_per_node}' in text
        fit.write_text(text.replace("{gpus_per_node}", r"{gpus\e\a\nerror: forged}", 1))
        result = run_cli("rules", "check", "--rules", rules_copy)
        assert result.returncode == 2 and all(line.isprintable() for line in result.stdout.splitlines())
        assert [line for line in result.stdout.splitlines() if "E106" in line][0].count(r"\x1b\x07\n") == 1

    @pytest.mark.parametrize("loader", ["CSafeLoader", "SafeLoader"])
    @pytest.mark.parametrize("text,where,fragment", [
        ("task: inference\nmodel: a\x07b\n", "2:9", "unacceptable character #x0007"),
        ("task: inference\nmodel: ščť\x07\n", "2:11", "unacceptable character #x0007"),
        ("a:\n  b: 1\n c: 2\n", "3:2", "indentation: line 3 is indented 1 space"),
        ("a: [1, 2\nb: 3\n", "1:4", "an unclosed ["),
        ("a: &x 1\nb: &x 2\n", "2:4", "first occurrence at 1:4"),
    ])
    def test_yaml_errors_are_one_located_line(self, monkeypatch, loader, text, where, fragment):
        """PyYAML's two-line problem/context messages become one line, with libyaml and without."""
        if not hasattr(yaml, loader):
            pytest.skip(f"this PyYAML has no {loader}")
        monkeypatch.setattr(yamlsrc, "_LOADER", getattr(yaml, loader))
        with pytest.raises(YamlSourceError) as caught:
            load_yaml(text, "f.yaml")
        assert f"{caught.value.location.line}:{caught.value.location.column}" == where
        assert fragment in caught.value.message and "\n" not in caught.value.message

    def test_undecodable_stdin_is_one_line(self):
        """Bytes that are not UTF-8 on stdin are a one-line error, not a libyaml traceback."""
        result = subprocess.run([sys.executable, "-m", "kentino_expert", "recommend", "-"], input=b"\xff\xfe task",
                                capture_output=True, cwd=ROOT, timeout=ATTACK_SECONDS)
        assert result.returncode == 2 and result.stdout == b""
        assert result.stderr.decode().splitlines() == ["error: <stdin>: cannot read: not UTF-8 text (byte 1)"]

    def test_lone_surrogate_in_yaml_text(self):
        """A lone surrogate in the text given to the loader is a located error."""
        with pytest.raises(YamlSourceError, match="lone surrogate") as caught:
            load_yaml("a: 1\nb: x\ud800\n", "f.yaml")
        assert (caught.value.location.line, caught.value.location.column) == (2, 5)


class TestHugeIntegers:
    """An integer past 4,300 digits is a located one-line error (exit 2) everywhere a YAML file is read."""

    def test_recommend(self, tmp_path):
        """In a facts file."""
        facts = tmp_path / "facts.yaml"
        facts.write_text(f"task: inference\nconcurrency: {HUGE_INT}\n")
        assert_one_line_error(run_cli("recommend", facts), f"{facts}:2:14:", "more than 4300 digits")

    def test_rules_check_and_serve(self, rules_copy):
        """In parameters.yaml: `rules check` reports that E001 alone, `serve` does not start."""
        parameters = rules_copy / "parameters.yaml"
        text = parameters.read_text()
        assert "    value: 0.70\n" in text
        parameters.write_text(text.replace("    value: 0.70\n", f"    value: {HUGE_INT}\n", 1))
        result = run_cli("rules", "check", "--rules", rules_copy)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        first = result.stdout.splitlines()[0]
        assert first.endswith("parameters.yaml:6:12: E001: an integer with more than 4300 digits")
        summary = result.stdout.splitlines()[1:]
        assert len(summary) == 1 and summary[0].startswith("1 error(s), 0 warning(s) (rules: ")
        served = run_cli("serve", "--rules", rules_copy, "--port", "0", "--db", rules_copy / "d.db")
        assert_one_line_error(served, "parameters.yaml:6:12: E001: an integer with more than 4300 digits")

    def test_scenario_file(self, tmp_path):
        """In a scenario file run by `kentino-expert test`."""
        scenarios = tmp_path / "s.yaml"
        scenarios.write_text(f"- name: big\n  facts: {{task: inference, concurrency: {HUGE_INT}}}\n"
                             "  expect: {kind: single-node}\n")
        assert_one_line_error(run_cli("test", scenarios), f"{scenarios}:2:41:", "more than 4300 digits")

    @pytest.mark.parametrize("text", ["x: 0x" + "f" * 4000, "x: 0o" + "7" * 5000, "x: -0" + "7" * 5000,
                                      "x: !!int 0x" + "f" * 4000], ids=["hex", "octal", "leading-zero", "tagged"])
    def test_other_spellings(self, text):
        """Hex, octal and zero-led (decimal in YAML 1.2) integers are bounded the same way."""
        with pytest.raises(YamlSourceError, match="more than 4300 digits"):
            load_yaml(text)

    @pytest.mark.parametrize("tail", [":59" * 330_000, "_000" * 200_000], ids=["base-60", "underscored"])
    def test_yaml_1_1_integers_are_text(self, tail):
        """A megabyte of base-60 or underscored digits (integers in YAML 1.1, quadratic to build) is text in
        YAML 1.2: refused at once by the CLI, in one line naming the fact."""
        text = "task: inference\nconcurrency: 1" + tail + "\n"
        assert_one_line_error(run_cli("recommend", "-", stdin=text), "concurrency", "valid integer")

    @pytest.mark.parametrize("text,fragment", [("x: !!int xyz", "not a valid int"),
                                               ("x: !!float abc", "not a valid float"),
                                               ("x: !!timestamp 2020-13-01", "not a valid timestamp")])
    def test_other_constructor_failures(self, text, fragment):
        """A tagged value its tag cannot take is a located error, not a ValueError."""
        with pytest.raises(YamlSourceError, match=fragment) as caught:
            load_yaml(text, "f.yaml")
        assert str(caught.value.location) == "f.yaml:1:4"

    def test_json_integer(self):
        """In JSON facts the message says what is wrong, not how to raise Python's limit."""
        with pytest.raises(InputError, match="a number has more than 4300 digits") as caught:
            read_facts('{"task": "inference", "concurrency": ' + HUGE_INT + "}")
        assert "set_int_max_str_digits" not in caught.value.message

    def test_reload_is_refused_with_the_error(self, rules_copy, tmp_path):
        """A reload onto such a parameters.yaml is refused (409) and /readyz shows the error."""
        pytest.importorskip("fastapi", reason="the HTTP service needs fastapi")
        pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")
        from fastapi.testclient import TestClient

        from kentino_expert.decisions.connect import open_log
        from kentino_expert.expert import Expert
        from kentino_expert.service.app import create_app
        with open_log(tmp_path / "d.db") as log, \
                TestClient(create_app(expert_factory=lambda: Expert(rules_copy), log=log, admin_token="admin"),
                           base_url="http://localhost", headers={"authorization": "Bearer admin"}) as client:
            parameters = rules_copy / "parameters.yaml"
            parameters.write_text(parameters.read_text().replace("    value: 0.70\n", f"    value: {HUGE_INT}\n", 1))
            refused = client.post("/v1/admin/reload")
            assert refused.status_code == 409
            assert "4300 digits" in client.get("/readyz").json()["last_reload_error"]


def _alias_bomb(levels: int = 7) -> str:
    lines = ['l0: &l0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"l{n}: &l{n} [" + ",".join([f"*l{n - 1}"] * 9) + "]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


class TestDocumentLimits:
    """Each YAML limit is reported as itself, with its value."""

    def test_alias_bomb(self):
        """Aliases expanding past the limit are named as aliases."""
        with pytest.raises(YamlSourceError) as caught:
            load_yaml(_alias_bomb())
        assert f"aliases expand the document past {MAX_EXPANDED:,} values" in caught.value.message

    def test_large_flat_rule_file(self, rules_copy):
        """A one-file rule set of 30,000 rules (450,000 values), with no alias, is too large, not a bomb."""
        rules = "".join(f"- {{id: r{i}, heuristics: [H-FIT-CAPACITY], when: [exists params_b], "
                        f"then: {{conclude: {{c{i}: true}}}}}}\n" for i in range(30_000))
        (rules_copy / "huge.yaml").write_text("rules:\n" + rules)
        result = run_cli("rules", "check", "--rules", rules_copy)
        errors = [line for line in result.stdout.splitlines() if "E001" in line]
        assert result.returncode == 2 and len(errors) == 1, result.stdout[-2000:]
        assert f"document too large: more than {MAX_NODES:,} values" in errors[0] and "alias" not in errors[0]

    @pytest.mark.parametrize("text", [
        "a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
        "".join(" " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 1)) + " " * 200 + "x: 1\n"])
    def test_nesting(self, text):
        """Lists or mappings nested past the limit are named as nesting."""
        with pytest.raises(YamlSourceError, match=f"nests deeper than {MAX_DEPTH} levels"):
            load_yaml(text)

    def test_nesting_at_the_limit_loads(self):
        """Lists nested exactly to the limit still load, every level of them."""
        value, depth = load_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH), 0
        while value is not None:
            depth, value = depth + 1, (value[0] if value else None)
        assert depth == MAX_DEPTH

    def test_characters(self):
        """A document past the character limit is refused before it is parsed."""
        with pytest.raises(YamlSourceError, match=f"more than {yamlsrc.MAX_CHARACTERS:,} characters"):
            load_yaml("#" * (yamlsrc.MAX_CHARACTERS + 1))


def _limit_memory():  # in the child, before exec: an unbounded read fails at 1 GB instead of filling the machine
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


class TestUnboundedInput:
    """`recommend FILE|-` reads no more than its 1 MB limit: an endless source is refused at once, named."""

    def test_dev_zero_as_the_file(self):
        """/dev/zero as FILE is refused as too large, within the memory a read of 1 MB needs."""
        result = subprocess.run([sys.executable, "-m", "kentino_expert", "recommend", "/dev/zero"], text=True,
                                capture_output=True, cwd=ROOT, timeout=ATTACK_SECONDS, preexec_fn=_limit_memory)
        assert_one_line_error(result, "/dev/zero: input larger than 1 MB")

    def test_endless_stdin(self):
        """A generator that never stops writing to stdin is refused, not read until memory runs out."""
        endless = subprocess.Popen([sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('task: x\\n')"],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            result = subprocess.run([sys.executable, "-m", "kentino_expert", "recommend", "-"], stdin=endless.stdout,
                                    text=True, capture_output=True, cwd=ROOT, timeout=ATTACK_SECONDS,
                                    preexec_fn=_limit_memory)
        finally:
            endless.kill()
            endless.wait()
            endless.stdout.close()
        assert_one_line_error(result, "<stdin>: input larger than 1 MB")

    def test_one_byte_past_the_limit_on_stdin(self):
        """1,000,001 bytes on stdin are refused naming <stdin>; exactly 1,000,000 are read as facts."""
        assert_one_line_error(run_cli("recommend", "-", stdin="#" * 1_000_001), "<stdin>: input larger than 1 MB")
        result = run_cli("recommend", "-", stdin="task: inference\n" + "#" * (1_000_000 - 16))
        assert result.returncode == 0 and result.stdout.startswith("SINGLE-NODE"), result.stderr


def _git_checkout() -> bool:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode == 0


needs_git = pytest.mark.skipif(shutil.which("git") is None or not _git_checkout(),
                               reason="rules diff --base REV needs git and a git checkout")


class TestDiffBase:
    """`rules diff --base` never passes a value to git as an option and leaves no directory behind."""

    @needs_git
    def test_option_as_revision_is_refused(self, tmp_path):
        """--base=--output=FILE exits 2 with one line and leaves FILE as it was."""
        victim = tmp_path / "victim"
        victim.write_text("precious\n")
        result = run_cli("rules", "diff", f"--base=--output={victim}", env={"TMPDIR": str(tmp_path)})
        assert_one_line_error(result, "--base", "cannot start with '-'")
        assert victim.read_text() == "precious\n"

    @needs_git
    def test_unknown_revision(self, tmp_path):
        """A name that is no commit is one line naming --base."""
        assert_one_line_error(run_cli("rules", "diff", "--base", "HEAD:rules", env={"TMPDIR": str(tmp_path)}),
                              "--base 'HEAD:rules' is neither a directory nor a git revision")

    def test_a_broken_base_says_it_is_the_base(self, rules_copy):
        """An unreadable file in the --base rules is blamed on the base, not on rules/fit.yaml of the new set."""
        (rules_copy / "fit.yaml").write_bytes(b"\xff\xfe")
        result = run_cli("rules", "diff", "--base", rules_copy, ROOT / "tests" / "scenarios" / "reference.yaml")
        assert_one_line_error(result, f"error: base {rules_copy}: rules/fit.yaml:1:1: E001: not UTF-8 text")

    @needs_git
    def test_nothing_left_behind(self, tmp_path):
        """After `rules diff --base HEAD` the temporary directory holds nothing new."""
        scratch = tmp_path / "tmp"
        scratch.mkdir()
        result = run_cli("rules", "diff", "--base", "HEAD", "--rules", ROOT / "rules",
                         ROOT / "tests" / "scenarios" / "reference.yaml", env={"TMPDIR": str(scratch)})
        assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr
        assert list(scratch.iterdir()) == []

    @needs_git
    def test_removed_when_interrupted(self, tmp_path, monkeypatch):
        """The extracted base is removed when the block using it ends in KeyboardInterrupt."""
        from kentino_expert.authoring.rules_diff import checkout_rules
        monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
        with pytest.raises(KeyboardInterrupt), checkout_rules("HEAD", ROOT / "rules") as base:
            assert (base / "parameters.yaml").is_file()
            raise KeyboardInterrupt
        assert not base.exists() and list(tmp_path.iterdir()) == []

    @pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
    def test_rules_directory_named_like_an_option(self, tmp_path):
        """A committed rules directory called --output=x is read as a path, not as an option of git archive."""
        repo = tmp_path / "repo"
        rules = Path(shutil.copytree(bundled("rules"), repo / "--output=x"))
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"]
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "rules"]):
            subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True)
        scratch = tmp_path / "tmp"
        scratch.mkdir()
        result = run_cli("rules", "diff", "--base", "HEAD", f"--rules={rules}",
                         ROOT / "tests" / "scenarios" / "reference.yaml", env={"TMPDIR": str(scratch)})
        assert result.returncode == 0, result.stderr
        assert "0 of" in result.stdout and list(scratch.iterdir()) == [] and not (repo / "x").exists()
