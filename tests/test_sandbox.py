"""The sandbox (kentino_expert.sandbox): a rule set is checked, built and its examples answered in a child
process under time and memory limits; whatever goes wrong there is a located E207, never a hung parent."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import hostile_rules as hostile
from kentino_expert import sandbox
from kentino_expert.errors import RuleFileError
from kentino_expert.paths import bundled
from kentino_expert.rulecheck import check_directory
from kentino_expert.sandbox import Limits, check_in_sandbox, trial_load, vet


def test_the_bundled_rules_pass_a_trial_load():
    """The bundled rules build and every rule fires on its own example, inside the default limits."""
    trial = trial_load(bundled("rules"), bundled("knowledge"))
    assert trial.errors == [] and trial.seconds < Limits().seconds


def test_an_example_that_does_not_fire_its_rule_is_a_warning_at_the_example(tmp_path):
    """A rule whose example does not meet its condition is W306 at the example's line:column; the set runs."""
    rules = hostile.hostile_dir(tmp_path, "silent", [hostile.rule_text(
        "never-on-its-example", "params_b > 1000", example="{task: inference, model: llama-3.1-70b}")])
    trial = trial_load(rules.directory)
    assert trial.errors == []
    assert [(d.code, str(d.location), d.rule) for d in trial.diagnostics] == [
        ("W306", rules.at("{task: inference"), "never-on-its-example")]
    assert "does not fire on its own example" in trial.diagnostics[0].message


def test_a_rule_that_preempts_the_others_leaves_their_examples_behind(tmp_path):
    """A first-priority recommendation pre-empts rules whose examples it takes: W302 says so, W306 is not repeated."""
    rules = hostile.hostile_dir(tmp_path, "preempt", [hostile.rule_text(
        "takes-everything", "task == 'inference'", 1, "1", "{task: inference, model: llama-3.1-70b}")])
    trial = trial_load(rules.directory)
    assert trial.errors == []
    shadowed = {d.rule for d in trial.diagnostics if d.code == "W302"}
    left_behind = {d.rule for d in trial.diagnostics if d.code == "W306"}
    assert "inference-fits-one-node" in shadowed and not shadowed & left_behind


def test_an_example_whose_answer_fails_is_an_error(tmp_path):
    """Without any recommending rule every example fails ("no rule recommended anything"): E207 at each."""
    rules = hostile.hostile_dir(tmp_path, "no-fallback", [hostile.rule_text("harmless", "params_b > 1")])
    for name in ("flow.yaml", "must-scale.yaml"):
        (rules.directory / name).write_text("rules: []\n")
    assert check_directory(rules.directory).errors == []  # the files are fine; the answers are not
    errors = trial_load(rules.directory).errors
    assert errors and all(d.code == "E207" and d.location.line > 0 for d in errors)
    assert "no rule recommended anything" in errors[0].message


def test_a_trial_past_its_wall_clock_limit_is_stopped():
    """A child still working when the wall-clock limit passes is killed: E207 says what it was doing."""
    started = time.monotonic()
    trial = trial_load(bundled("rules"), limits=Limits(seconds=0.05))
    assert time.monotonic() - started < 30  # killed, not waited for
    [error] = trial.errors
    assert error.code == "E207" and "did not finish within 0.05 s and was stopped while" in error.message


def test_a_trial_out_of_memory_is_an_error_not_a_crash_of_the_parent():
    """Under a 16 MiB address-space limit the child cannot load the engine: E207, the parent unharmed."""
    [error] = trial_load(bundled("rules"), limits=Limits(memory_bytes=16 * 2**20)).errors
    assert error.code == "E207" and "16 MiB" in error.message and "memory" in error.message


CHECKING = (sandbox._PREFIX + '{"step": "check", "doing": "checking the rule files"}\n').encode()


def test_a_child_stopped_at_its_memory_limit_ran_out_of_memory():
    """A child killed by the wall clock while at its address-space limit is reported as out of memory (CPython
    3.11 can spin for good on a MemoryError it cannot unwind), one stopped below it as a hang."""
    limits = Limits(seconds=20, memory_bytes=16 * 2**20)
    [at_limit] = sandbox._diagnostics(CHECKING, b"", -9, True, "rules", limits, at_limit=True)
    assert at_limit.message.endswith("the rule set ran out of memory while checking the rule files")
    [below] = sandbox._diagnostics(CHECKING, b"", -9, True, "rules", limits, at_limit=False)
    assert "did not finish within 20 s" in below.message and "memory" not in below.message


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/status"), reason="no /proc: not Linux")
def test_a_process_address_space_is_read_from_proc():
    """VmSize of a live process in bytes (this one: more than the interpreter's own megabytes); None once gone."""
    assert sandbox._address_space(os.getpid()) > 8 * 2**20
    assert sandbox._address_space(2**22 + 12345) is None  # past Linux's largest pid_max


def test_limits_come_from_the_environment(monkeypatch):
    """KENTINO_SANDBOX_SECONDS and KENTINO_SANDBOX_MEMORY_MB set the limits; nonsense keeps the defaults."""
    monkeypatch.setenv("KENTINO_SANDBOX_SECONDS", "7.5")
    monkeypatch.setenv("KENTINO_SANDBOX_MEMORY_MB", "512")
    assert Limits.from_env() == Limits(7.5, 512 * 2**20)
    monkeypatch.setenv("KENTINO_SANDBOX_SECONDS", "-1")
    monkeypatch.setenv("KENTINO_SANDBOX_MEMORY_MB", "lots")
    assert Limits.from_env() == Limits()


def test_rules_check_reports_a_trial_stopped_by_its_limit(tmp_path):
    """`rules check` with a tiny KENTINO_SANDBOX_SECONDS exits 2 with the E207 of the stopped trial."""
    done = subprocess.run([sys.executable, "-m", "kentino_expert", "rules", "check"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "KENTINO_SANDBOX_SECONDS": "0.05"})
    assert done.returncode == 2
    assert "E207" in done.stdout and "was stopped" in done.stdout


def test_the_sandboxed_check_reports_what_the_static_check_does(tmp_path):
    """In the sandbox, `rules check` finds the same diagnostics as in process (here the long `or`)."""
    rules = hostile.or_chain(tmp_path)
    inside = check_directory(rules.directory)
    sandboxed = check_in_sandbox(rules.directory, limits=Limits())
    assert [str(d) for d in sandboxed.diagnostics] == [str(d) for d in inside.diagnostics]
    assert [d.code for d in sandboxed.errors] == ["E202"]


def test_vet_refuses_a_broken_set_and_tries_a_passed_content_once(tmp_path, monkeypatch):
    """vet raises the trial's errors; a content that passed is not tried again, a changed one is."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return trial_load(*args, **kwargs)
    monkeypatch.setattr(sandbox, "trial_load", counted)
    with pytest.raises(RuleFileError, match="E206"):
        vet(hostile.overflow(tmp_path).directory)
    good = hostile.hostile_dir(tmp_path, "good", [hostile.rule_text("harmless", "params_b > 1")])
    vet(good.directory)
    vet(good.directory)
    assert len(calls) == 2
    (good.directory / hostile.FILE).write_text(good.text.replace("params_b > 1", "params_b > 2"))
    vet(good.directory)
    assert len(calls) == 3
