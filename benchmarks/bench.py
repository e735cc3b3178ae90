"""Benchmark: medians, p99s and ratios to baselines measured in the same run.

`python -m benchmarks.bench [--quick] [--json FILE]` prints one table per section:
in-process stages, throughput per core and per process, rule-set load and evaluation as the rule
count grows, scenario corpora (`test`, `rules diff`), memory over many evaluations, and HTTP when
the service extra is installed.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kentino_expert.answer.pipeline import answer_for
from kentino_expert.answer.render import to_json
from kentino_expert.authoring.rules_diff import diff
from kentino_expert.authoring.scenarios import Scenario, run_all
from kentino_expert.domain.derive import derive
from kentino_expert.domain.workload import validate_facts
from kentino_expert.engine.chaining import run_rules
from kentino_expert.engine.durable.engine import CoreTimer
from kentino_expert.errors import Location
from kentino_expert.expert import Expert
from kentino_expert.service.decide import evaluate_decision

from . import targets
from .benchgen import generated_rules_dir, generated_scenarios
from .floors import print_floor, recommendation_floor
from .turn_split import print_split, turn_split
from .workloads import CHAT, FINAL, unique_chat, unique_final

WORKLOADS = [
    {"task": "inference", "model": "llama-3.1-70b", "concurrency": 48, "context_tokens": 8192},
    {"task": "full-finetune", "model": "llama-3.1-70b"},
    {"task": "batch-inference", "model": "llama-3.1-405b", "latency": "offline"},
    {"task": "lora", "model": "llama-3.1-70b", "proposed_build": {"nodes": 2, "gpus_per_node": 4}},
]


def timed(fn, runs: int) -> dict:
    samples = []
    for index in range(runs):
        start = time.perf_counter_ns()
        fn(index)
        samples.append((time.perf_counter_ns() - start) / 1000)
    samples.sort()
    return {"median_us": statistics.median(samples), "p99_us": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
            "runs": runs}


def stages(runs: int) -> dict:
    durable, reference = Expert(), Expert(backend="reference")
    workloads = [validate_facts(w) for w in WORKLOADS]
    states = [_sized(durable, w).state() for w in workloads]

    def pick(i):
        return workloads[i % len(workloads)]

    answer = durable.recommend(WORKLOADS[0])
    return {
        "recommend (durable, full trace)": timed(
            lambda i: answer_for(pick(i), durable.knowledge, durable.ruleset, durable.engine, durable.kinds), runs),
        "  the same, new facts (every candidate build sized)": timed(
            lambda i: durable.recommend(unique_final(i)), runs),
        "  validation": timed(lambda i: validate_facts(WORKLOADS[i % len(WORKLOADS)]), runs),
        "  sizing": timed(lambda i: _sized(durable, pick(i)), runs),
        "  engine (durable-rules)": timed(
            lambda i: run_rules(durable.ruleset, states[i % len(states)], durable.engine), runs),
        "  of which durable-rules C core": core_share(durable, states, runs),
        "  trace rendering (json)": timed(lambda i: to_json(answer), runs),
        "baseline: recommend (reference)": timed(
            lambda i: answer_for(pick(i), reference.knowledge, reference.ruleset, reference.engine, reference.kinds),
            runs),
        "baseline: engine (reference)": timed(
            lambda i: run_rules(reference.ruleset, states[i % len(states)], reference.engine), runs),
        "baseline: sizing alone": timed(lambda i: _sized(durable, pick(i)), runs),
        "decision, all facts (+why-not)": timed(lambda i: evaluate_decision(durable, FINAL), runs),
        "decision, first turn, cached what-ifs": timed(lambda i: evaluate_decision(durable, CHAT), runs),
        "decision, first turn, new what-ifs": timed(lambda i: evaluate_decision(durable, unique_chat(i)),
                                                    max(20, runs // 10)),
        "rule load (real rules)": timed(lambda i: Expert().close(), max(5, runs // 100)),
    }


def _sized(expert, workload):
    return derive(workload, expert.knowledge, expert.ruleset.fact_policies, expert.ruleset.parameter_values)


def core_share(expert, states, runs: int) -> dict:
    """Time inside durable-rules' C core per evaluation (the part no Python change can remove)."""
    samples = []
    for index in range(runs):
        with CoreTimer() as core:
            run_rules(expert.ruleset, states[index % len(states)], expert.engine)
        samples.append(core.ns / 1000)
    samples.sort()
    return {"median_us": statistics.median(samples), "p99_us": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
            "runs": runs}


def _worker(args) -> int:
    seconds, _ = args
    expert, count, end = Expert(), 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        expert.recommend(WORKLOADS[count % len(WORKLOADS)])
        count += 1
    return count


def throughput(seconds: float, processes: int) -> dict:
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        start = time.perf_counter()
        counts = pool.map(_worker, [(seconds, i) for i in range(processes)])
        elapsed = time.perf_counter() - start
    return {"processes": processes, "recommendations_per_s": sum(counts) / seconds, "wall_s": elapsed}


def growth(counts, runs: int) -> list[dict]:
    rows, workload = [], validate_facts(WORKLOADS[0])
    base = Expert()
    for count in counts:
        with tempfile.TemporaryDirectory() as tmp:
            rules = generated_rules_dir(Path(tmp) / "rules", count)
            start = time.perf_counter()
            expert = Expert(rules)
            load_ms = (time.perf_counter() - start) * 1000
            state = _sized(expert, workload).state()
            engine = timed(lambda i, expert=expert, state=state: run_rules(expert.ruleset, state, expert.engine), runs)
            reference = Expert(rules, backend="reference")
            ref = timed(lambda i, ref=reference, state=state: run_rules(ref.ruleset, state, ref.engine),
                        max(10, runs // 10))
            rows.append({"rules": len(expert.ruleset.rules), "durable_rulesets": len(expert.engine._chunks),
                         "load_ms": load_ms, "engine_median_us": engine["median_us"], "engine_p99_us": engine["p99_us"],
                         "reference_median_us": ref["median_us"]})
            expert.close()
    base.close()
    return rows


def corpus(count: int) -> dict:
    scenarios = [Scenario(s["name"], s["facts"], s["expect"], Location("<generated>"))
                 for s in generated_scenarios(count)]
    expert, other = Expert(), Expert()
    start = time.perf_counter()
    run_all(expert, scenarios, _progress("test"))
    test_s = time.perf_counter() - start
    start = time.perf_counter()
    diff(expert, other, scenarios, _progress("rules diff"))
    diff_s = time.perf_counter() - start
    return {"scenarios": count, "test_s": test_s, "diff_s": diff_s, "test_per_s": count / test_s,
            "diff_per_s": count / diff_s}


def _progress(label: str):
    """Progress on stderr every 10% (a long corpus run should show it is alive)."""
    def report(done: int, total: int) -> None:
        if total >= 1000 and done % max(1, total // 10) == 0:
            print(f"  {label}: {done}/{total}", file=sys.stderr, flush=True)
    return report


def memory(evaluations: int) -> list[dict]:
    """RSS and peak RSS at 10%, 50% and 100% of the run, measured in a fresh process."""
    script = ("import json,sys; from benchmarks.bench import _memory_rows; "
              f"print(json.dumps(_memory_rows({evaluations})))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parent.parent)
    return json.loads(result.stdout)


def _memory_now() -> dict:
    """Resident and peak memory of this process from /proc (ru_maxrss survives exec: it would report
    the benchmark process that started this one)."""
    status = Path("/proc/self/status").read_text()
    field = lambda name: int(status.split(name + ":")[1].split()[0]) / 1024  # noqa: E731
    return {"rss_mb": field("VmRSS"), "peak_rss_mb": field("VmHWM")}


def _memory_rows(evaluations: int) -> list[dict]:
    expert, rows = Expert(), []
    marks = {evaluations // 10, evaluations // 2, evaluations}
    for index in range(1, evaluations + 1):
        expert.recommend(WORKLOADS[index % len(WORKLOADS)])
        if index in marks:
            rows.append({"evaluations": index, **_memory_now()})
    return rows


def _print(title: str, rows) -> None:
    print(f"\n## {title}")
    if isinstance(rows, dict) and all(isinstance(v, dict) for v in rows.values()):
        base = next((v["median_us"] for k, v in rows.items() if k.startswith("baseline: recommend")), None)
        cpu = all("cpu_median_us" in v for v in rows.values())
        print(f"{'':<36}{'median us':>11}{'p99 us':>11}{'x reference':>13}" + (f"{'CPU us':>10}" if cpu else ""))
        for name, row in rows.items():
            ratio = f"{row['median_us'] / base:>13.2f}" if base else f"{'':>13}"
            print(f"{name:<36}{row['median_us']:>11.1f}{row['p99_us']:>11.1f}{ratio}"
                  + (f"{row['cpu_median_us']:>10.1f}" if cpu else ""))
        return
    for row in rows if isinstance(rows, list) else [rows]:
        print("  " + ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer runs (a smoke test of the benchmark).")
    parser.add_argument("--json", dest="json_path")
    parser.add_argument("--issue13", action="store_true",
                        help="Only the sections issue 13's targets need (and the HTTP table), then the targets.")
    parser.add_argument("--no-chat-memory", action="store_true",
                        help="With --issue13: no 100,000 chat turns (python -m benchmarks.targets runs them).")
    args = parser.parse_args(argv)
    q = args.quick
    results = {}
    if args.issue13:  # only what issue 13's targets need: its own sections and the HTTP table
        _issue13(results, q, skip_memory=args.no_chat_memory)
        _http(results, q, memory=False)
        return _finish(results, args.json_path)
    results["stages"] = stages(200 if q else 3000)
    _print("One in-process recommendation", results["stages"])
    results["throughput"] = [throughput(1 if q else 5, n) for n in (1, 2)]
    _print("Throughput (recommendations/s)", results["throughput"])
    results["growth"] = growth([50, 500] if q else [50, 500, 5000], 20 if q else 200)
    _print("Rule-set size: load and evaluation", results["growth"])
    results["corpus"] = corpus(500 if q else 10_000)
    _print("Scenario corpus: test and rules diff", results["corpus"])
    results["memory"] = memory(2000 if q else 100_000)
    _print("Memory over evaluations (in-process)", results["memory"])
    _issue13(results, q)
    _http(results, q, memory=True)
    _finish(results, args.json_path)


def _issue13(results: dict, q: bool, skip_memory: bool = False) -> None:
    """The sections of issue 13: chat turn beside a traced recommendation, 500 rules, peers, chat memory."""
    results["issue13_in_process"] = targets.in_process(100 if q else 2000)
    _print("A first chat turn beside one traced recommendation (interleaved, new facts each)",
           results["issue13_in_process"])
    results["issue13_floor"] = recommendation_floor(50 if q else 1000)
    print_floor(results["issue13_floor"])
    results["issue13_turn_split"] = turn_split(50 if q else 500)
    print_split(results["issue13_turn_split"])
    results["issue13_500_rules"] = targets.at_500_rules(20 if q else 200)
    _print("One evaluation at ~500 rules (interleaved)",
           {k: v for k, v in results["issue13_500_rules"].items() if isinstance(v, dict)})
    results["issue13_peers"] = targets.peer_table(200 if q else 3000)
    targets.print_peers(results["issue13_peers"])
    if not skip_memory:
        results["issue13_chat_memory"] = targets.chat_memory(2000 if q else 100_000)
        _print("Memory over first chat turns on new facts (in-process)", results["issue13_chat_memory"])


def _http(results: dict, q: bool, memory: bool) -> None:
    try:  # the HTTP part needs httpx (the test extra): without it, the in-process sections still run
        from .bench_http import http_section, server_memory
    except ImportError:
        return
    results["http"] = http_section(quick=q)
    _print("HTTP POST /v1/recommend on loopback (decision log on)", results["http"])
    if memory:
        results["server_memory"] = server_memory(5000 if q else 100_000)
        _print("Server memory over many decisions (HTTP, new facts each)", results["server_memory"])


def _finish(results: dict, json_path) -> None:
    results["issue13_targets"] = targets.verdicts(results)
    targets.print_verdicts(results["issue13_targets"])
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
