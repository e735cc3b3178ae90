"""The compiled evaluator: it fires the same rules in the same order and reaches the same final state as the
reference evaluator and durable-rules, and its index and falsity cache leave rules that cannot fire alone."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.benchgen import generated_rules_dir, generated_scenarios
from kentino_expert.authoring.scenarios import load_scenarios, run_all
from kentino_expert.domain.derive import derive
from kentino_expert.domain.workload import validate_facts
from kentino_expert.engine.chaining import run_rules
from kentino_expert.engine.closures import compile_truth, compile_value
from kentino_expert.engine.compiled import CompiledEngine
from kentino_expert.engine.reference import ReferenceEngine
from kentino_expert.errors import EngineError, KentinoError
from kentino_expert.expert import Expert
from kentino_expert.lang.parser import parse
from kentino_expert.lang.semantics import MISSING, truth_of, value_of
from test_engine import workloads as engine_workloads

ROOT = Path(__file__).resolve().parent.parent
EXPERT = Expert()
KNOWLEDGE, RULESET = EXPERT.knowledge, EXPERT.ruleset
REFERENCE = ReferenceEngine(RULESET)
COMPILED = CompiledEngine(RULESET)

workloads = engine_workloads  # the fact space of the engine's differential tests (tests/test_engine.py)


def _state(facts, ruleset=RULESET):
    try:
        return derive(validate_facts(facts), KNOWLEDGE, ruleset.fact_policies, ruleset.parameter_values).state()
    except KentinoError:
        return None


def _ids(engine, state, ruleset=RULESET):
    firings, final = run_rules(ruleset, state, engine)
    return [f.rule.id for f in firings], final, [f.added for f in firings], [f.because for f in firings]


class TestDifferential:
    """The compiled evaluator against the reference evaluator and durable-rules."""

    @settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(workloads)
    def test_same_firings_trace_and_final_state(self, facts):
        """Generated workloads: the same rules in the same order, the same additions, sentences and end state."""
        state = _state(facts)
        if state is None:
            return
        assert _ids(COMPILED, state) == _ids(REFERENCE, state) == _ids(EXPERT.engine, state)

    @settings(max_examples=500, deadline=None)
    @given(workloads)
    def test_own_effects_equal_the_traced_run(self, facts):
        """evaluate() (precompiled effects, no trace) ends where the traced run ends, with the same rules, and
        names as the decider the first rule whose firing added the kind."""
        state = _state(facts)
        if state is None:
            return
        ids, final, added, _ = _ids(REFERENCE, state)
        outcome = COMPILED.evaluate(state)
        assert [rule.id for rule in outcome.fired] == ids
        assert outcome.final == final
        assert outcome.kind == final.get("recommended_kind")
        decider = next((rule for rule, adds in zip(ids, added, strict=True) if "recommended_kind" in adds), None)
        assert (outcome.decider.id if outcome.decider else None) == decider

    @settings(max_examples=200, deadline=None)
    @given(st.lists(workloads, min_size=1, max_size=6))
    def test_a_batch_equals_one_evaluation_each(self, batch):
        """evaluate_many gives, per state, what evaluate gives (repeated states included)."""
        states = [s for s in (_state(f) for f in batch + batch[:2]) if s is not None]
        assert [(o.fired, o.final, o.decider) for o in COMPILED.evaluate_many(states)] == \
            [(o.fired, o.final, o.decider) for o in map(COMPILED.evaluate, states)]

    @settings(max_examples=100, deadline=None)
    @given(st.lists(workloads, min_size=1, max_size=8))
    def test_the_expert_probe_engine_decides_a_batch_as_durable_does(self, batch):
        """Expert.probe_engine.evaluate_many (what the build search calls) gives durable-rules' fired rules
        and final states for a batch of candidate states."""
        states = [s for s in map(_state, batch) if s is not None]
        for state, outcome in zip(states, EXPERT.probe_engine.evaluate_many(states), strict=True):
            ids, final, _, _ = _ids(EXPERT.engine, state)
            assert [rule.id for rule in outcome.fired] == ids and outcome.final == final

    def test_rule_examples_and_scenarios_pass_on_the_compiled_backend(self):
        """Every scenario file (the document's answers, the policy and every rule's example) passes on it."""
        expert = Expert(backend="compiled")
        scenarios = load_scenarios(sorted((ROOT / "tests" / "scenarios").glob("*.yaml")), expert.ruleset)
        outcomes, _ = run_all(expert, scenarios)
        assert scenarios and all(outcome.passed for outcome in outcomes), \
            [o.scenario.name for o in outcomes if not o.passed]

    def test_five_hundred_generated_rules_agree(self, tmp_path):
        """At ~550 rules (benchgen), the compiled and reference evaluators fire the same rules."""
        rules_dir = generated_rules_dir(tmp_path / "rules", 500)
        expert = Expert(rules_dir, backend="reference")
        compiled = CompiledEngine(expert.ruleset)
        compared = 0
        for scenario in generated_scenarios(60):
            state = _state(scenario["facts"], expert.ruleset)
            if state is None:
                continue
            assert _ids(compiled, state, expert.ruleset)[:2] == _ids(expert.engine, state, expert.ruleset)[:2]
            compared += 1
        assert compared > 30


class TestIndex:
    """Rules that cannot fire for a workload are left out before any condition is evaluated."""

    def test_rules_of_another_task_are_not_candidates(self, tmp_path):
        """A generated rule for other tasks is not among the candidates of an inference workload."""
        expert = Expert(generated_rules_dir(tmp_path / "rules", 50), backend="reference")
        compiled = CompiledEngine(expert.ruleset)
        state = _state({"task": "inference", "model": "llama-3.1-70b"}, expert.ruleset)
        admitted = {expert.ruleset.rules[p].id for p in compiled.candidates(state)}
        for rule in expert.ruleset.rules:
            task_term = next((c for c in rule.source.when if c.text.startswith("task in")), None)
            if rule.id.startswith("generated-") and task_term is not None:
                assert (rule.id in admitted) == ("'inference'" in task_term.text), rule.id

    def test_an_unhashable_value_keeps_every_indexed_rule(self):
        """A state value a dict cannot look up (a list) leaves every rule indexed on that name a candidate."""
        state = {**_state({"task": "inference", "model": "llama-3.1-70b"}), "task": ["inference"]}
        admitted = set(COMPILED.candidates(state))
        for task in ("inference", "batch-inference", "lora", "qlora", "full-finetune", "pretraining"):
            assert set(COMPILED.candidates({**state, "task": task})) <= admitted
        assert len(admitted) == len(set(COMPILED.candidates(state))) == len(COMPILED.candidates(state))
        assert _ids(COMPILED, state)[:2] == _ids(REFERENCE, state)[:2]

    def test_a_rule_set_that_never_settles_is_an_engine_error(self):
        """max_steps bounds the firings, as in the reference evaluator."""
        state = _state({"task": "inference", "model": "llama-3.1-70b"})
        with pytest.raises(EngineError, match="no quiescence"):
            COMPILED.run(state, lambda rule, current: {"never": object()}, max_steps=3)


EXPRESSIONS = ["a > 3", "a + b * 2 >= c", "not (a < b)", "a in [1, 2, 'x']", "a not in [1, 2]", "exists a",
               "not exists b", "flag", "not flag", "a == 1 and (b != 2 or c > 0)", "max(a, b) > 2",
               "min(a, c) <= 1", "ceil(a / b) == 2", "round(a, 1) < 3", "-a < 0", "a / b > 1", "floor(c) == 1"]
values = st.one_of(st.just(MISSING), st.integers(-3, 3), st.floats(-3, 3, allow_nan=False), st.booleans(),
                   st.sampled_from(["x", "y"]))


class TestClosures:
    """A compiled condition or value means what lang/semantics.py says it means."""

    @settings(max_examples=400, deadline=None)
    @given(st.sampled_from(EXPRESSIONS), values, values, values, values)
    def test_truth_and_value_agree_with_the_semantics(self, text, a, b, c, flag):
        """Random values (missing ones included) give the same truth and the same value, or the same error."""
        node = parse(text)
        env = {name: value for name, value in (("a", a), ("b", b), ("c", c), ("flag", flag)) if value is not MISSING}
        assert _outcome(compile_truth(node), env) == _outcome(lambda e: truth_of(node, e), env)
        assert _outcome(compile_value(node), env) == _outcome(lambda e: value_of(node, e), env)

    def test_parameters_fill_names_the_state_lacks(self):
        """A recommended value reads the state first, then the parameters (chaining.effects_of's view)."""
        value = compile_value(parse("a * limit"), {"limit": 4})
        assert value({"a": 2}) == 8 and value({"a": 2, "limit": 1}) == 2 and value({}) is MISSING


def _outcome(fn, env):
    try:
        return ("value", fn(env))
    except Exception as exc:  # noqa: BLE001 - both sides must fail the same way
        return ("error", type(exc))
