"""Where a first chat turn's CPU time goes: the traced answer, the what-if probes that rank the questions, why-not
and the rest (the typed response), and how many candidate builds the probes size.

It measures the service's own path (service.decide.evaluate_decision) with its three parts wrapped in timers,
so the split follows that function wherever it goes; the candidate counts come from a second pass, so that
counting does not weigh on the times.
"""
from __future__ import annotations

import statistics
import time
from contextlib import contextmanager
from unittest import mock

from kentino_expert import expert as expert_module
from kentino_expert.answer.whatif import Turn
from kentino_expert.engine.compiled import CompiledEngine
from kentino_expert.engine.onepass import OnePassEngine
from kentino_expert.expert import Expert
from kentino_expert.service import decide

from .workloads import unique_chat

PARTS = ("answer", "questions", "why-not")  # timed inside a turn; "rest" is the turn less these


def turn_split(runs: int) -> dict:
    """Medians over `runs` first turns on new facts (CPU time of this thread, us) of the whole turn and of each
    part, and the probes' and candidate builds' counts per turn (their own pass)."""
    expert = Expert()
    spent = {part: 0 for part in PARTS}
    rows = {part: [] for part in (*PARTS, "rest", "whole turn")}
    rules = [0, 0]  # CPU ns in the compiled evaluator, its evaluations
    with _timed_parts(expert, spent), _timed_rules(rules):
        for index in range(runs):
            spent.update(dict.fromkeys(PARTS, 0))
            start = time.thread_time_ns()
            decide.evaluate_decision(expert, unique_chat(index))
            whole = time.thread_time_ns() - start
            for part in PARTS:
                rows[part].append(spent[part] / 1000)
            rows["rest"].append((whole - sum(spent.values())) / 1000)
            rows["whole turn"].append(whole / 1000)
    out = {name: {"cpu_median_us": statistics.median(values)} for name, values in rows.items()}
    counts = _probe_counts(expert, min(runs, 200), offset=runs)
    per_candidate = out["questions"]["cpu_median_us"] / max(counts["probe_candidates_per_turn"], 1)
    expert.close()
    return {"parts": out, **counts, "questions_cpu_per_candidate_us": per_candidate,
            "compiled_rules_cpu_per_state_us": rules[0] / max(rules[1], 1) / 1000}


@contextmanager
def _timed_rules(rules: list):
    """The probes' deciders' evaluations (a build's kind from its sized state: one pass when the rules are
    stratified, else the compiled evaluator's agenda), their CPU time added to rules[0] and their count to
    rules[1]: what deciding one build costs even when sizing it costs nothing."""
    def timing(evaluate, many: bool = False):
        def timed(self, states, *args, **kwargs):
            start = time.thread_time_ns()
            try:
                return evaluate(self, states, *args, **kwargs)
            finally:
                rules[0] += time.thread_time_ns() - start
                rules[1] += len(states) if many else 1
        return timed

    with mock.patch.object(CompiledEngine, "evaluate", timing(CompiledEngine.evaluate)), \
            mock.patch.object(OnePassEngine, "evaluate", timing(OnePassEngine.evaluate)), \
            mock.patch.object(OnePassEngine, "evaluate_many", timing(OnePassEngine.evaluate_many, many=True)):
        yield


@contextmanager
def _timed_parts(expert, spent: dict):
    """evaluate_decision's answer, questions and why-not, each adding its CPU time to `spent`."""
    def timer(part, fn):
        def timed(*args, **kwargs):
            start = time.thread_time_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[part] += time.thread_time_ns() - start
        return timed

    # Expert.decide_parts calls the answer and the questions by these module names
    with mock.patch.object(expert_module, "answer_traced", timer("answer", expert_module.answer_traced)), \
            mock.patch.object(expert_module, "rank_questions", timer("questions", expert_module.rank_questions)), \
            mock.patch.object(decide, "why_not_from", timer("why-not", decide.why_not_from)):
        yield


def _probe_counts(expert, runs: int, offset: int) -> dict:
    """Probes per turn, candidate builds sized per turn (plans not found in a cache: the answer's and the
    probes'), the probes' own, and how many probes sized how many candidates (a histogram), over `runs` more new
    first turns."""
    oracle, sized, probes = expert.kinds, [0], []
    sized_state, builds_of = oracle._sized_state, Turn.builds_of

    def counting_state(*args, **kwargs):
        sized[0] += 1
        return sized_state(*args, **kwargs)

    def counting_builds(turn, mappings):
        out = []
        for mapping in mappings:  # one probe at a time in this pass, so that each counts its own candidates
            before = sized[0]
            out += builds_of(turn, [mapping])
            probes[-1].append(sized[0] - before)
        return out

    with mock.patch.object(oracle, "_sized_state", counting_state), \
            mock.patch.object(Turn, "builds_of", counting_builds):
        candidates = []
        for index in range(runs):
            probes.append([])
            sized[0] = 0
            decide.evaluate_decision(expert, unique_chat(offset + index))
            candidates.append(sized[0])
    histogram: dict = {}
    for turn in probes:
        for count in turn:
            histogram[count] = histogram.get(count, 0) + 1
    return {"probes_per_turn": statistics.mean(len(turn) for turn in probes),
            "candidates_per_turn": statistics.mean(candidates),
            "probe_candidates_per_turn": statistics.mean(sum(turn) for turn in probes),
            "probes_by_candidates_sized": {str(k): v / runs for k, v in sorted(histogram.items())}}


def print_split(split: dict) -> None:
    print("\n## Where a first chat turn's CPU goes (new facts each; medians)")
    for name, row in split["parts"].items():
        print(f"  {name:<12}{row['cpu_median_us']:>10,.0f} us")
    shares = ", ".join(f"{v:g} probes sized {k}" for k, v in split["probes_by_candidates_sized"].items())
    print(f"  per turn: {split['candidates_per_turn']:g} candidate builds sized, "
          f"{split['probe_candidates_per_turn']:g} of them by {split['probes_per_turn']:g} what-if probes ({shares}); "
          f"the questions' CPU per candidate build a probe sized: {split['questions_cpu_per_candidate_us']:,.0f} us, "
          f"of it the compiled rules' evaluation: {split['compiled_rules_cpu_per_state_us']:,.0f} us")
