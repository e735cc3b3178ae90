"""The targets of issue 13 (a chat turn as fast as a plain answer), each measured beside its baseline in the
same run, and the peer table (peers.py). Each measurement interleaves the baseline and the target, one run of
each in turn, so that load from elsewhere on the machine hits both alike.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kentino_expert.answer.pipeline import answer_for
from kentino_expert.domain.derive import derive
from kentino_expert.domain.workload import validate_facts
from kentino_expert.engine.chaining import final_state, run_rules
from kentino_expert.engine.compiled import CompiledEngine
from kentino_expert.expert import Expert
from kentino_expert.service.decide import evaluate_decision

from . import peers
from .benchgen import generated_rules_dir
from .floors import CORE, ENGINE, FLOOR, SIZING, cores, http_ceiling
from .workloads import unique_chat, unique_final


def _stats(samples: list) -> dict:
    samples = sorted(samples)
    return {"median_us": statistics.median(samples), "p99_us": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
            "runs": len(samples)}


def side_by_side(functions: dict, runs: int) -> dict:
    """name -> median/p99 (us) of each function, run in turn (a, b, c, a, b, c, ...) `runs` times each: wall
    clock, and CPU time of this thread (`cpu_median_us`), which a busy machine's waits do not inflate."""
    samples = {name: [] for name in functions}
    cpu = {name: [] for name in functions}
    for index in range(runs):
        for name, fn in functions.items():
            start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
            fn(index)
            cpu[name].append((time.thread_time_ns() - start_cpu) / 1000)
            samples[name].append((time.perf_counter_ns() - start) / 1000)
    return {name: {**_stats(values), "cpu_median_us": statistics.median(cpu[name])}
            for name, values in samples.items()}


def in_process(runs: int) -> dict:
    """A traced recommendation on new facts beside a first chat turn on new facts (answer, questions,
    why-not), both on the bundled rules: the recommendation as the service answers it (the build search's
    candidates on the compiled evaluator, durable-rules deciding and tracing the answer) and with every
    candidate on durable-rules too (the baseline of the earlier runs)."""
    expert = Expert()
    return side_by_side({
        "traced recommendation, new facts": lambda i: answer_for(validate_facts(unique_final(i)), expert.knowledge,
                                                                 expert.ruleset, expert.engine),
        "traced recommendation as the service answers, new facts": lambda i: expert.recommend_traced(
            unique_final(i)),
        "first chat turn, new facts": lambda i: evaluate_decision(expert, unique_chat(i)),
    }, runs)


def at_500_rules(runs: int) -> dict:
    """One evaluation of the bundled rules plus 500 generated ones: compiled evaluator, durable-rules and the
    reference evaluator, on each of four workloads in turn."""
    from .bench import WORKLOADS
    with tempfile.TemporaryDirectory() as tmp:
        expert = Expert(generated_rules_dir(Path(tmp) / "rules", 500))
        reference = Expert(expert.rules_dir, backend="reference")
        compiled = CompiledEngine(expert.ruleset)
        ruleset = expert.ruleset
        states = [derive(validate_facts(w), expert.knowledge, ruleset.fact_policies, ruleset.parameter_values).state()
                  for w in WORKLOADS]
        rows = side_by_side({
            "compiled evaluator": lambda i: compiled.evaluate(states[i % 4]),
            "compiled evaluator, traced": lambda i: run_rules(ruleset, states[i % 4], compiled),
            "durable-rules, traced": lambda i: run_rules(ruleset, states[i % 4], expert.engine),
            "reference evaluator, traced": lambda i: run_rules(ruleset, states[i % 4], reference.engine),
        }, runs)
        rows["rules"] = len(ruleset.rules)
        expert.close()
        return rows


def peer_table(runs: int) -> dict:
    """The document's flow (12 rules) in CLIPS, ZEN and plain Python, beside this engine's deciding rules (the
    what-if subset of the bundled rules), over the same derived states; and how often each agrees."""
    from .bench import WORKLOADS
    expert = Expert()
    oracle = expert.kinds
    params = dict(expert.ruleset.parameter_values)
    states = [derive(validate_facts(w), expert.knowledge, oracle.ruleset.fact_policies,
                     oracle.ruleset.parameter_values).state() for w in WORKLOADS]
    functions = {"plain Python function (12-rule flow)": peers.python_function(params)}
    skipped = {}
    for label, make in (("CLIPS via clipspy (12-rule flow)", peers.clips_runner),
                        ("GoRules ZEN via zen-engine (12-rule flow)", peers.zen_runner)):
        runner, reason = make(params)
        if runner is None:
            skipped[label] = reason
        else:
            functions[label] = runner
    durable = expert.engine.__class__(oracle.ruleset)
    ours = {f"this engine, compiled evaluator ({len(oracle.ruleset.rules)} deciding rules)":
            lambda s: oracle.engine.evaluate(s).kind,
            f"this engine, durable-rules ({len(oracle.ruleset.rules)} deciding rules)":
            lambda s: final_state(oracle.ruleset, s, durable).get("recommended_kind")}
    agree = {name: sum(fn(s) == oracle.engine.evaluate(s).kind for s in states) for name, fn in functions.items()}
    table = side_by_side({name: (lambda i, fn=fn: fn(states[i % len(states)])) for name, fn in
                          {**functions, **ours}.items()}, runs)
    for name, row in table.items():
        row["agrees_with_rules"] = f"{agree[name]}/{len(states)}" if name in agree else "-"
    return {"rows": table, "skipped": skipped}


def chat_memory(turns: int) -> list[dict]:
    """RSS of a fresh process at the start and along `turns` first chat turns on new facts (caches churn)."""
    script = ("import json; from benchmarks.targets import _chat_memory_rows; "
              f"print(json.dumps(_chat_memory_rows({turns})))")
    result = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, check=True,
                            cwd=Path(__file__).resolve().parent.parent)  # its progress goes to stderr
    return json.loads(result.stdout)


def _chat_memory_rows(turns: int) -> list[dict]:
    from .bench import _memory_now
    expert = Expert()
    evaluate_decision(expert, unique_chat(0))
    rows = [{"turns": 1, **_memory_now()}]
    marks = {turns * tenth // 10 for tenth in range(1, 11)}
    for index in range(1, turns + 1):
        evaluate_decision(expert, unique_chat(index))
        if index in marks:
            rows.append({"turns": index, **_memory_now()})
            print(f"  chat memory: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def _row(rows, workers, clients, facts):
    return next((r for r in rows if r["workers"] == workers and r["clients"] == clients and r["facts"] == facts), None)


def verdicts(results: dict) -> list[dict]:
    """Each target of issue 13 with its figure and whether it is met (None: not measured in this run)."""
    out = []
    floor = results.get("issue13_floor")  # the traced recommendation's floor (floors.py), when measured

    def add(target, figure, met, reachable=None):
        out.append({"target": target, "figure": figure, "met": met, "reachable": reachable})

    turn = results.get("issue13_in_process")
    if turn:
        durable, chat = turn["traced recommendation, new facts"], turn["first chat turn, new facts"]
        # judged against the faster of the two recommendations (the service's): the stricter ratio
        base = turn.get("traced recommendation as the service answers, new facts", durable)
        ratio = chat["cpu_median_us"] / base["cpu_median_us"]
        add("first chat turn <= 2x one traced recommendation, in process (median CPU time, new facts)",
            f"{chat['cpu_median_us']:,.0f} us vs {base['cpu_median_us']:,.0f} us as the service answers: "
            f"{ratio:.2f}x (vs {durable['cpu_median_us']:,.0f} us with every candidate on durable-rules: "
            f"{chat['cpu_median_us'] / durable['cpu_median_us']:.2f}x)"
            + _probe_budget_words(results.get("issue13_turn_split"), base["cpu_median_us"]), ratio <= 2)
        add("traced recommendation <= 350 us median (CPU time)",
            f"{base['cpu_median_us']:,.0f} us as the service answers, {durable['cpu_median_us']:,.0f} us with every "
            "candidate on durable-rules" + (_floor_words(floor) if floor else ""), base["cpu_median_us"] <= 350,
            floor[FLOOR]["cpu_median_us"] <= 350 if floor else None)
    http = results.get("http") or []
    chat1, final1 = _row(http, 1, 1, "chat-unique"), _row(http, 1, 1, "final-unique")
    if chat1 and final1:
        ratio = chat1["p50_ms"] / final1["p50_ms"]
        add("first chat turn <= 2x a final answer over HTTP (p50, 1 worker, 1 client, new facts)",
            f"{chat1['p50_ms']:.1f} ms vs {final1['p50_ms']:.1f} ms: {ratio:.2f}x", ratio <= 2)
    chat16, final16 = _row(http, 2, 16, "chat-unique"), _row(http, 2, 16, "final-unique")
    if chat16:
        words, reachable = _ceiling(floor, _row(http, 2, 16, "chat"), 600)
        add("HTTP 2 workers, 16 clients, new facts: chat turns >= 600/s with p99 <= 25 ms",
            f"{chat16['rps']:,.0f}/s, p99 {chat16['p99_ms']:.1f} ms{words}",
            chat16["rps"] >= 600 and chat16["p99_ms"] <= 25, reachable)
    if final16:
        words, reachable = _ceiling(floor, _row(http, 2, 16, "final"), 1500)
        add("HTTP 2 workers, 16 clients, new facts: final answers >= 1,500/s", f"{final16['rps']:,.0f}/s{words}",
            final16["rps"] >= 1500, reachable)
    rules = results.get("issue13_500_rules")
    if rules:
        compiled = rules["compiled evaluator"]["cpu_median_us"]
        add(f"at ~500 rules ({rules['rules']}), one evaluation <= 3 ms (compiled evaluator, what-if probes; CPU)",
            f"{compiled / 1000:.2f} ms (traced {rules['compiled evaluator, traced']['cpu_median_us'] / 1000:.2f} ms; "
            f"durable-rules {rules['durable-rules, traced']['cpu_median_us'] / 1000:.1f} ms, reference "
            f"{rules['reference evaluator, traced']['cpu_median_us'] / 1000:.1f} ms)", compiled <= 3000)
    memory = results.get("issue13_chat_memory")
    if memory:
        growth = memory[-1]["rss_mb"] - memory[1]["rss_mb"] if len(memory) > 2 else float("nan")
        add(f"memory flat over {memory[-1]['turns']:,} chat turns (RSS from 10% of the run to its end)",
            f"{memory[0]['rss_mb']:.1f} MB at start, {memory[1]['rss_mb']:.1f} MB at {memory[1]['turns']:,}, "
            f"{memory[-1]['rss_mb']:.1f} MB at the end", growth < 5)
    return out


def _probe_budget_words(split: dict | None, recommendation_us: float) -> str:
    """What 2x a recommendation leaves each candidate build a turn's what-if probes size, once the turn's answer,
    why-not and the rest are paid, beside what one costs now ("" without the turn split measured)."""
    if not split or not split.get("probe_candidates_per_turn"):
        return ""
    parts = split["parts"]
    fixed = sum(parts[name]["cpu_median_us"] for name in ("answer", "why-not", "rest"))
    builds, left = split["probe_candidates_per_turn"], 2 * recommendation_us - fixed
    if left <= 0:
        return f"; the turn's answer, why-not and the rest alone take {fixed:,.0f} us, 2x before any question"
    budget = left / builds
    rules = split.get("compiled_rules_cpu_per_state_us")
    return (f"; 2x leaves the questions {left:,.0f} us once the turn's answer, why-not and "
            f"the rest ({fixed:,.0f} us) are paid: {budget:,.0f} us for each of the {builds:g} builds its probes "
            f"size, which take {split['questions_cpu_per_candidate_us']:,.0f} us each"
            + (f", {rules:,.0f} us of it the compiled rules deciding the build" if rules else ""))


def _floor_words(floor: dict) -> str:
    engine, core, least = (floor[name]["cpu_median_us"] for name in (ENGINE, CORE, FLOOR))
    return (f"; its floor as designed {least:,.0f} us (durable-rules' traced run {engine:,.0f} us, "
            f"{core:,.0f} us of it in its C core, + sizing the {floor['builds_weighed']:g} builds the search weighs "
            f"{floor[SIZING]['cpu_median_us']:,.0f} us)")


def _ceiling(floor: dict | None, cached: dict | None, target: float) -> tuple[str, bool | None]:
    """(words, whether the target is within the ceiling) of the rate new facts allow on this machine's cores, from
    the recommendation's floor and a request the cache serves (None, "" without both measured)."""
    if not floor or not cached:
        return "", None
    ceiling = http_ceiling(floor[FLOOR]["cpu_median_us"], cached["rps"], cores())
    return (f"; at most {ceiling['ceiling_rps']:,.0f}/s on these {ceiling['cpus']} CPUs if each request cost only "
            f"the recommendation's floor ({ceiling['floor_us']:,.0f} us) beyond what a cached one costs "
            f"({ceiling['cached_rps']:,.0f}/s: {ceiling['around_request_us']:,.0f} CPU-us each)",
            ceiling["ceiling_rps"] >= target)


def verdict_word(row: dict) -> str:
    """met / not met / not measured, and "out of reach as specified" when the target is beyond its floor."""
    if row["met"] is None:
        return "not measured"
    if row["met"]:
        return "met"
    if row.get("reachable") is False:
        return "not met: out of reach as specified (beyond the floor of the fixed design on this machine)"
    return "not met"


def print_verdicts(rows: list[dict]) -> None:
    print("\n## Against the targets of issue 13 (measured side by side in this run)")
    for row in rows:
        print(f"  {row['target']}: {row['figure']} -> {verdict_word(row)}")


def print_peers(table: dict) -> None:
    print("\n## Peers: the document's flow over the same derived states")
    print(f"{'':<56}{'median us':>11}{'p99 us':>11}{'CPU us':>9}  agrees")
    for name, row in table["rows"].items():
        print(f"{name:<56}{row['median_us']:>11.1f}{row['p99_us']:>11.1f}{row['cpu_median_us']:>9.1f}  "
              f"{row['agrees_with_rules']}")
    for name, reason in table["skipped"].items():
        print(f"{name:<56}  skipped: {reason}")


if __name__ == "__main__":  # python -m benchmarks.targets [TURNS]: the chat-turn memory run alone, as JSON
    print(json.dumps(chat_memory(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)))
