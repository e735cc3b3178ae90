"""The least CPU a traced recommendation can take with the design as it is fixed, measured beside the recommendation
itself, and the HTTP rate that least cost leaves room for: whether a speed target is out of reach as specified.

Two parts of a recommendation on new facts cannot be left out:
- durable-rules' traced run of the chosen build (the product owner's engine decides every recorded answer);
- sizing every build the search must weigh (issue 11: every answer shows the best plan of every shipped card,
  so each card's figures are computed; only the first build per card and shape is counted, not the other
  precisions a search may try).
Their sum is the floor with today's rules and figure code; everything else (the candidates' evaluations, the
typed answer) comes on top.
"""
from __future__ import annotations

import os
import statistics
import time

from kentino_expert.answer.search import candidates_of
from kentino_expert.domain.derive import derive, derive_state
from kentino_expert.domain.workload import validate_facts
from kentino_expert.engine.chaining import run_rules
from kentino_expert.engine.durable.engine import CoreTimer
from kentino_expert.expert import Expert

from .workloads import unique_final

PARTS = ("traced recommendation as the service answers", "durable-rules traced run of the chosen build",
         "sizing every build the search weighs", "floor: the two parts above")
# no Python change can remove it; wall time inside the core's calls, in a second run of the same state
CORE = "of the traced run, inside durable-rules' C core (wall)"
RECOMMENDATION, ENGINE, SIZING, FLOOR = PARTS


def recommendation_floor(runs: int) -> dict:
    """Medians (CPU time of this thread, us) over `runs` new all-facts workloads, each timed in turn: the service's
    traced recommendation, and the two parts it cannot leave out (`_floor_parts`, on another new workload of the
    same kind), and their sum per run."""
    expert = Expert()
    rows = {part: [] for part in (*PARTS, CORE)}
    builds = []
    for _ in range(runs):
        start = time.thread_time_ns()
        expert.recommend_traced(unique_final(0))
        rows[RECOMMENDATION].append(time.thread_time_ns() - start)
        engine, sizing, weighed, core = _floor_parts(expert, unique_final(0))
        builds.append(weighed)
        rows[CORE].append(core)
        rows[ENGINE].append(engine)
        rows[SIZING].append(sizing)
        rows[FLOOR].append(engine + sizing)
    expert.close()
    out = {part: {"cpu_median_us": statistics.median(values) / 1000} for part, values in rows.items()}
    out["builds_weighed"] = statistics.median(builds)
    out["rules"] = len(expert.ruleset.rules)
    return out


def _floor_parts(expert, facts: dict) -> tuple[int, int, int, int]:
    """(ns of durable-rules' traced run of the build the search chose for `facts`, ns of sizing every build it
    weighs, how many, ns inside durable-rules' C core in a second run of the same state): the builds are sized
    first, before anything of these facts is cached; the chosen build's state is made outside the timers."""
    ruleset, knowledge = expert.ruleset, expert.knowledge
    known = validate_facts(facts).known()
    candidates = [validate_facts(c.facts(known)) for c in candidates_of(known, knowledge)]
    start = time.thread_time_ns()
    for workload in candidates:
        derive_state(workload, knowledge, ruleset.fact_policies, ruleset.parameter_values)
    sizing = time.thread_time_ns() - start
    chosen = expert.recommend_traced(facts)[0].facts
    state = derive(validate_facts(chosen), knowledge, ruleset.fact_policies, ruleset.parameter_values).state()
    start = time.thread_time_ns()
    run_rules(ruleset, state, expert.engine)
    engine = time.thread_time_ns() - start
    with CoreTimer() as core:  # its wrappers slow the run down: not the run timed above
        run_rules(ruleset, state, expert.engine)
    return engine, sizing, len(candidates), core.ns


def cores() -> int:
    """CPUs this process may run on (the server's workers and the load generator share them)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def http_ceiling(floor_us: float, cached_rps: float, cpus: int) -> dict:
    """The most new-facts answers per second `cpus` could serve if each cost only its floor on top of what a
    request the answer cache serves costs: HTTP, the decision's commit and the load generator, all on the same
    cores (`cpus` / `cached_rps` CPU-seconds each). A request on new facts does all that too (its cache lookup
    misses), so no server on these cores can go faster than this ceiling."""
    around_us = cpus * 1e6 / cached_rps
    return {"cpus": cpus, "cached_rps": cached_rps, "around_request_us": around_us, "floor_us": floor_us,
            "ceiling_rps": cpus * 1e6 / (around_us + floor_us)}


def print_floor(floor: dict) -> None:
    print(f"\n## The least a traced recommendation takes as designed ({floor['rules']} rules, "
          f"{floor['builds_weighed']:g} builds weighed; CPU medians, new facts each)")
    for part in (RECOMMENDATION, ENGINE, CORE, SIZING, FLOOR):
        print(f"  {part:<56}{floor[part]['cpu_median_us']:>10,.0f} us")
