"""What the serving and training model costs (issue 27): a traced answer now against the commit before the model.

`python -m benchmarks.model_cost [--rounds N] [--runs N] [--before COMMIT]` checks the commit before the serving
model out into a temporary git worktree and times the same traced answers in it and in this tree, in child
processes that alternate round by round (the machine's noise falls on both alike). Each child loads its own
rule set and knowledge once and times `answer_for` (validation, sizing, the build search, durable-rules with its
trace) on the same facts: the benchmark's four fixed workloads and final inference turns whose concurrency (and,
in the last group, request rate) no earlier request asked. The issue's target: the traced answer no more than 20%
slower than before the model.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .bench import WORKLOADS
from .workloads import FINAL_BEFORE_MODEL as FINAL

# The commit whose parent first carried domain/serving_model.py: "Catalog: a card's FP4 tensor throughput ..."
BEFORE_MODEL = "3be00db"
ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, statistics, sys, time
from kentino_expert.answer.pipeline import answer_for
from kentino_expert.domain.workload import validate_facts
from kentino_expert.expert import Expert
spec = json.loads(sys.stdin.read())
expert = Expert()
out = {}
for name, facts_list in spec["groups"].items():
    samples = []
    for facts in facts_list:
        workload = validate_facts(facts)
        start = time.perf_counter_ns()
        answer_for(workload, expert.knowledge, expert.ruleset, expert.engine, expert.kinds)
        samples.append((time.perf_counter_ns() - start) / 1000)
    out[name] = statistics.median(samples)
print(json.dumps(out))
"""


def groups(round_index: int, runs: int) -> dict:
    """The facts of one round: fixed workloads (the oracle's plan caches warm after the first) and new facts."""
    fixed = {f"fixed: {w['task']}": [w] * runs for w in WORKLOADS}
    base = 5000 + round_index * runs
    fresh = [{**FINAL, "concurrency": base + i} for i in range(runs)]
    # a new request rate too: the serving model's memo of open-loop states (serving_model.open_loop) misses
    rates = [{**FINAL, "concurrency": base + i, "qps": 7 + (base + i) % 997 / 10} for i in range(runs)]
    return {**fixed, "new facts: inference (final)": fresh, "new facts and rate: inference": rates}


def child(tree: Path, spec: dict) -> dict:
    """Medians (us) of one round in the tree at `tree`, its own package first on the path."""
    run = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(spec), capture_output=True, text=True,
                         cwd=tree, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, timeout=600)
    if run.returncode != 0:
        raise SystemExit(f"model_cost: the child in {tree} failed: {run.stderr.strip().splitlines()[-1:]}")
    return json.loads(run.stdout)


def measure(before: Path, rounds: int, runs: int) -> list[dict]:
    """Per group: the median over rounds of each tree's median, and the ratio now/before."""
    seen: dict[str, dict[str, list]] = {}
    for index in range(rounds):
        spec = {"groups": groups(index, runs)}
        order = [("before", before), ("now", ROOT)] if index % 2 == 0 else [("now", ROOT), ("before", before)]
        for label, tree in order:
            for name, median in child(tree, spec).items():
                seen.setdefault(name, {"before": [], "now": []})[label].append(median)
    rows = []
    for name, pair in seen.items():
        was, now = statistics.median(pair["before"]), statistics.median(pair["now"])
        rows.append({"workload": name, "before_us": round(was), "now_us": round(now), "ratio": round(now / was, 2)})
    return rows


def worktree(commit: str, where: Path) -> Path:
    tree = where / "before"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach", str(tree), commit],
                   check=True, capture_output=True)
    return tree


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--before", default=BEFORE_MODEL)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        tree = worktree(args.before, Path(scratch))
        try:
            rows = measure(tree, args.rounds, args.runs)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    print(f"traced answer, before the model ({args.before}) and now; medians over {args.rounds} alternating rounds")
    for row in rows:
        verdict = "met" if row["ratio"] <= 1.2 else "missed"
        print(f"  {row['workload']:<34} {row['before_us']:>8} us  {row['now_us']:>8} us  {row['ratio']:>5}x"
              f"  (target <= 1.2x: {verdict})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
