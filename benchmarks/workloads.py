"""The facts the benchmark sends: a chat bot's first turn, a final turn, and variants no earlier request asked."""
from __future__ import annotations

import itertools

# every fact an inference answer asks for (tests/test_benchmark_workloads.py): a final answer, no questions; the
# request shape is the defaults' (rules/facts.yaml), stated
FINAL = {"task": "inference", "model": "llama-3.1-70b", "concurrency": 48, "context_tokens": 8192,
         "latency": "production", "tenancy": "single", "qps": 20, "tokens_per_s": 1000,
         "prompt_tokens": 1024, "output_tokens": 294, "kv_cache_precision": "bf16"}
# the facts of FINAL a build before the serving model knew (benchmarks/model_cost.py); the same answer
FINAL_BEFORE_MODEL = {k: v for k, v in FINAL.items() if k not in ("prompt_tokens", "output_tokens",
                                                                  "kv_cache_precision")}
CHAT = {"task": "inference", "model": "llama-3.1-70b"}


_UNIQUE = itertools.count(4096)


def unique_chat(index: int) -> dict:
    """A first turn no earlier request of the run asked: its what-if probes miss the cache."""
    return {**CHAT, "context_tokens": next(_UNIQUE)}


def unique_final(index: int) -> dict:
    """Every fact known, with a concurrency no earlier request of the run had: no cache helps."""
    return {**FINAL, "concurrency": next(_UNIQUE)}


