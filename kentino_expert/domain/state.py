"""The flat state the rules see: the facts (proposed_build flattened), the figures (figures.py), and the
properties rules add (conclusions, recommendation fields, warning keys), with their types."""
from __future__ import annotations

import math

from ..lang.valuetypes import BOOL, NUMBER, TEXT, enum_of
from .vocabulary import KINDS, LATENCIES, PRECISIONS, TASKS, TENANCIES

# Facts as the rules see them (proposed_build is flattened); enums list their values.
FACT_TYPES: dict[str, object] = {
    "task": enum_of(TASKS), "model": TEXT, "params_b": NUMBER,
    "precision": enum_of(PRECISIONS), "gpu": TEXT, "gpus_per_node": NUMBER,
    "concurrency": NUMBER, "context_tokens": NUMBER, "prompt_tokens": NUMBER, "output_tokens": NUMBER,
    "kv_cache_precision": enum_of(("bf16", "fp8")),
    "qps": NUMBER, "tokens_per_s": NUMBER,
    "latency": enum_of(LATENCIES), "tenancy": enum_of(TENANCIES),
    "training_tokens": NUMBER, "sequence_tokens": NUMBER, "corpus_tokens": NUMBER, "generated_share": NUMBER,
    "deadline_days": NUMBER,
    "proposed_nodes": NUMBER, "proposed_gpus_per_node": NUMBER, "proposed_gpu": TEXT,
    "proposed_precision": enum_of(PRECISIONS), "interconnect": TEXT,
}

# What the build search (answer/search.py) tells the rules when it moved the recommendation off the build
# the buyer named: that build's plan, and why it is not one Kentino builds. Absent otherwise.
SEARCH_TYPES: dict[str, object] = {
    "named_build_switched": BOOL, "named_gpu": TEXT, "named_gpus_per_node": NUMBER, "named_kind": enum_of(KINDS),
    "named_nodes": NUMBER, "named_reason": TEXT, "named_test": TEXT,
    # when no build the search weighed works: the closest one, the `works` test it fails and why
    "no_build_works": BOOL, "closest_gpu": TEXT, "closest_gpus_per_node": NUMBER, "closest_nodes": NUMBER,
    "closest_tp": NUMBER, "closest_pp": NUMBER, "closest_dp": NUMBER, "closest_replicas": NUMBER,
    "closest_interconnect": TEXT,
    "closest_precision": enum_of(PRECISIONS), "closest_test": TEXT, "closest_reason": TEXT,
    # the price (rules/prices.yaml): when it decided between two builds that work, and what a cheaper build that
    # works would save when the buyer's named build is kept
    "price_currency": TEXT, "price_decided": BOOL, "runner_up_gpu": TEXT, "runner_up_price": NUMBER,
    "chosen_price": NUMBER, "cheaper_gpu": TEXT, "cheaper_gpus_per_node": NUMBER, "cheaper_nodes": NUMBER,
    "cheaper_saving": NUMBER, "chosen_price_text": TEXT, "runner_up_price_text": TEXT,
}

RECOMMENDATION_PREFIX = "recommended_"
WARNING_PREFIX = "warn__"


def recommendation_key(field: str) -> str:
    """The state property that holds a field of the recommendation (`kind` -> `recommended_kind`)."""
    return RECOMMENDATION_PREFIX + field


def whole_count(value):
    """A recommendation field as the answer states it: a count a rule computed as a fraction rounds up (2.5
    nodes are 3 to buy, never 2), a whole float is an int, anything else is as it was. A float past 2**53 is
    whole already and stays a float, so the plan's arithmetic on it overflows to inf, not to an exception."""
    if isinstance(value, float) and math.isfinite(value) and abs(value) < 2.0 ** 53:
        return math.ceil(value)
    return value


def warning_key(code: str) -> str:
    """The state property that records a warning was given."""
    return WARNING_PREFIX + code.replace("-", "_")


RECOMMENDED_KIND = recommendation_key("kind")  # what a rule writes to decide the answer
RECOMMENDATION_TYPES = {recommendation_key(field): kind for field, kind in {
    "kind": enum_of(KINDS), "precision": enum_of(PRECISIONS), "nodes": NUMBER, "replicas": NUMBER, "tp": NUMBER,
    "pp": NUMBER, "dp": NUMBER, "sharding": TEXT, "interconnect": TEXT, "gpu": TEXT, "gpus_per_node": NUMBER}.items()}


def flatten_facts(facts: dict) -> dict:
    """Facts as given (a Workload's `known()`) -> as the rules see them: proposed_build flattened."""
    facts = dict(facts)
    build = facts.pop("proposed_build", None)
    if build:
        facts["proposed_nodes"] = build["nodes"]
        facts["proposed_gpus_per_node"] = build["gpus_per_node"]
        for part in ("gpu", "precision"):
            if build.get(part):
                facts[f"proposed_{part}"] = build[part]
    return facts


def unflatten_facts(facts: dict) -> dict:
    """The inverse of `flatten_facts`: the state's facts as a mapping that validates as a Workload."""
    out = {k: v for k, v in facts.items() if not k.startswith("proposed_")}
    if "proposed_nodes" in facts:
        build = {"nodes": facts["proposed_nodes"], "gpus_per_node": facts.get("proposed_gpus_per_node")}
        for part in ("gpu", "precision"):
            if facts.get(f"proposed_{part}"):
                build[part] = facts[f"proposed_{part}"]
        out["proposed_build"] = build
    return out
