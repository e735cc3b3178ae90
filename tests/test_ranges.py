"""Interval analysis (kentino_expert.ruleset.ranges): names' ranges from the facts' bounds and the declared figure
ranges, arithmetic proven finite or refused (E206) at the operation that may overflow."""
from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hostile_rules as hostile
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.domain.derive import derive
from kentino_expert.domain.figures import FIGURE_MAX, FIGURE_SPECS, figure_range
from kentino_expert.domain.vocabulary import TASKS
from kentino_expert.domain.workload import Workload, validate_facts
from kentino_expert.errors import EngineError
from kentino_expert.lang.fold import fold
from kentino_expert.lang.intervals import Interval, Overflow, interval_of
from kentino_expert.lang.parser import parse
from kentino_expert.lang.valuetypes import NUMBER
from kentino_expert.paths import bundled
from kentino_expert.rulecheck import check_directory
from kentino_expert.ruleset.compiler import compile_ruleset
from kentino_expert.ruleset.ranges import Ranges, fact_range


@pytest.fixture(scope="module")
def ruleset():
    return compile_ruleset(bundled("rules"), load_knowledge(bundled("knowledge")))


@pytest.fixture(scope="module")
def ranges(ruleset):
    from kentino_expert.ruleset.crosschecks import conclusions_of
    return Ranges(ruleset.namespace, conclusions_of([rule.source for rule in ruleset.rules]), ruleset.fact_policies)


def _value(text, ranges, params=None):
    return interval_of(fold(parse(text), params or {}), ranges)


def test_fact_ranges_come_from_the_input_schema():
    """A fact's range is its validation bounds (integers flagged), the flattened proposed_build included."""
    assert fact_range("params_b") == Interval(1e-6, 100_000.0, False)
    assert fact_range("gpus_per_node") == Interval(1.0, 16.0, True)
    assert fact_range("proposed_nodes") == Interval(1.0, 4096.0, True)
    assert fact_range("training_tokens") == Interval(0.0, 1e16, False)
    assert fact_range("task") is None


def test_a_default_outside_the_bounds_widens_the_range():
    """A facts.yaml default is assumed as given: the range grows to hold it."""
    from types import SimpleNamespace
    policies = {"concurrency": SimpleNamespace(defaults=[SimpleNamespace(value=1e30)])}
    assert fact_range("concurrency", policies).hi == 1e30


def test_every_numeric_figure_has_a_declared_range():
    """Each number figure of figures.FIGURE_SPECS has a range; counts the sizing makes at least 1 start at 1, and
    an in-node TP is a divisor of at most 16 GPUs."""
    numbers = [name for name, spec in FIGURE_SPECS.items() if spec[0] == NUMBER]
    in_node = {"tp_fp8", "tp_int4"}
    assert all(figure_range(name)[1] == FIGURE_MAX for name in numbers if name not in in_node)
    assert figure_range("replicas_needed_fp8") == (1.0, FIGURE_MAX)
    assert figure_range("weights_fraction_fp8") == (0.0, FIGURE_MAX)
    assert all(figure_range(name) == (1.0, 16) for name in in_node)


@pytest.mark.parametrize("facts", [
    {"task": "inference", "params_b": 100_000, "gpu": "l4", "gpus_per_node": 1, "concurrency": 10_000_000,
     "context_tokens": 100_000_000, "tokens_per_s": 1e15, "latency": "interactive", "interconnect": "100gbe",
     "proposed_build": {"nodes": 4096, "gpus_per_node": 16}},
    {"task": "batch-inference", "params_b": 100_000, "gpu": "l4", "gpus_per_node": 1, "corpus_tokens": "10000T",
     "deadline_days": 0.001, "latency": "offline", "interconnect": "100gbe"},
    {"task": "pretraining", "params_b": 100_000, "gpu": "l4", "gpus_per_node": 1, "training_tokens": "10000T",
     "interconnect": "100gbe"},
    {"task": "inference", "params_b": 1e-6, "gpu": "rtx-pro-6000", "gpus_per_node": 16, "qps": 1e-9},
])
def test_figures_at_the_facts_extremes_stay_in_their_declared_ranges(ruleset, facts):
    """The largest and smallest facts give figures inside the declared ranges (derive would refuse them)."""
    knowledge = load_knowledge(bundled("knowledge"))
    figures = derive(validate_facts(facts), knowledge, ruleset.fact_policies, ruleset.parameter_values).figures
    for name, figure in figures.items():
        if isinstance(figure.value, (int, float)) and not isinstance(figure.value, bool):
            low, high = figure_range(name)
            assert low <= figure.value <= high, (name, figure.value)


def _corners(prop: dict) -> list:
    """A numeric property's extreme values as the input contract admits them (an exclusive bound's next float)."""
    branch = next(b for b in [prop, *prop.get("anyOf", [])] if b.get("type") in ("number", "integer"))
    low = branch.get("minimum", math.nextafter(branch.get("exclusiveMinimum", 0.0), math.inf))
    return [low, branch["maximum"]]


_SCHEMA = Workload.model_json_schema()
_NUMBER_FACTS = {name: _corners(prop) for name, prop in _SCHEMA["properties"].items()
                 if any(b.get("type") in ("number", "integer") for b in [prop, *prop.get("anyOf", [])])}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(task=st.sampled_from(TASKS), picks=st.dictionaries(st.sampled_from(sorted(_NUMBER_FACTS)), st.booleans()))
def test_facts_at_any_corner_of_the_contract_are_sized(ruleset, task, picks):
    """Every number fact at its smallest or largest accepted value, in any mix, is sized with figures inside
    their declared ranges: what the contract accepts never reaches a division by zero or an overflow."""
    facts = {"task": task, **{name: _NUMBER_FACTS[name][high] for name, high in picks.items()}}
    figures = derive(validate_facts(facts), load_knowledge(bundled("knowledge")), ruleset.fact_policies,
                     ruleset.parameter_values).figures
    assert all(math.isfinite(f.value) for f in figures.values()
               if isinstance(f.value, (int, float)) and not isinstance(f.value, bool))


def test_a_figure_outside_its_declared_range_is_refused():
    """derive refuses a figure outside its range (the proof of `rules check` assumes the ranges)."""
    from kentino_expert.domain.figures import checked_figure
    assert checked_figure("replicas_needed_fp8", 3).value == 3
    with pytest.raises(EngineError, match="replicas_needed_fp8 came out as 0, outside its declared range"):
        checked_figure("replicas_needed_fp8", 0)
    with pytest.raises(EngineError, match="outside its declared range"):
        checked_figure("kv_cache_gb", 1e25)
    with pytest.raises(EngineError, match="tp_fp8 came out as 32"):
        checked_figure("tp_fp8", 32)


def test_overflow_is_blamed_on_the_innermost_operation(ranges):
    """`params_b * 1e308 * 1e308` overflows already at the first '*' (params_b reaches 1e5)."""
    node = fold(parse("params_b * 1e308 * 1e308"), {})
    with pytest.raises(Overflow) as caught:
        interval_of(node, ranges)
    assert caught.value.node.pos == 9 and caught.value.interval.hi == math.inf


def test_finite_arithmetic_has_its_range(ranges):
    """Sums, products, quotients by a positive range, max/min and ceil keep finite bounds."""
    assert _value("params_b * 1e300", ranges) == Interval(1e-6 * 1e300, 100_000 * 1e300, False)
    assert _value("ceil(replicas_needed_fp8 / max(2, scale_out_nodes))", ranges) == Interval(1.0, 5e23, True)
    assert _value("max(2, serving_nodes_int4)", ranges).lo == 2.0
    assert _value("-gpus_per_node + 1", ranges) == Interval(-15.0, 0.0, True)


def test_division_by_a_range_near_zero(ranges):
    """A float divisor that can come arbitrarily close to 0 is unbounded; a whole-number one keeps 1 away."""
    with pytest.raises(Overflow):
        _value("tokens_per_s / qps", ranges)
    assert _value("10 / (gpus_per_node - 1)", ranges) == Interval(10 / 15, 10.0, False)  # 0 itself: no value
    assert _value("10 / (gpus_per_node - gpus_per_node)", ranges) == Interval(-10.0, 10.0, False)


def test_round_to_negative_digits_can_grow(ranges):
    """round(x, -n) rounds to a power of ten: up to ten times x, so near the largest float it overflows."""
    assert _value("round(params_b, 2)", ranges).hi == 100_001.0
    with pytest.raises(Overflow):
        _value("round(params_b * 1e303, -5)", ranges)


def test_the_bundled_rules_are_proven_finite():
    """No recommend field or condition of the bundled rules needs an E206."""
    assert [d for d in check_directory().diagnostics if d.code == "E206"] == []


def test_condition_arithmetic_that_overflows_is_refused(tmp_path):
    """A comparison against `concurrency * context_tokens * 1e300` (up to 1e315) is E206 at the second '*'."""
    rules = hostile.hostile_dir(tmp_path, "cond", [hostile.rule_text(
        "big-condition", "qps > concurrency * context_tokens * 1e300")])
    errors = check_directory(rules.directory).errors
    assert [(d.code, str(d.location)) for d in errors] == [("E206", rules.at("* 1e300"))]
    assert "can overflow" in errors[0].message and "concurrency in 1..1e+07" in errors[0].message


def test_recommend_divided_by_a_fact_near_zero_is_refused(tmp_path):
    """`nodes: tokens_per_s / qps` can be any size (qps > 0 can be tiny): E206 names the divisor."""
    rules = hostile.hostile_dir(tmp_path, "divide", [hostile.rule_text(
        "divide", "concurrency == 12345", 1, "tokens_per_s / qps",
        "{task: inference, model: llama-3.1-70b, concurrency: 12345}")])
    errors = check_directory(rules.directory).errors
    assert [(d.code, str(d.location)) for d in errors] == [("E206", rules.at("/ qps"))]
    assert "divisor" in errors[0].message


def test_recommendation_fields_range_over_what_the_rules_recommend(ruleset, ranges):
    """recommended_tp spans what rules recommend for tp (1, tp_fp8 / tp_int4 and gpus_per_node, all in 1..16):
    arithmetic on it is provable."""
    ranges.learn_recommendations([rule.source for rule in ruleset.rules], dict(ruleset.parameter_values))
    tp = ranges.of("recommended_tp")
    assert (tp.lo, tp.hi) == (1.0, 16.0)
    assert _value("recommended_nodes * gpus_per_node", ranges).finite
    assert ranges.of("recommended_kind") is None  # text: no arithmetic reads it
