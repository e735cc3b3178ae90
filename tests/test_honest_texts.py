"""Texts agree with their answer's figures: over a grid of workloads, every `because`, summary and warning that
claims a cause (memory pushes to N nodes, N nodes give a throughput, X% is under Y%) is checked against the
figures of the same answer; a plan bigger than its arithmetic must cite the document rule that made it so."""
from __future__ import annotations

import random
import re

import pytest

TASKS = ("inference", "batch-inference", "lora", "qlora", "full-finetune", "pretraining")
PARAMS_B = (3, 13, 120, 330, 700, 2000)
LATENCIES = ("interactive", "production", "offline")

# "75% of VRAM at FP8, under 90%" / "53% of 768 GB, within the 70%": the first share is at most the second
_SHARE_UNDER = re.compile(r"(\d+)% of [^.;:()]*?(?:,|:)? (?:under|within) (?:the )?(\d+)%")
# "64% of VRAM, above the comfortable 60%": the first share is at least the second
_SHARE_ABOVE = re.compile(r"(\d+)% of [^.;:()]*?,? above (?:the )?(?:comfortable )?(\d+)%")
# "(96% of VRAM > 90%)" / "0.66 < 0.60": a comparison written out with its operands
_COMPARED = re.compile(r"(\d[\d,]*(?:\.\d+)?)(%?)(?: of VRAM)? ([<>]) (\d[\d,]*(?:\.\d+)?)(%?)")
# "KV cache and concurrent serving push to 2 nodes" / "Training state 1,312 GB needs 2 nodes": a memory cause
_MEMORY_NODES = re.compile(r"\b(?:KV cache|memory|state|weights)\b[^.;:]*?\b(?:push(?:es)? to|needs?) (\d+) nodes")
# "Demand of 3,500 tokens/s from 64 requests in flight needs 3 nodes: each gives 1,250 tokens/s to 24 requests
# within the interactive targets": a throughput cause, in tokens and in requests
_THROUGHPUT_NODES = re.compile(r"Demand of ([\d,]+) tokens/s from ([\d,]+) requests in flight needs (\d+) (?:INT4 )?"
                               r"nodes: each gives ([\d,]+) tokens/s to ([\d,]+) requests")
_HEURISTIC = re.compile(r"\bH-[A-Z0-9]+(?:-[A-Z0-9]+)*\b")


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _figures(answer) -> dict:
    return {name: figure.value for name, figure in answer.figures.items()}


def _texts(answer) -> list[tuple[str, str]]:
    """(where, text) of every sentence the answer says: summary, each step's because, each warning."""
    out = [("summary", answer.recommendation.summary)]
    out += [(f"because of {step.rule}", step.because) for step in answer.trace]
    out += [(f"warning {w.code}", w.message) for w in answer.warnings]
    return out


def _memory_nodes(figures: dict) -> set:
    """Every node count a memory figure of the answer gives."""
    names = ("serving_nodes_fp8", "serving_nodes_int4", "training_nodes", "qlora_nodes")
    return {figures[name] for name in names if name in figures}


def _claim_violations(where: str, text: str, figures: dict) -> list[str]:
    """What the text claims that its answer's figures contradict."""
    bad = []
    for share, limit in _SHARE_UNDER.findall(text):
        if int(share) > int(limit):
            bad.append(f"{where}: says {share}% is under {limit}%")
    for share, limit in _SHARE_ABOVE.findall(text):
        if int(share) < int(limit):
            bad.append(f"{where}: says {share}% is above {limit}%")
    for left, left_pct, op, right, right_pct in _COMPARED.findall(text):
        holds = _number(left) < _number(right) if op == "<" else _number(left) > _number(right)
        if left_pct == right_pct and not holds:
            bad.append(f"{where}: says {left}{left_pct} {op} {right}{right_pct}")
    for nodes in _MEMORY_NODES.findall(text):
        if int(nodes) not in _memory_nodes(figures):
            bad.append(f"{where}: says memory needs {nodes} nodes; memory figures say {sorted(_memory_nodes(figures))}")
    for demand, requests, nodes, per_node, per_node_requests in _THROUGHPUT_NODES.findall(text):
        demand, requests, nodes = _number(demand), _number(requests), int(nodes)
        per_node, per_node_requests = _number(per_node), _number(per_node_requests)
        # the shown figures are rounded to whole tokens/s: allow half a token per node; a request rate or a corpus
        # is in the tokens, so N nodes carry both and N - 1 fall short of one of them
        carries = nodes * (per_node + 0.5) >= demand and nodes * per_node_requests >= requests
        one_less = (nodes - 1) * (per_node - 0.5) >= demand and (nodes - 1) * per_node_requests >= requests
        if not carries or one_less:
            bad.append(f"{where}: says {demand:,.0f} tokens/s of {requests:,.0f} requests needs {nodes} nodes at "
                       f"{per_node:,.0f} each, {per_node_requests:,.0f} requests each")
    if "does not fit one node even at INT4" in text:
        wmax, lmax = figures.get("weights_fraction_max", 0.7), figures.get("workload_fraction_max", 0.9)
        if figures["weights_fraction_int4"] <= wmax and figures["workload_fraction_int4"] <= lmax:
            bad.append(f"{where}: says it does not fit one node at INT4; the INT4 figures fit")
    return bad


def _unit_nodes(answer) -> int | None:
    """Nodes one model copy spans in a multi-node plan (a multi-node-ib cluster, or a unit of replicas)."""
    rec = answer.recommendation
    if rec.kind == "multi-node-ib":
        return rec.nodes
    if rec.kind == "dp-replicas" and rec.parallelism.pp:
        return rec.parallelism.pp
    return None


def _memory_nodes_of_plan(answer, figures: dict) -> int | None:
    """What the memory arithmetic alone asks for at the plan's precision."""
    task, precision = answer.facts["task"], answer.recommendation.precision
    if task in ("inference", "batch-inference"):
        return figures.get(f"serving_nodes_{precision}")
    if task == "lora" and precision == "int4":
        return figures.get("qlora_nodes")
    return figures.get("training_nodes")


def _plan_violations(answer, figures: dict, params: dict) -> list[str]:
    """A multi-node unit bigger than its memory arithmetic must say which document rule made it so, and
    show the memory figure it overrode."""
    unit, memory = _unit_nodes(answer), _memory_nodes_of_plan(answer, figures)
    if unit is None or memory is None or unit <= memory:
        return []
    decider = next(step for step in answer.trace if step.concluded.get("recommended_kind"))
    if figures.get("nodes_for_deadline", 0) > memory and "deadline" in decider.because \
            and str(answer.recommendation.nodes) in decider.because:
        return []  # a deadline sized the plan, and the text says so with the count
    bad = []
    if not _HEURISTIC.search(decider.because) and "limit" not in decider.because:
        bad.append(f"{decider.rule}: a {unit}-node unit where memory needs {memory} node(s), and its because "
                   f"cites no rule or limit: {decider.because!r}")
    precision = answer.recommendation.precision
    shown = figures.get(f"workload_fraction_{precision}")
    if shown is not None and f"{shown:.0%}" not in decider.because:
        bad.append(f"{decider.rule}: its because does not show the memory figure ({shown:.0%} of one node)")
    return bad


def violations(expert, answer) -> list[str]:
    figures = {**expert.ruleset.parameter_values, **_figures(answer)}
    out = []
    for where, text in _texts(answer):
        out += _claim_violations(where, text, figures)
    return out + _plan_violations(answer, figures, expert.ruleset.parameter_values)


def _grid(expert, count: int, seed: int) -> list[dict]:
    """A seeded sample of workloads over tasks, catalog models and sizes, cards, node sizes and demand."""
    rng = random.Random(seed)
    models = list(expert.knowledge.models)
    cards = [gpu.id for gpu in expert.knowledge.gpus.values()]
    out = []
    for _ in range(count):
        task = rng.choice(TASKS)
        facts = {"task": task, "gpu": rng.choice(cards), "gpus_per_node": rng.choice((2, 4, 8, 8))}
        if rng.random() < 0.75:
            facts["model"] = rng.choice(models)
        else:
            facts["params_b"] = rng.choice(PARAMS_B)
        if task in ("inference", "batch-inference"):
            facts["concurrency"] = rng.choice((1, 8, 32, 64, 256, 1024))
            facts["context_tokens"] = rng.choice((4096, 8192, 32768))
        if task == "inference":
            facts["latency"] = rng.choice(LATENCIES)
            facts["tenancy"] = rng.choice(("single", "multi"))
            if rng.random() < 0.5:
                facts["tokens_per_s"] = rng.choice((200, 1000, 5000, 20000))
        if task == "batch-inference" and rng.random() < 0.5:
            facts.update(corpus_tokens=rng.choice((1e8, 1e9, 1e10)), deadline_days=rng.choice((1, 2, 7)))
        if task in ("full-finetune", "pretraining") and rng.random() < 0.5:
            facts.update(training_tokens=rng.choice((1e10, 3e11, 1e12)), deadline_days=rng.choice((7, 30, 365)))
        out.append(facts)
    return out


def _review_sweep() -> list[dict]:
    """The review's 405B sweep: concurrency x demand at production and interactive latency."""
    return [{"task": "inference", "model": "llama-3.1-405b", "concurrency": concurrency, "context_tokens": 8192,
             "tokens_per_s": demand, "latency": latency}
            for concurrency in (1, 8, 32, 64, 128, 256, 512) for demand in (200, 1000, 5000)
            for latency in ("production", "interactive")]


def test_the_405b_answer_cites_the_rule_not_a_memory_cause(expert):
    """405B at production latency, one node by memory: the 2-node plan cites H-MS-405B-LATENCY and shows the
    memory share of one node."""
    answer = expert.recommend({"task": "inference", "model": "llama-3.1-405b", "concurrency": 32,
                               "context_tokens": 8192, "tokens_per_s": 200, "latency": "production"})
    summary = answer.recommendation.summary
    assert answer.recommendation.nodes == 2 and answer.figures["serving_nodes_fp8"].value == 1
    assert "push to 2 nodes" not in summary
    share = answer.figures["workload_fraction_fp8"].value
    assert "H-MS-405B-LATENCY" in summary and f"{share:.0%} of one node" in summary
    assert violations(expert, answer) == []


def test_the_checker_catches_a_false_memory_cause(expert):
    """The checker itself flags the review's sentence against figures that say one node."""
    figures = {"serving_nodes_fp8": 1, "serving_nodes_int4": 1}
    found = _claim_violations("summary", "KV cache and concurrent serving push to 2 nodes, TP=8 x PP=2.", figures)
    assert len(found) == 1 and "memory needs 2 nodes" in found[0]
    assert _claim_violations("x", "Weights + KV cache use 95% of VRAM at FP8, under 90%.", figures)
    assert _claim_violations("x", "FP8 weights take 55% of VRAM, above the comfortable 60%.", figures)
    assert _claim_violations("x", "Naive TP across nodes projects 0.60 < 0.60.", figures)
    claim = ("Demand of 3,000 tokens/s from {} requests in flight needs {} nodes: "
             "each gives 1,250 tokens/s to 8 requests")
    assert _claim_violations("x", claim.format(16, 5), figures)
    assert not _claim_violations("x", claim.format(16, 3), figures)
    assert not _claim_violations("x", claim.format(32, 4), figures)
    assert _claim_violations("x", claim.format(32, 3), figures)


@pytest.mark.parametrize("seed", [1, 2])
def test_texts_agree_with_figures_over_a_grid(expert, seed):
    """Over 1,500 seeded workloads (and the review's 405B sweep) no text contradicts its own figures."""
    grid = _grid(expert, 1500, seed) + (_review_sweep() if seed == 1 else [])
    found = []
    for facts in grid:
        answer = expert.recommend(facts)
        found += [f"{facts}: {v}" for v in violations(expert, answer)]
    assert not found, f"{len(found)} texts disagree with their figures, e.g.:\n" + "\n".join(found[:12])


def test_memory_claims_are_checked_in_the_grid(expert):
    """The grid reaches texts the checker reads (so a pass is not vacuous): memory node claims and shares."""
    seen = {"memory": 0, "share": 0, "throughput": 0}
    for facts in _grid(expert, 600, 3):
        for _, text in _texts(expert.recommend(facts)):
            seen["memory"] += bool(_MEMORY_NODES.search(text))
            seen["share"] += bool(_SHARE_UNDER.search(text))
            seen["throughput"] += bool(_THROUGHPUT_NODES.search(text))
    assert all(seen.values()), seen


def test_an_int4_units_efficiency_warning_speaks_of_its_own_nodes(expert):
    """A multi-node INT4 serving unit is warned about the efficiency of its own unit's nodes (recommended_pp),
    not of the FP8 state's (3 nodes here), and the warning gives the TP x PP plan's own projection."""
    answer = expert.recommend({"task": "inference", "model": "llama-4-maverick", "gpu": "l4", "context_tokens": 1024})
    rec = answer.recommendation
    assert (rec.kind, rec.precision, rec.parallelism.pp) == ("multi-node-ib", "int4", 2)
    floors = {warning.code: warning.message for warning in answer.warnings if "floor" in warning.code}
    assert set(floors) == {"efficiency-below-floor-at-int4"}
    assert "all 2 nodes of the INT4 unit" in floors["efficiency-below-floor-at-int4"]
    plan = {name: figure.value for name, figure in answer.figures.items()}["plan_efficiency_int4"]
    assert f"({plan:.2f}x)" in floors["efficiency-below-floor-at-int4"]


def test_a_qlora_plan_below_the_floor_is_not_sold(expert):
    """LoRA of 405B on L4s needs a multi-node QLoRA unit whose PCIe efficiency is under the floor: training
    below the floor is not a build Kentino sells (selection.yaml), so the answer moves to a card that holds it
    on one node and says why, naming the floor."""
    answer = expert.recommend({"task": "lora", "model": "llama-3.1-405b", "gpu": "l4"})
    rec = answer.recommendation
    assert (rec.gpu, rec.nodes, rec.precision) != ("l4", 1, "int4") and rec.nodes == 1
    switch = next(warning.message for warning in answer.warnings if warning.code == "card-switch")
    assert "below the 60% floor" in switch and "8 x l4" in switch
