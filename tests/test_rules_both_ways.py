"""Every rule, both ways: its documented example fires it, and a nearby workload does not."""
from __future__ import annotations

import pytest

from kentino_expert.expert import Expert

EXPERT = Expert()
RULES = {rule.id: rule for rule in EXPERT.ruleset.rules}

# A workload close to each rule's example on which the rule must NOT fire, and why.
NOT_FIRING = {
    "node-capacity": ({"task": "inference"}, "no model: no figures, though the card is known"),
    "fp8-weights-leave-headroom": ({"task": "inference", "model": "llama-3.1-405b", "gpu": "rtx-5090"}, "406 GB > 70% of 256 GB"),
    "int4-weights-leave-headroom": ({"task": "batch-inference", "model": "llama-3.1-405b", "gpu": "l4"}, "217 GB > 70% of 192 GB"),
    "fp8-workload-fits": ({"task": "inference", "model": "llama-3.1-70b", "concurrency": 512, "context_tokens": 32768}, "KV cache exceeds VRAM"),
    "int4-workload-fits": ({"task": "lora", "model": "deepseek-v3"}, "training tasks have no serving workload"),
    "at-or-beyond-the-405b-cliff": ({"task": "batch-inference", "model": "qwen2.5-72b"}, "72.7B < 405B"),
    "int4-not-on-the-gradient-path": ({"task": "qlora", "params_b": 13}, "QLoRA is the PEFT exception"),
    "training-state-fits-one-node": ({"task": "full-finetune", "model": "llama-3.1-70b"}, "1.45 TB / 8 GPUs > 90% of a 96 GB card"),
    "users-need-their-decode-speed": ({"task": "inference", "model": "llama-3.1-70b", "concurrency": 16, "latency": "interactive"}, "16 x 25 = 400 tokens/s < one node's 500"),
    "throughput-bound-at-fp8": ({"task": "inference", "model": "llama-3.1-70b", "tokens_per_s": 500}, "one node sustains it"),
    "throughput-bound-at-int4": ({"task": "batch-inference", "model": "llama-3.1-405b"}, "no throughput demand"),
    "pcie-only-card": ({"task": "pretraining", "model": "llama-3.1-70b", "training_tokens": "15T", "gpu": "h100-sxm"},
                       "frontier on every card, so the H100 SXM named stays, and it has NVLink"),
    "research-scale-model": ({"task": "inference", "model": "llama-3.1-405b"}, "405.9B is above 72.7B"),
    "single-tenant-moderate-concurrency": ({"task": "inference", "model": "llama-3.1-70b", "concurrency": 200, "tenancy": "single"}, "200 > 64"),
    "pretraining-70b-plus-is-frontier": ({"task": "pretraining", "model": "llama-3.1-8b", "training_tokens": "15T"}, "8B < 70B"),
    "beyond-cliff-beyond-an-ib-cluster": ({"task": "inference", "params_b": 1810}, "a 4-node unit is an IB cluster Kentino builds"),
    "full-finetune-beyond-an-ib-cluster": ({"task": "full-finetune", "model": "llama-3.1-70b"}, "3 nodes <= 4"),
    "full-finetune-70b-plus-needs-ib-cluster": ({"task": "full-finetune", "params_b": 13}, "13B < 70B"),
    "beyond-cliff-at-production-latency-and-throughput": ({"task": "inference", "model": "llama-3.1-405b", "tokens_per_s": 100}, "one unit sustains it"),
    "beyond-cliff-offline-at-fp8": ({"task": "batch-inference", "model": "llama-3.1-405b", "corpus_tokens": "100M",
                                     "deadline_days": 7}, "FP8 not asked: the cliff's INT4 on one node"),
    "beyond-cliff-offline-units-at-fp8": ({"task": "batch-inference", "model": "llama-3.1-405b", "corpus_tokens": "10B",
                                           "deadline_days": 7, "precision": "int4"}, "INT4 asked: INT4 replicas"),
    "beyond-cliff-at-production-latency": ({"task": "inference", "model": "llama-3.1-405b", "latency": "offline"}, "offline is not production latency"),
    "hyperscale-multi-tenant": ({"task": "inference", "model": "llama-3.1-70b", "tenancy": "multi", "qps": 50000}, "50,000 <= 100,000 QPS"),
    "lora-fits-one-node": ({"task": "lora", "model": "llama-3.1-405b"}, "405B BF16 base does not fit"),
    "qlora-fits-one-node": ({"task": "lora", "model": "llama-3.1-70b"}, "LoRA, not QLoRA"),
    "lora-too-big-use-qlora": ({"task": "lora", "model": "llama-3.1-70b"}, "70B LoRA fits as it is"),
    "training-fits-one-node": ({"task": "full-finetune", "model": "llama-3.1-70b"}, "does not fit one node"),
    "inference-fits-one-node": ({"task": "inference", "model": "llama-3.1-70b", "precision": "int4"}, "INT4 was asked for"),
    "batch-runs-on-one-node": ({"task": "batch-inference", "model": "llama-3.1-405b"}, "beyond the cliff"),
    "inference-fits-one-node-at-int4": ({"task": "batch-inference", "model": "qwen2.5-72b"}, "fits at FP8 below the cliff"),
    "throughput-bound-replicas": ({"task": "inference", "model": "llama-3.1-70b", "tokens_per_s": 1000}, "one node is enough"),
    "throughput-bound-replicas-at-int4": ({"task": "inference", "model": "llama-3.1-70b", "tokens_per_s": 3500}, "fits at FP8: FP8 replicas"),
    "concurrency-bound-at-fp8": ({"task": "inference", "model": "llama-3.1-70b", "concurrency": 64}, "64 requests' KV fits one node"),
    "concurrency-bound-at-int4": ({"task": "inference", "model": "llama-3.1-70b", "concurrency": 512}, "FP8 replicas need no more nodes"),
    "concurrency-bound-replicas": ({"task": "inference", "model": "llama-3.1-70b", "concurrency": 512, "precision": "int4"},
                                   "INT4 was asked for"),
    "concurrency-bound-replicas-at-int4": ({"task": "inference", "model": "llama-3.1-70b", "precision": "int4", "concurrency": 64},
                                           "64 requests fit one INT4 node"),
    "units-hold-more-requests-than-replicas": ({"task": "inference", "model": "llama-3.1-70b", "concurrency": 512},
                                               "3 FP8 replicas of 8 x Pro 6000 need no more nodes than a unit"),
    "units-hold-requests-on-fewer-nodes-than-replicas": ({"task": "inference", "model": "llama-3.1-70b", "concurrency": 512},
                                                         "3 FP8 replicas of 8 x Pro 6000 need no more nodes than units"),
    "units-hold-more-requests-than-int4-replicas": ({"task": "inference", "model": "llama-4-maverick", "gpu": "h100-sxm",
                                                     "gpus_per_node": 4, "concurrency": 16, "context_tokens": 32768},
                                                    "16 requests fit one INT4 node: no replicas to beat"),
    "units-hold-requests-on-fewer-nodes-than-int4-replicas": ({"task": "inference", "model": "llama-3.1-70b",
                                                               "precision": "int4", "concurrency": 1024},
                                                              "5 INT4 replicas of 8 x Pro 6000 need no more nodes than units"),
    "lora-beyond-one-node-as-qlora": ({"task": "lora", "model": "llama-3.1-405b"}, "as QLoRA it fits one node"),
    "training-beyond-one-node-needs-ib": ({"task": "full-finetune", "params_b": 13}, "fits one node"),
    "qlora-beyond-one-node-needs-ib": ({"task": "qlora", "model": "llama-3.1-405b"}, "405B QLoRA fits 8 x Pro 6000"),
    "inference-beyond-one-node-and-throughput": ({"task": "batch-inference", "params_b": 2000}, "no throughput demand"),
    "inference-beyond-one-node": ({"task": "batch-inference", "params_b": 10000}, "needs more than 4 nodes on every card: frontier"),
    "size-unknown-assume-one-node": ({"task": "inference", "params_b": 8}, "the size is known"),
    "nothing-buildable-fits": ({"task": "batch-inference", "params_b": 2000}, "a 3-node IB cluster carries it"),
    "nothing-buildable-serves": ({"task": "batch-inference", "params_b": 2000}, "a 3-node IB cluster carries it"),
    "nothing-buildable-serves-long-requests": ({"task": "inference", "model": "llama-3.1-405b", "concurrency": 8,
                                                "context_tokens": 131072, "latency": "offline"},
                                               "one node keeps a 128k request beside the INT4 weights"),
    "operations-tax": ({"task": "lora", "model": "llama-3.1-70b"}, "single node"),
    "research-lab-trap": ({"task": "lora", "model": "llama-3.1-70b", "proposed_build": {"nodes": 1, "gpus_per_node": 8}}, "one node proposed"),
    "part-filled-nodes-where-one-full-node-does": ({"task": "full-finetune", "model": "llama-3.1-70b", "gpus_per_node": 4},
                                                   "1.3 TB of state needs more than one full node"),
    "pcie-penalty-for-fine-tuning": ({"task": "full-finetune", "model": "llama-3.1-405b", "gpu": "h100-sxm"},
                                     "frontier on every card, so the SXM card named stays"),
    "pcie-penalty-for-pretraining": ({"task": "pretraining", "model": "llama-3.1-8b", "training_tokens": "1T"}, "8B < 70B"),
    "fits-the-weights-not-the-workload": ({"task": "inference", "model": "llama-3.1-405b", "concurrency": 8, "context_tokens": 8192}, "KV fits"),
    "tight-headroom": ({"task": "batch-inference", "model": "llama-3.1-70b", "gpu": "rtx-5090", "concurrency": 4}, "71 GB is 28% of 256 GB"),
    "context-beyond-the-model": ({"task": "inference", "model": "gemma-2-27b", "context_tokens": 8192}, "8,192 is Gemma 2's own"),
    "efficiency-below-floor": ({"task": "full-finetune", "model": "llama-3.1-70b", "interconnect": "ndr-400g-ib"}, "NDR keeps TP above 0.60"),
    "interconnect-bandwidth-cliff": ({"task": "inference", "model": "llama-3.1-70b"}, "single node"),
    "interactive-latency-cliff": ({"task": "inference", "model": "llama-3.1-405b", "latency": "production"}, "production, not interactive"),
    "replicas-need-no-fabric": ({"task": "inference", "model": "llama-3.1-70b"}, "single node"),
    "one-node-is-the-market": ({"task": "full-finetune", "model": "llama-3.1-70b"}, "a cluster"),
    "int4-asked-for-training": ({"task": "full-finetune", "params_b": 13, "precision": "bf16"}, "BF16 was asked for"),
    "precision-asked-for-is-not-the-plan": ({"task": "inference", "model": "llama-3.1-70b", "precision": "fp8"}, "FP8 asked, FP8 served"),
    "qlora-deadline-needs-data-parallel-nodes": ({"task": "qlora", "model": "llama-3.1-70b", "training_tokens": "20B",
                                                  "deadline_days": 90}, "one node (61 days) meets 90 days"),
    "deadline-missed-at-any-scale": ({"task": "pretraining", "model": "llama-3.1-8b", "training_tokens": "1T", "deadline_days": 30},
                                     "13 nodes meet it"),
    "deadline-out-of-reach": ({"task": "pretraining", "model": "llama-3.1-8b", "training_tokens": "1T", "deadline_days": 30}, "13 nodes meet it"),
    "deadline-beyond-an-ib-cluster": ({"task": "pretraining", "model": "llama-3.1-8b", "training_tokens": "1T", "deadline_days": 120}, "3 nodes meet it"),
    "deadline-needs-data-parallel-nodes": ({"task": "pretraining", "model": "llama-3.1-8b", "training_tokens": "1T", "deadline_days": 500},
                                           "one node meets 500 days"),
    "deadline-sets-the-node-count": ({"task": "full-finetune", "model": "llama-3.1-70b", "training_tokens": "300B", "deadline_days": 900},
                                     "the 2 nodes the state needs meet 900 days"),
    "lora-as-qlora-deadline-needs-data-parallel-nodes": ({"task": "lora", "model": "llama-3.1-405b", "training_tokens": "1B",
                                                          "deadline_days": 30}, "one QLoRA node (18 days) meets 30 days"),
    "efficiency-below-floor-at-int4": ({"task": "lora", "model": "llama-3.1-405b", "gpu": "l40"},
                                       "as QLoRA it fits one L40 node: no INT4 unit across nodes"),
    "corpus-counted-as-live-demand": ({"task": "batch-inference", "params_b": 70, "corpus_tokens": "5B", "deadline_days": 0.5},
                                      "a batch job is sized as a batch"),
    "deadline-sets-the-qlora-node-count": ({"task": "lora", "model": "llama-3.1-405b", "training_tokens": "1B",
                                            "deadline_days": 30}, "one QLoRA node (18 days) meets 30 days"),
    "named-build-is-not-buildable": ({"task": "full-finetune", "model": "llama-3.1-70b", "gpu": "rtx-pro-6000"}, "the Pro 6000's nodes are an IB cluster Kentino builds"),
    "impractical-duration": ({"task": "pretraining", "model": "llama-3.1-8b", "training_tokens": "1T", "deadline_days": 120},
                             "a deadline sizes the plan within a year"),
    "no-kentino-build-works": ({"task": "inference", "model": "llama-3.1-70b", "latency": "interactive"},
                               "a Kentino node gives 32 users 25 tokens/s"),
    "named-card-is-not-a-kentino-card": ({"task": "inference", "model": "llama-3.1-70b", "gpu": "l40"},
                                         "Kentino ships the L40"),
    "named-build-kept-though-another-costs-less": ({"task": "inference", "model": "llama-3.1-8b", "gpu": "l4"},
                                                   "one L4 node, the cheapest build that works, is the one named"),
    "the-cheapest-build-that-works": ({"task": "inference", "model": "llama-3.1-70b", "gpu": "rtx-pro-6000"},
                                      "the buyer's card decides, not the price"),
    "users-miss-their-decode-speed": ({"task": "inference", "model": "llama-3.1-70b", "concurrency": 256, "context_tokens": 4096, "latency": "interactive"}, "replicas give every user the speed"),
}


def _fired(facts) -> list[str]:
    return [step.rule for step in EXPERT.recommend(facts).trace]


def test_every_rule_has_a_counter_example():
    """The table above covers exactly the rules of the rule set."""
    assert set(NOT_FIRING) == set(RULES)


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_example_fires(rule_id):
    """The rule's documented example fires it."""
    assert rule_id in _fired(RULES[rule_id].source.example)


@pytest.mark.parametrize("rule_id", sorted(NOT_FIRING))
def test_counter_example_does_not_fire(rule_id):
    """A workload that breaks one of the rule's conditions does not fire it."""
    facts, why = NOT_FIRING[rule_id]
    assert rule_id not in _fired(facts), why
