"""A turn's build searches sized together in rounds, each round one batch decided in one pass: plan by plan and
build by build what the scalar path gives (one candidate sized and decided at a time), and what durable-rules
decides on the same states, for serving, batch and training turns."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from kentino_expert.answer.candidates import run_sizings
from kentino_expert.answer.questions import missing_facts, probe_values
from kentino_expert.answer.whatif import KindOracle, OneAtATime
from kentino_expert.engine.chaining import run_rules
from kentino_expert.errors import KentinoError
from test_whatif import EXPERT, KNOWLEDGE, RULESET, _workload, first_turns

DECIDING = EXPERT.kinds.ruleset  # the deciding subset the probes run
DURABLE = type(EXPERT.engine)(DECIDING)  # durable-rules on it (one per process: its hosts are not freed)


def _fresh() -> KindOracle:
    return KindOracle(KNOWLEDGE, RULESET, 4096)


def _probes(workload) -> list:
    """The turn's own facts and every probe's, as rank_questions asks them."""
    known = workload.known()
    return [known] + [{**known, fact: value} for fact in missing_facts(workload, RULESET)
                      for value in probe_values(EXPERT, fact)]


def _same(batched, scalar) -> bool:
    """Equal results, or exceptions of the same type and message."""
    if isinstance(batched, BaseException) or isinstance(scalar, BaseException):
        return type(batched) is type(scalar) and str(batched) == str(scalar)
    return batched == scalar


class TestBatchEqualsScalar:
    """The rounds reach, for every probe of a turn, the build and plans the scalar path reaches."""

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(first_turns)
    def test_every_probe_gets_the_scalar_build(self, facts):
        """Turn.builds_of (the probes' searches in rounds, one batch each) equals one search at a time, one
        candidate at a time, on a fresh oracle (no cache shared between the two)."""
        workload = _workload(facts)
        if workload is None:
            return
        mappings = _probes(workload)
        batched = _fresh().turn(workload).builds_of(mappings)
        scalar_oracle = _fresh()
        scalar_turn = scalar_oracle.turn(workload)
        for mapping, found in zip(mappings, batched, strict=True):
            try:
                expected = scalar_oracle._build_uncached(mapping, scalar_turn)
            except Exception as exc:  # noqa: BLE001 - the batch hands the same error back
                expected = exc
            assert _same(found, expected), mapping

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(first_turns)
    def test_a_batch_of_candidates_gets_the_scalar_plans(self, facts):
        """Turn.sized_many over every card and probe of a turn: each plan (its kind, layout, values and figures)
        and start state equals the candidate sized and decided on its own."""
        workload = _workload(facts)
        if workload is None:
            return
        cards = [gpu.id for gpu in KNOWLEDGE.gpus.values() if gpu.kentino_ships]
        mappings = [{**mapping, "gpu": card} for mapping in _probes(workload)[:8] for card in cards]
        batched = _fresh().turn(workload).sized_many(mappings)
        alone = OneAtATime(_fresh().turn(workload))
        for mapping, found in zip(mappings, batched, strict=True):
            try:
                expected = alone.sized(mapping)
            except Exception as exc:  # noqa: BLE001
                expected = exc
            if not isinstance(found, BaseException) and not isinstance(expected, BaseException):
                assert found[0] == expected[0], mapping
            else:
                assert _same(found, expected), mapping


class TestBatchAgainstDurable:
    """The states a round decides in one pass end where durable-rules ends them."""

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(first_turns)
    def test_a_rounds_states_reach_durable_rules_final_states(self, facts):
        """Every state the turn's rounds decide: durable-rules on the same deciding rules fires the same rules to
        the same final state as the one-pass batch."""
        workload = _workload(facts)
        if workload is None:
            return
        oracle = _fresh()
        decided = []
        evaluate_many = oracle._decide.evaluate_many

        def recording(states):
            outcomes = evaluate_many(states)
            decided.extend(zip(states, outcomes, strict=True))
            return outcomes

        oracle._decide.evaluate_many = recording
        oracle.turn(workload).builds_of(_probes(workload))
        assert decided
        for state, outcome in decided[:40]:
            firings, final = run_rules(DECIDING, state, DURABLE)
            assert [f.rule.id for f in firings] == [rule.id for rule in outcome.fired]
            assert final == outcome.final


def test_a_search_that_fails_hands_back_its_error_and_the_others_go_on():
    """run_sizings: a search raising (its named build cannot be sized) ends with that error, the others finish."""
    def failing():
        yield {"task": "inference"}
        raise KentinoError("named build cannot be sized")

    def finishing():
        outcome = yield {"task": "inference"}
        return ["done", outcome]

    class Evaluator:
        def sized(self, facts):
            return ("plan", None)

    results = run_sizings([failing(), finishing()], Evaluator())
    assert isinstance(results[0], KentinoError) and results[1] == ["done", ("plan", None)]
