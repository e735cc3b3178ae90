"""The per-Expert caches: what-if kinds and whole decisions give exactly what a fresh evaluation gives."""
from __future__ import annotations

import pytest

from kentino_expert.answer.cache import AnswerCache
from kentino_expert.errors import InputError
from kentino_expert.expert import Expert

FACTS = [
    {"task": "inference", "model": "llama-3.1-70b"},
    {"task": "inference", "model": "llama-3.1-405b", "latency": "interactive", "concurrency": 64},
    {"task": "full-finetune", "model": "llama-3.1-70b", "interconnect": "roce-100gbe"},
    {"task": "qlora", "model": "llama-3.1-405b"},
]


@pytest.fixture(scope="module")
def expert():
    made = Expert()
    yield made
    made.close()


class TestAnswerCache:
    """AnswerCache is a bounded LRU that never caches an error."""

    def test_repeat_is_a_hit_and_equal(self):
        """The second call with equal facts (in any key order) returns the first result without evaluating."""
        calls = []
        cache = AnswerCache(4)
        first = cache.get({"a": 1, "b": 2}, lambda f: calls.append(f) or ("result", len(calls)))
        second = cache.get({"b": 2, "a": 1}, lambda f: calls.append(f) or ("result", len(calls)))
        assert first == second == ("result", 1) and len(calls) == 1 and (cache.hits, cache.misses) == (1, 1)

    def test_least_recently_used_is_evicted(self):
        """Past its size the cache drops the entry used longest ago, and keeps the one just used."""
        cache = AnswerCache(2)
        for key in ("x", "y"):
            cache.get({"k": key}, lambda f: f["k"])
        cache.get({"k": "x"}, lambda f: "recomputed")  # x is now the most recent
        cache.get({"k": "z"}, lambda f: f["k"])
        assert len(cache) == 2
        assert cache.get({"k": "x"}, lambda f: "recomputed") == "x"
        assert cache.get({"k": "y"}, lambda f: "recomputed") == "recomputed"

    def test_errors_are_not_cached(self):
        """A failing evaluation raises every time: a fixed rule set or knowledge is not masked."""
        cache, calls = AnswerCache(4), []

        def failing(facts):
            calls.append(facts)
            raise InputError("bad", field="task")

        for _ in range(2):
            with pytest.raises(InputError):
                cache.get({"task": "nope"}, failing)
        assert len(calls) == 2 and len(cache) == 0

    def test_size_zero_disables(self):
        """With size 0 every call evaluates."""
        cache, calls = AnswerCache(0), []
        for _ in range(3):
            cache.get({"a": 1}, lambda f: calls.append(1))
        assert len(calls) == 3


class TestWhatIfCache:
    """Expert.kind_of (cached) agrees with an uncached evaluation, whatever the key order."""

    @pytest.mark.parametrize("facts", FACTS)
    def test_cached_kind_matches_fresh(self, expert, facts):
        """build_of twice (in either key order) equals a fresh what-if and the full recommendation's build."""
        fresh = expert.kinds._build_uncached(facts, expert.kinds._alone)
        assert expert.build_of(facts) == expert.build_of(dict(reversed(list(facts.items())))) == fresh
        rec = expert.recommend(facts).recommendation
        assert fresh == (rec.kind, rec.nodes, rec.gpu, rec.gpus_per_node, rec.precision)
        assert expert.kind_of(facts) == rec.kind

    def test_bad_facts_raise_each_time(self, expert):
        """Facts that do not validate raise; nothing is cached for them."""
        for _ in range(2):
            with pytest.raises(InputError):
                expert.kind_of({"task": "inference", "concurrency": -1})


class TestFlatFactsKey:
    """flat_facts_key tells facts apart exactly as the canonical JSON does."""

    def test_order_does_not_matter_and_types_do(self):
        """Equal facts in any order share a key; 1, 1.0 and true are different facts, as in JSON."""
        from kentino_expert.answer.cache import facts_key, flat_facts_key
        assert flat_facts_key({"a": 1, "b": "x"}) == flat_facts_key({"b": "x", "a": 1})
        keys = [flat_facts_key({"a": value}) for value in (1, 1.0, True, "1", None)]
        jsons = [facts_key({"a": value}) for value in (1, 1.0, True, "1", None)]
        assert len(set(keys)) == len(set(jsons)) == 5

    def test_nested_facts_take_the_json_key_and_non_finite_numbers_none(self):
        """A nested fact falls back to the canonical JSON; NaN and infinity, like JSON, give no key (never cached)."""
        from kentino_expert.answer.cache import facts_key, flat_facts_key
        nested = {"task": "lora", "proposed_build": {"nodes": 2, "gpus_per_node": 4}}
        assert flat_facts_key(nested) == facts_key(nested)
        assert flat_facts_key({"a": float("nan")}) is None
        assert flat_facts_key({"a": float("inf")}) is None
        assert flat_facts_key({1: 2, "a": 3}) is None
