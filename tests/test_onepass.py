"""The one-pass evaluator: on a stratified rule set it fires what the agenda fires (compiled, reference,
durable-rules), in the same order, to the same final state; a rule set that is not stratified is refused by name."""
from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.benchgen import generated_rules_dir, generated_scenarios
from kentino_expert.engine.compiled import CompiledEngine
from kentino_expert.engine.onepass import OnePassEngine, stratification_problems
from kentino_expert.expert import Expert
from test_compiled import EXPERT, RULESET, _ids, _state, workloads

ROOT = Path(__file__).resolve().parent.parent
COMPILED = CompiledEngine(RULESET)
ONE_PASS = OnePassEngine.of(COMPILED)
DECIDING = EXPERT.kinds


def _outcomes(engine, states):
    return [([rule.id for rule in o.fired], o.final, o.decider.id if o.decider else None)
            for o in engine.evaluate_many(states)]


class TestStratification:
    """The compiler's proof that one pass is exact, and what it names when it is not."""

    def test_the_shipped_rules_and_their_deciding_subset_are_stratified(self):
        """Both rule sets the product evaluates are proved stratified, so both get a one-pass evaluator."""
        assert stratification_problems(RULESET.rules) == []
        assert ONE_PASS is not None and DECIDING.one_pass is not None

    def test_a_rule_that_reads_what_a_later_rule_writes_is_named(self, tmp_path):
        """A rule reading a conclusion a later rule draws is not stratified; the problem names both rules."""
        rules = generated_rules_dir(tmp_path / "rules", 0)
        (rules / "zz-late.yaml").write_text(
            "rules:\n"
            "  - id: early-reader\n    heuristics: [H-OPS-TAX]\n    priority: 1\n"
            "    description: reads a later conclusion\n    when: late_flag\n"
            "    then: {conclude: {early_seen: true}}\n    because: It saw the flag.\n"
            "  - id: late-writer\n    heuristics: [H-OPS-TAX]\n    priority: 2\n"
            "    description: writes it later\n    when: task == 'inference'\n"
            "    then: {conclude: {late_flag: true}}\n    because: It set the flag.\n")
        expert = Expert(rules, backend="reference")
        problems = stratification_problems(expert.ruleset.rules)
        assert any("early-reader" in p and "late_flag" in p and "late-writer" in p for p in problems), problems
        assert OnePassEngine.of(CompiledEngine(expert.ruleset)) is None


class TestAgreement:
    """Figure by figure the same outcome as the agenda on the same states."""

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(workloads, min_size=1, max_size=8))
    def test_a_batch_fires_what_the_agenda_fires(self, batch):
        """Generated workloads in batches (repeats included): the same rules, order, final state and decider
        as the compiled evaluator, one state at a time."""
        states = [s for s in (_state(f) for f in batch + batch[:1]) if s is not None]
        assert _outcomes(ONE_PASS, states) == _outcomes(COMPILED, states)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(workloads)
    def test_one_state_fires_what_reference_and_durable_rules_fire(self, facts):
        """The whole rule set: the firings and final state of the reference evaluator and durable-rules."""
        state = _state(facts)
        if state is None:
            return
        outcome = ONE_PASS.evaluate(state)
        ids, final = [rule.id for rule in outcome.fired], outcome.final
        assert _ids(EXPERT.engine, state)[:2] == (ids, final)

    def test_the_corpus_states_agree_in_one_batch(self):
        """Every scenario's facts of tests/scenarios, as one batch on the deciding subset and the whole set."""
        import yaml

        facts = []
        for path in sorted((ROOT / "tests" / "scenarios").glob("*.yaml")):
            loaded = yaml.safe_load(path.read_text())
            for item in loaded if isinstance(loaded, list) else loaded.get("scenarios", []):
                if isinstance(item.get("facts"), dict):
                    facts.append(item["facts"])
        states = [s for s in map(_state, facts) if s is not None]
        assert len(states) > 100
        assert _outcomes(ONE_PASS, states) == _outcomes(COMPILED, states)
        assert _outcomes(DECIDING.one_pass, states) == _outcomes(DECIDING.engine, states)

    def test_five_hundred_generated_rules_agree(self, tmp_path):
        """At ~550 rules (benchgen) one pass fires what the compiled evaluator fires."""
        expert = Expert(generated_rules_dir(tmp_path / "rules", 500), backend="reference")
        compiled = CompiledEngine(expert.ruleset)
        one_pass = OnePassEngine.of(compiled)
        assert one_pass is not None
        states = [s for s in (_state(x["facts"], expert.ruleset) for x in generated_scenarios(60)) if s is not None]
        assert len(states) > 30 and _outcomes(one_pass, states) == _outcomes(compiled, states)
