"""Rule sets written to break the engine (issue 9): each attack is refused by `rules check`, `recommend`
and `serve` with a located one-line error and exit 2, in bounded time; generated hostile rule files are
refused with a located diagnostic or run every example inside the sandbox's limits."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hostile_rules as hostile
from kentino_expert.paths import bundled
from kentino_expert.rulecheck import check_directory
from kentino_expert.sandbox import Limits, check_in_sandbox

ATTACK_SECONDS = 90  # a hard timeout on each command run against an attack (they hung forever before)


def _run(*args, timeout=ATTACK_SECONDS, cwd=None, stdin=None):
    return subprocess.run([sys.executable, "-m", "kentino_expert", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, input=stdin)


def _attacks(tmp_path):
    """(name, rule directory, code, file:line:col) of each attack of the issue."""
    chain, always, overflow = hostile.or_chain(tmp_path), hostile.always_true(tmp_path, 65), hostile.overflow(tmp_path)
    return [("or-chain", chain, "E202", chain.at("params_b == 0", 9)),
            ("always-true-65", always, "E202", always.at("params_b > -1", 9)),
            ("overflow", overflow, "E206", overflow.at("params_b * 1e308", 9))]


@pytest.fixture(scope="module")
def attacks(tmp_path_factory):
    return _attacks(tmp_path_factory.mktemp("attacks"))


@pytest.mark.parametrize("index", range(3), ids=["or-chain", "always-true-65", "overflow"])
def test_rules_check_refuses_each_attack_at_its_column(attacks, index):
    """`rules check` exits 2 with one error, its code, at the file:line:col of the culprit."""
    _, rules, code, where = attacks[index]
    done = _run("rules", "check", "--rules", str(rules.directory), "--format", "json", cwd=rules.directory.parent)
    assert done.returncode == 2, done.stderr
    errors = [d for d in json.loads(done.stdout) if d["severity"] == "error"]
    assert [(d["code"], f"{d['file']}:{d['line']}:{d['column']}") for d in errors] == [(code, where)]


@pytest.mark.parametrize("index", range(3), ids=["or-chain", "always-true-65", "overflow"])
def test_recommend_refuses_each_attack_in_one_line(attacks, index):
    """`recommend --rules BAD` exits 2 with one line on stderr naming the culprit, instead of spinning."""
    _, rules, code, where = attacks[index]
    done = _run("recommend", "--rules", str(rules.directory), "-", stdin="task: inference\nmodel: llama-3.1-70b\n",
                cwd=rules.directory.parent)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and where in lines[0] and code in lines[0], done.stderr


@pytest.mark.parametrize("index", range(3), ids=["or-chain", "always-true-65", "overflow"])
def test_serve_refuses_to_start_on_each_attack(attacks, index, tmp_path):
    """`serve --rules BAD` exits 2 with one line naming the culprit instead of hanging at start."""
    _, rules, code, where = attacks[index]
    done = _run("serve", "--rules", str(rules.directory), "--port", "0", "--db", str(tmp_path / "d.db"),
                cwd=rules.directory.parent)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and where in lines[0] and code in lines[0], done.stderr


def test_always_true_or_beside_other_rules_now_answers(tmp_path):
    """55 always-true `or` terms (error 303 on every request before) get a fact group of their own: answers come."""
    rules = hostile.always_true(tmp_path, 55)
    done = _run("recommend", "--rules", str(rules.directory), "--format", "json", "-",
                stdin="task: inference\nmodel: llama-3.1-70b\n")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert "always-true-or" in [step["rule"] for step in answer["trace"]]
    assert answer["recommendation"]["kind"] == "single-node"


def test_two_stacked_always_true_ors_are_error_303_refused(tmp_path):
    """Two always-true `or`s of 40 in one rule would leave ~80 conditions pending (error 303): E203 at the first."""
    first = " or ".join(f"params_b > -{i + 1}" for i in range(40))
    second = " or ".join(f"concurrency > -{i + 1}" for i in range(40))
    rules = hostile.hostile_dir(tmp_path, "stacked", [hostile.rule_text("stacked-ors", f"({first}) and ({second})")])
    report = check_directory(rules.directory)
    assert [(d.code, str(d.location)) for d in report.errors] == [("E203", rules.at("params_b > -1", 9))]


def test_chained_ors_that_multiply_are_refused(tmp_path):
    """Seven groups of three always-true alternatives walk 3^7 paths per fact: E204, not seconds per request."""
    group = "(params_b > -1 or params_b > -2 or params_b > -3)"
    rules = hostile.hostile_dir(tmp_path, "chained", [hostile.rule_text("chained-ors", " and ".join([group] * 7))])
    report = check_directory(rules.directory)
    assert [(d.code, str(d.location)) for d in report.errors] == [("E204", rules.at("params_b > -1", 9))]


def test_sixteen_or_groups_are_refused(tmp_path):
    """A rule whose pattern holds 16 and/or groups (error 113 when built) is E205."""
    terms = " and ".join(f"(concurrency == {i} or concurrency == {i + 100})" for i in range(15))
    rules = hostile.hostile_dir(tmp_path, "groups", [hostile.rule_text("many-groups", terms)])
    assert [d.code for d in check_directory(rules.directory).errors] == ["E205"]


def test_huge_but_finite_recommendation_answers(tmp_path):
    """`params_b * 1e300` is finite over params_b's range: it passes, and the answer carries the whole number."""
    rules = hostile.hostile_dir(tmp_path, "huge", [hostile.rule_text(
        "huge-nodes", "concurrency == 12345", 1, "params_b * 1e300",
        "{task: inference, model: llama-3.1-70b, concurrency: 12345}")])
    assert check_directory(rules.directory).errors == []
    done = _run("recommend", "--rules", str(rules.directory), "--format", "json", "-",
                stdin="task: inference\nmodel: llama-3.1-70b\nconcurrency: 12345\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["recommendation"]["nodes"] == int(70.6 * 1e300)


# -- parameters.yaml: the sizing's own parameters have a range, and every parameter is a finite number ---

@pytest.mark.parametrize("name,value,allowed", [
    ("max_ib_cluster_nodes", "0", "a whole number from 1 to 4096"),
    ("max_ib_cluster_nodes", "2.5", "a whole number from 1 to 4096"),
    ("min_multi_nodes", "-1", "a whole number from 1 to 4096"),
    ("full_node_gpus", "17", "a whole number from 1 to 16"),
    ("training_fraction_max", "0", "a fraction above 0 and at most 1"),
    ("weights_fraction_max", "1.5", "a fraction above 0 and at most 1"),
    ("workload_fraction_max", "-0.9", "a fraction above 0 and at most 1")])
def test_a_sizing_parameter_outside_its_range_is_one_error_at_its_value(tmp_path, name, value, allowed):
    """0, -1 or 2.5 nodes, a fraction of 0 or 1.5: accepted silently once (2.5 truncated by int()); now one
    error at the value naming the parameter and what it may be."""
    bad = hostile.bad_parameter(tmp_path, name, value)
    errors = [str(d) for d in check_directory(bad.directory).errors]
    assert len(errors) == 1 and errors[0].startswith(f"{bad.where}: E036: parameter '{name}'"), errors
    assert allowed in errors[0], errors


@pytest.mark.parametrize("name,value", [("max_ib_cluster_nodes", "1000000"), ("max_ib_cluster_nodes", "1e308"),
                                        ("full_node_gpus", "1e308")])
def test_a_huge_sizing_parameter_is_refused_at_load_in_one_line(tmp_path, name, value):
    """`recommend` loads without the sandbox: it once spun for minutes (or ran out of memory) sizing a unit
    for every node count up to max_ib_cluster_nodes, before any check named the parameter."""
    bad = hostile.bad_parameter(tmp_path, name, value)
    done = _run("recommend", "--rules", str(bad.directory), "-", stdin="task: inference\nmodel: llama-3.1-70b\n",
                timeout=60)  # run from here: from elsewhere `-m kentino_expert` may import another copy
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and bad.where in lines[0] and "E036" in lines[0] and name in lines[0], done.stderr


@pytest.mark.parametrize("value,meant", [("100,000", "100000"), ("100_000", "100000"), ("70%", "0.7"),
                                         ("2.5 %", "0.025")])
def test_a_parameter_written_with_separators_gets_the_number_as_suggestion(tmp_path, value, meant):
    """`value: 100,000` is text in YAML 1.2: the E031 at it offers the number it was meant to be."""
    bad = hostile.bad_parameter(tmp_path, "hyperscale_qps", f"'{value}'")
    errors = [str(d) for d in check_directory(bad.directory).errors]
    assert errors == [f"{bad.where}: E031: parameter 'hyperscale_qps' needs a finite numeric 'value' (did you "
                      f"mean '{meant}'?)"], errors


@pytest.mark.parametrize("name", ["max_ib_cluster_nodes", "hyperscale_qps"])
@pytest.mark.parametrize("value", [".nan", ".inf", "1" + "0" * 400], ids=["nan", "inf", "401-digits"])
def test_a_parameter_that_is_no_finite_number_is_one_error_at_its_value(tmp_path, name, value):
    """NaN, infinity or an integer beyond a double once passed the reading and gave dozens of errors in
    Python's words, blamed on the rules' examples or on every use of the parameter."""
    bad = hostile.bad_parameter(tmp_path, name, value)
    errors = [str(d) for d in check_directory(bad.directory).errors]
    assert errors == [f"{bad.where}: E031: parameter '{name}' needs a finite numeric 'value'"], errors


def test_a_rule_file_that_is_not_utf8_is_one_error_at_the_byte(tmp_path):
    """A Latin-1 byte in a rule file is E001 at its line and column, as in a knowledge file (it was an error
    with no line, quoting Python's byte offset)."""
    directory = tmp_path / "rules"
    shutil.copytree(bundled("rules"), directory)
    path = directory / "flow.yaml"
    lines = path.read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if b"because:" in line)
    column = lines[at].index(b"because:") + len(b"because: ") + 1
    lines[at] = lines[at][:column - 1] + b"\xe9" + lines[at][column - 1:]
    path.write_bytes(b"\n".join(lines))
    errors = [str(d) for d in check_directory(directory).errors]
    assert len(errors) == 1 and errors[0].startswith(f"rules/flow.yaml:{at + 1}:{column}: E001: not UTF-8 text: "
                                                     "byte 0xe9"), errors


# -- generated hostile rule files ---------------------------------------------------------------------

_NUMBERS = ["params_b", "concurrency", "context_tokens", "qps", "weights_fraction_fp8", "node_vram_gb"]
_CONSTANTS = st.sampled_from([0, 1, -1, 7, 1e-300, 1e300, 1.7e308, -1.7e308, 2 ** 70, 123456789012345678901234567890])
_OPS = st.sampled_from(["==", "!=", ">", ">=", "<", "<="])


def _literal(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


@st.composite
def _term(draw):
    return f"{draw(st.sampled_from(_NUMBERS))} {draw(_OPS)} {_literal(draw(_CONSTANTS))}"


@st.composite
def _condition(draw):
    shape = draw(st.sampled_from(["or-chain", "and-chain", "nested", "always-true", "chained-ors", "mixed"]))
    if shape == "or-chain":
        return " or ".join(draw(st.lists(_term(), min_size=1, max_size=600)))
    if shape == "and-chain":
        return " and ".join(draw(st.lists(_term(), min_size=1, max_size=400)))
    if shape == "nested":
        depth = draw(st.integers(1, 45))
        return "(" * depth + draw(_term()) + ")" * depth
    if shape == "always-true":
        name = draw(st.sampled_from(_NUMBERS[:4]))
        return " or ".join(f"{name} > -{i + 1}" for i in range(draw(st.integers(1, 300))))
    if shape == "chained-ors":
        width, groups = draw(st.integers(1, 5)), draw(st.integers(1, 20))
        return " and ".join("(" + " or ".join(f"params_b > -{i + 1}" for i in range(width)) + ")"
                            for _ in range(groups))
    return " and ".join("(" + " or ".join(draw(st.lists(_term(), min_size=1, max_size=8))) + ")"
                        for _ in range(draw(st.integers(1, 18))))


@st.composite
def _hostile_files(draw):
    rules = [hostile.rule_text(f"hostile-{i}", draw(_condition())) for i in range(draw(st.integers(1, 70)))]
    if draw(st.booleans()):  # huge recommend arithmetic, fired by its own example
        factors = draw(st.lists(_CONSTANTS.map(_literal), min_size=1, max_size=4))
        op = draw(st.sampled_from([" * ", " / ", " + ", " - "]))
        rules.append(hostile.rule_text("hostile-arithmetic", "concurrency == 12345", 1,
                                       "params_b" + op + op.join(factors),
                                       "{task: inference, model: llama-3.1-70b, concurrency: 12345}"))
    return rules


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                  HealthCheck.function_scoped_fixture])
@given(rules=_hostile_files())
def test_generated_hostile_rules_are_refused_where_they_are_or_run(tmp_path, rules):
    """Each generated hostile set is refused with located errors (file:line:col in the hostile file), or the
    sandboxed load builds it and answers every rule's example within the limit."""
    directory = hostile.hostile_dir(tmp_path, "generated", rules)
    report = check_in_sandbox(directory.directory, limits=Limits(seconds=60))
    for error in report.errors:
        assert error.location.file == directory.display and error.location.line > 0, str(error)
        assert error.code != "E207" or "example" in error.message, str(error)  # no hang, no crash


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                  HealthCheck.function_scoped_fixture])
@given(rules=_hostile_files())
def test_what_check_accepts_the_engine_runs(tmp_path, rules):
    """Keep only the generated rules `rules check` accepts: the sandbox then builds the set and answers every
    example within its limits, without one error (a hang, a crash or error 303 would be an E207)."""
    benign = hostile.rule_text("benign", "params_b > 1")
    directory = hostile.hostile_dir(tmp_path, "generated", rules + [benign])  # checked as it will be run
    errors = check_directory(directory.directory).errors
    refused = {d.rule for d in errors}
    if any("distinct names" in d.message for d in errors):  # a limit of the whole set, blamed on its first rule:
        refused |= {text.split("\n", 1)[0].removeprefix("  - id: ") for text in rules}  # none of it is accepted
    kept = [text for text in rules if text.split("\n", 1)[0].removeprefix("  - id: ") not in refused]
    directory = hostile.hostile_dir(tmp_path, "accepted", kept + [benign])
    report = check_in_sandbox(directory.directory, limits=Limits(seconds=60))
    assert report.errors == [], [str(d) for d in report.errors]


def _many_names(root, writers: int, readers: int):
    """The bundled rules plus zz-names.yaml: `writers` rules each concluding a name of its own, and `readers`
    rules each reading one of those names in its condition."""
    directory = root / "names"
    shutil.copytree(bundled("rules"), directory)
    rule = ("  - id: {id}\n    heuristics: [H-FIT-CAPACITY]\n    priority: {priority}\n    when: {when}\n"
            "    then:\n      conclude: {{{name}: true}}\n    because: \"x\"\n")
    text = "rules:\n" + "".join(rule.format(id=f"writes-{i}", priority=900 + i / 1000, when="params_b > 0",
                                            name=f"written_{i}") for i in range(writers))
    text += "".join(rule.format(id=f"reads-{i}", priority=950 + i / 1000, when=f"written_{i}", name=f"read_{i}")
                    for i in range(readers))
    (directory / "zz-names.yaml").write_text(text, encoding="utf-8")
    return directory


def test_names_rules_only_write_do_not_count_toward_the_engines_limit(tmp_path):
    """200 rules concluding 200 names of their own (more than the 150 names the engine lets conditions read)
    pass the check and run on durable-rules: a group's fact carries only what its group's conditions read."""
    from contextlib import closing

    from kentino_expert.expert import Expert
    directory = _many_names(tmp_path, 200, 0)
    assert check_directory(directory).errors == []
    with closing(Expert(rules_dir=directory)) as expert:
        assert expert.recommend({"task": "inference", "model": "llama-3.1-70b"}).recommendation.kind == "single-node"


def test_more_names_read_than_the_engine_takes_are_refused_in_the_file_that_reads_them(tmp_path):
    """Conditions that read more distinct names than the engine takes are E201, blamed on the added file."""
    from kentino_expert.engine.durable.terms import MAX_READ_NAMES
    errors = check_directory(_many_names(tmp_path, MAX_READ_NAMES, MAX_READ_NAMES)).errors
    assert [(d.code, d.location.file) for d in errors] == [("E201", "names/zz-names.yaml")], [str(d) for d in errors]
    assert f"more than the {MAX_READ_NAMES} the engine takes" in errors[0].message
