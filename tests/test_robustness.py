"""Hostile input, concurrent evaluation and a long soak: refused cleanly or handled, never a crash."""
from __future__ import annotations

import gc
import json
import multiprocessing
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kentino_expert.domain.derive import derive
from kentino_expert.domain.workload import read_facts, validate_facts
from kentino_expert.engine.chaining import run_rules
from kentino_expert.errors import InputError
from kentino_expert.expert import Expert

EXPERT = Expert()
VARIED = [
    {"task": "inference", "model": "llama-3.1-70b", "concurrency": 48},
    {"task": "full-finetune", "model": "llama-3.1-70b", "interconnect": "roce-100gbe"},
    {"task": "batch-inference", "model": "deepseek-v3"},
    {"task": "lora", "model": "llama-3.1-70b", "proposed_build": {"nodes": 2, "gpus_per_node": 4}},
    {"task": "inference", "model": "llama-3.1-70b", "tenancy": "multi", "qps": 150000},
    {"task": "pretraining", "model": "llama-3.1-70b", "training_tokens": "15T"},
]


def _bomb(levels: int = 7) -> str:
    lines = ['l0: &l0 ["x","x","x","x","x","x","x","x","x"]']
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _resident_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


class TestHostileValues:
    """Every hostile input is refused with the field named, or handled."""

    @pytest.mark.parametrize("text,field", [
        ('{"task": "inference", "qps": 9223372036854775808}', "qps"),
        ('{"task": "inference", "concurrency": 18446744073709551616}', "concurrency"),
        ('{"task": "inference", "params_b": 1e308}', "params_b"),
        ('task: inference\nparams_b: .nan\n', "params_b"),
        ('task: inference\nqps: .inf\n', "qps"),
        ('{"task": "inference", "qps": NaN}', "facts"),
        ('{"task": "inference", "tokens_per_s": Infinity}', "facts"),
        ('{"task": "pretraining", "training_tokens": 1e30}', "training_tokens"),
        ('{"task": "inference", "model": "' + "x" * 300 + '"}', "model"),
        ('{"task": "inférence"}', "task"),
        ('task: inference\ntask: lora\n', None),
        ('{"task": "inference", "task": "lora"}', "facts"),
    ])
    def test_refused_with_the_field(self, text, field):
        """Huge numbers, NaN/Infinity, long strings, non-ASCII enums and duplicate keys are InputErrors."""
        with pytest.raises(InputError) as caught:
            read_facts(text)
        assert field is None or caught.value.field == field or str(caught.value).startswith(field)

    def test_exponent_floats_are_handled(self):
        """A tiny model written with an exponent evaluates (the engine gets no exponent notation)."""
        answer = EXPERT.recommend_text('{"task": "inference", "params_b": 1e-5, "qps": 1e-3}')
        assert answer.recommendation.kind == "single-node"

    def test_megabyte_string_and_deep_nesting(self):
        """A 1 MB string and a 100,000-deep JSON array are refused without a crash."""
        with pytest.raises(InputError):
            read_facts('{"task": "inference", "model": "' + "x" * 1_000_001 + '"}')
        with pytest.raises(InputError):
            read_facts('{"task": "inference", "model": ' + "[" * 100_000 + "]" * 100_000 + "}")

    def test_yaml_bomb(self):
        """Anchors and aliases that expand to millions of nodes are refused at a bounded cost."""
        with pytest.raises(InputError, match="alias bomb"):
            read_facts(_bomb())

    def test_non_ascii_catalog_miss(self):
        """A non-ASCII model id is an unknown model, named."""
        with pytest.raises(InputError, match="unknown model"):
            EXPERT.recommend({"task": "inference", "model": "ščť-70b"})

    def test_hostile_input_through_the_cli(self):
        """The installed command turns a YAML bomb into exit 2, a one-line error and an empty stdout."""
        result = subprocess.run([sys.executable, "-m", "kentino_expert", "recommend", "-"], input=_bomb(),
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr


def _answers(workloads):
    return [json.dumps(EXPERT.recommend(w).model_dump(mode="json"), sort_keys=True) for w in workloads]


def _process_answers(_):
    expert = Expert()
    return [json.dumps(expert.recommend(w).model_dump(mode="json"), sort_keys=True) for w in VARIED * 5]


class TestConcurrency:
    """Parallel evaluation gives the answers serial evaluation gives."""

    def test_threads(self):
        """Eight threads sharing one engine produce exactly the serial answers."""
        serial = _answers(VARIED * 5)
        results, errors = {}, []

        def work(index):
            try:
                results[index] = _answers(VARIED * 5)
            except Exception as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors
        assert all(answers == serial for answers in results.values()) and len(results) == 8

    def test_processes(self):
        """Four worker processes (forked after the rules were built) agree with serial runs."""
        serial = _answers(VARIED * 5)
        with multiprocessing.get_context("fork").Pool(4) as pool:
            for answers in pool.map(_process_answers, range(4)):
                recommendations = [json.loads(a)["recommendation"] for a in answers]
                assert recommendations == [json.loads(a)["recommendation"] for a in serial]


class TestSoak:
    """One process, 100,000 evaluations on durable-rules: no error and flat memory."""

    def test_hundred_thousand_evaluations(self):
        """Memory after 100,000 evaluations is within a few MB of memory after 10,000."""
        ruleset = EXPERT.ruleset
        states = [derive(validate_facts(w), EXPERT.knowledge, ruleset.fact_policies, ruleset.parameter_values).state()
                  for w in VARIED]
        expected = [[f.rule.id for f in run_rules(EXPERT.ruleset, s, EXPERT.engine)[0]] for s in states]
        rss = {}
        for index in range(100_000):
            firings, _ = run_rules(EXPERT.ruleset, states[index % len(states)], EXPERT.engine)
            if index % 9973 == 0:
                assert [f.rule.id for f in firings] == expected[index % len(states)]
            if index + 1 in (10_000, 100_000):
                gc.collect()
                rss[index + 1] = _resident_mb()  # current, not the high-water mark earlier tests may have set
        assert rss[100_000] - rss[10_000] < 8, rss


@pytest.mark.parametrize("error", [OverflowError("cannot convert float infinity to integer"),
                                   ZeroDivisionError("float division by zero"), ValueError("math domain error")])
def test_a_what_if_probe_whose_arithmetic_fails_has_no_kind(error):
    """questions.kind_for: a probe the arithmetic cannot evaluate reaches no kind (it is skipped), like one that
    does not validate; a bug of another type is not hidden."""
    from types import SimpleNamespace

    from kentino_expert.answer.questions import kind_for

    def build_of(facts):
        raise error

    assert kind_for(SimpleNamespace(build_of=build_of), {"task": "batch-inference"}) is None

    def buggy(facts):
        raise AttributeError("a bug")

    with pytest.raises(AttributeError):
        kind_for(SimpleNamespace(build_of=buggy), {"task": "batch-inference"})


@pytest.mark.parametrize("task", ["lora", "full-finetune"])
def test_a_training_job_with_serving_facts_is_answered(task):
    """A training job given a latency class and users (facts of serving, no context) is answered with its questions:
    the serving figures that need a context are not worked out for it (a hoisted demand once read it: KeyError)."""
    answer, _, _, questions = Expert().decide_parts(
        {"task": task, "model": "gpt-oss-120b", "concurrency": 48, "latency": "interactive"})
    assert answer.recommendation.kind and all(q.fact != "context_tokens" for q in questions)
