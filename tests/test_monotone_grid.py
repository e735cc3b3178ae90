"""Monotone by construction (issue 11 item 5), over a grid of more than 10,000 workloads: more concurrency,
context, QPS, tokens/s, corpus or training tokens, or a shorter deadline, never buys fewer GPUs; a card with
more memory and no less bandwidth never needs more nodes; and no plan, frontier included, fills a GPU past the
rules' limit.

Like is compared with like: the GPUs of a workload are those of the build the buyer named (card and node
shape). When the build search keeps it, that is the recommendation; when the search moves to another card
(the named build is frontier work or misses the deadline), the named build's own plan is the one the answer
lists under `alternatives`. A switch of card is a different build, not a smaller one.

Only builds that work are compared (selection.yaml's `works` tests: they fit, give each user the latency
class's speed, meet the deadline, and Kentino builds them). A named build that fails one at more demand is not
sold at any count (the answer moves to another card or says frontier), so its count is no purchase to compare:
with the serving model, 128 users on 4-GPU L40 nodes fail the per-user speed at 11 nodes where 32 users are
served on 14."""
from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid_steps import batch_steps, key, training_steps
from test_pergpu_grid import CARDS, EXPERT, MODELS, PARAMS, TRAINING
from test_pergpu_grid import NODE_SIZES as SHAPES

LATENCIES = ("interactive", "production", "offline")

# each chain: (base facts, the fact that grows, its values from less demand to more)


def serving_chains() -> list[tuple[dict, str, tuple]]:
    chains = []
    for model, gpu, shape, latency in itertools.product(MODELS, CARDS, SHAPES, LATENCIES):
        base = {"task": "inference", "model": model, "gpu": gpu, "gpus_per_node": shape, "latency": latency}
        chains += [
            ({**base, "context_tokens": 8192, "tokens_per_s": 2000}, "concurrency", (1, 32, 128, 512, 2048)),
            ({**base, "concurrency": 64}, "context_tokens", (2048, 8192, 32768, 131072)),
            ({**base, "concurrency": 32}, "tokens_per_s", (500, 5000, 50000)),
            ({**base, "concurrency": 32}, "qps", (1, 100, 10000)),
        ]
    return chains


def batch_chains() -> list[tuple[dict, str, tuple]]:
    chains = []
    for model, gpu, shape in itertools.product(MODELS, CARDS, SHAPES):
        base = {"task": "batch-inference", "model": model, "gpu": gpu, "gpus_per_node": shape}
        chains += batch_steps(base) + [
            ({**base, "corpus_tokens": 10**9, "deadline_days": 2}, "concurrency", (16, 64, 256, 1024)),
        ]
    return chains


def training_chains() -> list[tuple[dict, str, tuple]]:
    chains = []
    for task, model, gpu, shape in itertools.product(TRAINING, MODELS, CARDS, SHAPES):
        base = {"task": task, "model": model, "gpu": gpu, "gpus_per_node": shape}
        chains += training_steps(base)
    return chains


def chains() -> list[tuple[dict, str, tuple]]:
    return serving_chains() + batch_chains() + training_chains()


def named_plan(answer, facts: dict) -> tuple[int, int, str, bool, str]:
    """(GPUs, nodes, kind, works, precision) of the build the buyer named: the recommendation (it works unless it
    is frontier work), or its alternative when the search moved to another card."""
    rec, build = answer.recommendation, (facts["gpu"], facts["gpus_per_node"])
    if (rec.gpu, rec.gpus_per_node) == build:
        nodes = rec.nodes or 1
        return nodes * rec.gpus_per_node, nodes, rec.kind, rec.kind != "frontier", rec.precision
    named = [alt for alt in answer.alternatives if (alt.gpu, alt.gpus_per_node) == build]
    assert named, f"the named build is neither the recommendation nor an alternative: {facts}"
    nodes = named[0].nodes or 1
    return nodes * named[0].gpus_per_node, nodes, named[0].kind, bool(named[0].works), named[0].precision


def preferred_precision(task: str, bigger: str, smaller: str) -> bool:
    """Whether the bigger card's build serves at a precision selection.yaml prefers to the smaller card's: a card
    that holds the model at FP8 where a smaller one needed INT4 may take more nodes for the better answers, so
    the two node counts are not like for like."""
    order = list(EXPERT.ruleset.selection.precisions.get(task, ()))
    return bigger in order and smaller in order and order.index(bigger) < order.index(smaller)


def memory_breach(answer, facts: dict) -> str | None:
    """Why the recommended plan fills a GPU past the rules' limit (None when it does not)."""
    figures = answer.figures
    if "plan_gpu_memory_fraction" not in figures:
        return "no plan_gpu_memory_fraction"
    limit = PARAMS["training_fraction_max" if facts["task"] in TRAINING else "workload_fraction_max"]
    fraction = figures["plan_gpu_memory_fraction"].value
    if fraction > limit * (1 + 1e-6):
        return f"{answer.recommendation.kind}: {fraction:.0%} of each GPU, above {limit:.0%}"
    return None


@pytest.fixture(scope="module")
def grid() -> dict:
    """Every workload of the grid, answered once: facts key -> (named build's GPUs, nodes, kind, works, memory
    breach)."""
    out = {}
    for base, fact, values in chains():
        for value in values:
            facts = {**base, fact: value}
            if key(facts) not in out:
                answer = EXPERT.recommend(facts)
                out[key(facts)] = (*named_plan(answer, facts), memory_breach(answer, facts))
    return out


def dominant_pairs() -> list[tuple[str, str]]:
    """(bigger, smaller) cards: more memory, and no less bandwidth, compute or link between a node's GPUs (the
    RTX 5090 has more memory and bandwidth than the L4, but its GPUs talk through host memory at twice the L4's
    peer-to-peer latency, which a PCIe-bound TP all-reduce feels)."""
    knowledge = EXPERT.knowledge
    gpus = knowledge.gpus

    def no_less(a, b) -> bool:
        link_a, link_b = knowledge.link(gpus[a].intra_node_link), knowledge.link(gpus[b].intra_node_link)
        return (gpus[a].memory_bandwidth_gbs >= gpus[b].memory_bandwidth_gbs
                and gpus[a].bf16_dense_tflops >= gpus[b].bf16_dense_tflops
                and gpus[a].fp8_dense_tflops >= gpus[b].fp8_dense_tflops
                and link_a.bandwidth_gbs >= link_b.bandwidth_gbs and link_a.latency_us <= link_b.latency_us)
    return [(a, b) for a, b in itertools.permutations(CARDS, 2)
            if gpus[a].memory_gb > gpus[b].memory_gb and no_less(a, b)]


def test_the_grid_holds_over_ten_thousand_workloads(grid):
    """The invariants run over at least 10,000 distinct workloads (issue 11, Done)."""
    assert len(grid) >= 10_000


def test_more_demand_never_buys_fewer_gpus(grid):
    """Along every chain, each step of more demand (or a shorter deadline) needs at least the GPUs of the last."""
    broken = []
    for base, fact, values in chains():
        for less, more in itertools.pairwise(values):
            before, after = grid[key({**base, fact: less})], grid[key({**base, fact: more})]
            # like with like: a step that moves the named build to another precision (FP8 replicas to INT4
            # ones that hold more requests each) is another build, as a switch of card is
            if before[3] and after[3] and after[0] < before[0] and before[4] == after[4]:
                broken.append(f"{base} {fact} {less} -> {more}: {before[2]} {before[0]} GPUs -> {after[2]} {after[0]}")
    assert not broken, f"{len(broken)} violations, e.g. {broken[:5]}"


def test_a_bigger_card_never_needs_more_nodes(grid):
    """For the same workload and node shape, a card with more memory and no less bandwidth needs no more nodes."""
    pairs = dominant_pairs()
    assert ("rtx-pro-6000", "l40") in pairs and ("rtx-pro-6000", "rtx-5090") not in pairs
    broken = []
    for facts_key, (_, nodes, kind, works, precision, _) in grid.items():
        facts = dict(facts_key)
        for bigger, smaller in pairs:
            if facts["gpu"] == smaller and works:
                other = grid[key({**facts, "gpu": bigger})]
                if other[3] and other[1] > nodes and not preferred_precision(facts["task"], other[4], precision):
                    broken.append(f"{facts}: {smaller} {kind} {nodes} nodes, {bigger} {other[2]} {other[1]}")
    assert not broken, f"{len(broken)} violations, e.g. {broken[:5]}"


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(MODELS), shape=st.sampled_from(SHAPES), latency=st.sampled_from(LATENCIES),
       task=st.sampled_from(("inference", "batch-inference")), concurrency=st.integers(1, 4096),
       context=st.integers(1024, 131072), tokens=st.none() | st.integers(1, 200_000))
def test_a_bigger_card_never_needs_more_nodes_anywhere(model, shape, latency, task, concurrency, context, tokens):
    """Any served workload: of every pair of cards where one has more memory and no less bandwidth, that card's
    build needs no more nodes than the other's."""
    base = {"task": task, "model": model, "gpus_per_node": shape, "latency": latency, "concurrency": concurrency,
            "context_tokens": context, **({} if tokens is None else {"tokens_per_s": tokens})}
    nodes = {}
    for card in CARDS:
        facts = {**base, "gpu": card}
        _, count, _, works, precision = named_plan(EXPERT.recommend(facts), facts)
        if works:
            nodes[card] = (count, precision)
    broken = [(bigger, nodes[bigger], smaller, nodes[smaller]) for bigger, smaller in dominant_pairs()
              if bigger in nodes and smaller in nodes and nodes[bigger][0] > nodes[smaller][0]
              and not preferred_precision(task, nodes[bigger][1], nodes[smaller][1])]
    assert not broken, f"{base}: {broken}"


def test_no_plan_fills_a_gpu_past_the_limit(grid):
    """Every recommended plan of the grid, frontier included, keeps each GPU within the rules' memory limit."""
    broken = [f"{dict(k)}: {v[5]}" for k, v in grid.items() if v[5] is not None]
    assert not broken, f"{len(broken)} violations, e.g. {broken[:5]}"


def test_a_drop_in_gpus_would_be_seen():
    """The named build's GPUs are read from the alternatives when the search moved: a 70B full fine-tune named on
    the RTX 5090 (frontier there) is counted at the 5090's nodes, not the recommended Pro 6000's."""
    facts = {"task": "full-finetune", "model": "llama-3.1-70b", "gpu": "rtx-5090", "gpus_per_node": 8}
    answer = EXPERT.recommend(facts)
    assert answer.recommendation.gpu != "rtx-5090"
    gpus, nodes, kind, _, _ = named_plan(answer, facts)
    assert kind == "frontier" and gpus == nodes * 8 > (answer.recommendation.nodes or 1) * 8


def test_replicas_of_units_hold_only_their_share():
    """Replicas of 2-4 node units each hold a share of the requests, on the fewest nodes of any unit size: every
    request has a place, and no other size in Kentino's range needs fewer nodes in all."""
    from kentino_expert.domain import pergpu
    from kentino_expert.domain.figures_serving import demand_units, serving_load
    knowledge, params = EXPERT.knowledge, PARAMS
    load = serving_load(knowledge.model("llama-4-maverick"), knowledge.gpu("rtx-pro-6000"), "int4", 8192, knowledge,
                        params)
    values = {"replicas_needed_int4": 3, "serving_nodes_int4": pergpu.unit_nodes(load, 4, 2048)}
    demand_units(values, {"concurrency": 2048}, params, {"int4": load}, 4)
    size, units = values["demand_unit_nodes_int4"], values["demand_units_int4"]
    assert units * pergpu.unit_capacity(load, 4, size) >= 2048 and units * size >= 3
    assert values["serving_nodes_int4"] > params["max_ib_cluster_nodes"] >= size  # no one unit holds them all
    for other in range(max(2, pergpu.smallest_unit(load, 4)), int(params["max_ib_cluster_nodes"]) + 1):
        other_units = max(math.ceil(2048 / pergpu.unit_capacity(load, 4, other)), math.ceil(3 / other))
        assert units * size <= other_units * other


# the demand facts of a served workload and how each grows (a deadline grows demand by shrinking)
SERVING_AXES = {"concurrency": st.integers(1, 4096), "context_tokens": st.integers(1024, 131072),
                "tokens_per_s": st.integers(1, 200_000), "qps": st.integers(1, 20_000)}


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(CARDS), shape=st.sampled_from(SHAPES),
       latency=st.sampled_from(LATENCIES), axis=st.sampled_from(sorted(SERVING_AXES)), data=st.data())
def test_more_serving_demand_never_buys_fewer_gpus(model, gpu, shape, latency, axis, data):
    """Any served workload: raising one demand fact (concurrency, context, tokens/s or QPS) never lowers the
    GPUs of the named build at the same precision (like with like, as test_more_demand_never_buys_fewer_gpus:
    the named build's FP8 plan at 666 users of gpt-oss-120b on 8 x RTX 5090 works with 48 GPUs and is kept, the
    rules' precision first; at 1,719 users FP8 does not work and FP4 replicas, another build, need 40)."""
    base = {"task": "inference", "model": model, "gpu": gpu, "gpus_per_node": shape, "latency": latency,
            "concurrency": data.draw(st.integers(1, 1024)), "context_tokens": data.draw(st.integers(1024, 65536))}
    low, high = sorted((data.draw(SERVING_AXES[axis]), data.draw(SERVING_AXES[axis])))
    less, more = {**base, axis: low}, {**base, axis: high}
    after, before = named_plan(EXPERT.recommend(more), more), named_plan(EXPERT.recommend(less), less)
    assert not (after[3] and before[3]) or after[4] != before[4] or after[0] >= before[0]


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(task=st.sampled_from(TRAINING + ("batch-inference",)), model=st.sampled_from(MODELS),
       gpu=st.sampled_from(CARDS), shape=st.sampled_from(SHAPES), tokens=st.integers(10**8, 10**13),
       more=st.floats(1, 100), days=st.floats(0.5, 365), shorter=st.floats(1, 50))
def test_more_tokens_or_a_shorter_deadline_never_buys_fewer_gpus(task, model, gpu, shape, tokens, more, days,
                                                                  shorter):
    """Any training or batch job: more tokens, or the same tokens by an earlier deadline, never lowers the GPUs
    of the named build."""
    fact = "corpus_tokens" if task == "batch-inference" else "training_tokens"
    base = {"task": task, "model": model, "gpu": gpu, "gpus_per_node": shape}
    start = {**base, fact: tokens, "deadline_days": days}
    gpus = named_plan(EXPERT.recommend(start), start)[0]
    bigger = {**start, fact: int(tokens * more)}
    sooner = {**start, "deadline_days": max(0.001, days / shorter)}
    assert named_plan(EXPERT.recommend(bigger), bigger)[0] >= gpus
    assert named_plan(EXPERT.recommend(sooner), sooner)[0] >= gpus
