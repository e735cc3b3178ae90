"""Why-not's lookups: the rules that conclude a name and the names a condition mentions, kept per rule set."""
from __future__ import annotations

from kentino_expert.answer import whynot
from kentino_expert.domain.vocabulary import KINDS
from kentino_expert.lang import nodes


def test_concluders_are_the_rules_that_conclude_a_name_in_order(expert):
    """RuleSet.concluders lists, for every name some rule concludes, exactly those rules in rule order."""
    rules = expert.ruleset.rules
    names = {key for rule in rules for key, _ in rule.source.then.conclude}
    assert names, "the bundled rules conclude something"
    for name in names:
        scanned = tuple(rule for rule in rules if any(key == name for key, _ in rule.source.then.conclude))
        assert expert.ruleset.concluders[name] == scanned, name
    assert expert.ruleset.concluders.get("no_rule_concludes_this") is None


def test_a_conditions_names_are_its_own(expert):
    """_names_of gives each condition's names (asked twice: the kept answer is the same) and no other's."""
    for rule in expert.ruleset.rules:
        for condition in rule.source.when:
            expected = frozenset(n.id for n in nodes.names_in(condition.node))
            assert whynot._names_of(condition.node) == expected
            assert whynot._names_of(condition.node) == expected


def test_why_not_names_a_nearest_rule_for_every_kind_not_chosen(expert):
    """A final answer's why-not covers every other kind, each with a rule's failing conditions or pre-emption."""
    facts = {"task": "inference", "model": "llama-3.1-70b", "concurrency": 48, "context_tokens": 8192,
             "latency": "production", "tenancy": "single", "qps": 20, "tokens_per_s": 1000}
    answer, firings, final = expert.recommend_traced(facts)
    out = whynot.why_not_from(expert, firings, final)
    chosen = answer.recommendation.kind
    assert [item.kind for item in out] == [kind for kind in KINDS if kind != chosen]
    for item in out:
        assert item.text.startswith(f"{item.kind} was not chosen")
        assert item.rule is None or item.failing or item.preempted_by or "recommended first" in item.text
