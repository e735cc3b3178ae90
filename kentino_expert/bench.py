"""Benchmark: in-process recommendation split into stages, against baselines measured in the same run.

Run `python -m kentino_expert.bench [--runs N] [--json FILE]`. Prints medians and p99s in
microseconds and ratios to the sizing-only and reference-evaluator baselines.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from .api import Expert
from .derive import derive
from .facts import validate_facts
from .inference import run_rules
from .recommend import evaluate
from .render import to_json

WORKLOADS = [
    {"task": "inference", "model": "llama-3.1-70b", "concurrency": 48, "context_tokens": 8192},
    {"task": "full-finetune", "model": "llama-3.1-70b"},
    {"task": "batch-inference", "model": "llama-3.1-405b", "latency": "offline"},
    {"task": "lora", "model": "llama-3.1-70b", "proposed_build": {"nodes": 2, "gpus_per_node": 4}},
]


def _timed(fn, runs: int) -> dict:
    samples = []
    for index in range(runs):
        start = time.perf_counter_ns()
        fn(index)
        samples.append((time.perf_counter_ns() - start) / 1000)
    samples.sort()
    return {"median_us": statistics.median(samples), "p99_us": samples[min(len(samples) - 1, int(len(samples) * 0.99))]}


def in_process(runs: int) -> dict:
    durable, reference = Expert(), Expert(backend="reference")
    workloads = [validate_facts(w) for w in WORKLOADS]
    states = [derive(w, durable.knowledge, durable.ruleset).state() for w in workloads]
    pick = lambda i: workloads[i % len(workloads)]
    out = {
        "validation": _timed(lambda i: validate_facts(WORKLOADS[i % len(WORKLOADS)]), runs),
        "sizing": _timed(lambda i: derive(pick(i), durable.knowledge, durable.ruleset), runs),
        "engine_durable": _timed(lambda i: run_rules(durable.ruleset, states[i % len(states)], durable.engine), runs),
        "engine_reference": _timed(lambda i: run_rules(reference.ruleset, states[i % len(states)], reference.engine), runs),
        "recommend_durable": _timed(lambda i: evaluate(pick(i), durable.knowledge, durable.ruleset, durable.engine), runs),
        "recommend_reference": _timed(lambda i: evaluate(pick(i), reference.knowledge, reference.ruleset, reference.engine), runs),
    }
    answer = durable.recommend(WORKLOADS[0])
    out["render_json"] = _timed(lambda i: to_json(answer), runs)
    out["rule_load"] = _timed(lambda i: Expert().close(), max(5, runs // 100))
    return out


def cli_run(runs: int) -> dict:
    def once(_):
        subprocess.run([sys.executable, "-m", "kentino_expert", "recommend", "-"], input=json.dumps(WORKLOADS[0]),
                       capture_output=True, text=True, check=True)
    return {"cli_recommend": _timed(once, runs)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--cli-runs", type=int, default=10)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)
    figures = in_process(args.runs)
    figures.update(cli_run(args.cli_runs))
    base = figures["recommend_reference"]["median_us"]
    sizing = figures["sizing"]["median_us"]
    print(f"{'stage':<22}{'median us':>12}{'p99 us':>12}{'x reference':>14}{'x sizing':>10}")
    for name, f in figures.items():
        print(f"{name:<22}{f['median_us']:>12.1f}{f['p99_us']:>12.1f}{f['median_us'] / base:>14.2f}{f['median_us'] / sizing:>10.1f}")
    if args.json_path:
        with open(args.json_path, "w") as handle:
            json.dump(figures, handle, indent=2)


if __name__ == "__main__":
    main()
