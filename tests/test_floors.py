"""The benchmark's floor of a traced recommendation, the HTTP ceiling it leaves, and issue 13's verdicts on them."""
from __future__ import annotations

from benchmarks import targets
from benchmarks.floors import CORE, PARTS, http_ceiling, recommendation_floor
from kentino_expert.expert import Expert

REC, ENGINE, SIZING, FLOOR = PARTS


def test_the_floor_is_part_of_the_recommendation_and_weighs_every_shipped_build():
    """Each part is timed, the floor is below the whole recommendation it is part of, and the builds weighed are
    every shipped card in every node shape the catalog gives it."""
    floor = recommendation_floor(15)
    for part in (*PARTS, CORE):
        assert floor[part]["cpu_median_us"] > 0, part
    assert floor[FLOOR]["cpu_median_us"] < floor[REC]["cpu_median_us"]
    assert floor[CORE]["cpu_median_us"] < floor[ENGINE]["cpu_median_us"]  # the core is part of the traced run
    assert floor[FLOOR]["cpu_median_us"] > max(floor[ENGINE]["cpu_median_us"], floor[SIZING]["cpu_median_us"]) * 0.9
    knowledge = Expert().knowledge
    shipped = sum(len(gpu.node_shapes) or 1 for gpu in knowledge.gpus.values() if gpu.kentino_ships)
    assert floor["builds_weighed"] == shipped
    assert floor["rules"] > 0


def test_the_http_ceiling_adds_the_floor_to_what_a_cached_request_costs():
    """2 CPUs serving 2,000 cached requests/s spend 1,000 CPU-us on each; with a 1,000 us floor on top, at most
    1,000 new-facts answers/s fit."""
    ceiling = http_ceiling(1000.0, 2000.0, 2)
    assert ceiling["around_request_us"] == 1000.0
    assert ceiling["ceiling_rps"] == 1000.0


def _results(floor_us: float, cached_final_rps: float) -> dict:
    rec = {"cpu_median_us": 2000.0}
    return {
        "issue13_in_process": {"traced recommendation, new facts": {"cpu_median_us": 4000.0},
                               "traced recommendation as the service answers, new facts": rec,
                               "first chat turn, new facts": {"cpu_median_us": 9000.0}},
        "issue13_floor": {REC: rec, ENGINE: {"cpu_median_us": floor_us / 2}, SIZING: {"cpu_median_us": floor_us / 2},
                          CORE: {"cpu_median_us": floor_us / 5}, FLOOR: {"cpu_median_us": floor_us},
                          "builds_weighed": 4, "rules": 70},
        "http": [{"workers": 2, "clients": 16, "facts": "final-unique", "rps": 400.0, "p99_ms": 90.0},
                 {"workers": 2, "clients": 16, "facts": "final", "rps": cached_final_rps, "p99_ms": 10.0}],
    }


def _row(rows: list[dict], starts: str) -> dict:
    return next(row for row in rows if row["target"].startswith(starts))


def test_a_target_below_its_floor_is_out_of_reach_and_one_above_is_only_not_met():
    """A 1,200 us floor puts the 350 us target out of reach; a 300 us floor leaves it merely not met."""
    rows = targets.verdicts(_results(1200.0, 2000.0))
    traced = _row(rows, "traced recommendation <= 350")
    assert traced["met"] is False and traced["reachable"] is False
    assert "out of reach" in targets.verdict_word(traced)
    assert "1,200 us" in traced["figure"]
    rows = targets.verdicts(_results(300.0, 2000.0))
    traced = _row(rows, "traced recommendation <= 350")
    assert traced["reachable"] is True
    assert targets.verdict_word(traced) == "not met"


def test_the_final_answers_rate_is_judged_against_the_ceiling_of_these_cpus(monkeypatch):
    """On 2 CPUs with cached requests at 2,000/s (1,000 CPU-us each), a 1,200 us floor caps new facts at ~909/s:
    1,500/s is out of reach; with cached requests at 20,000/s and a 100 us floor the cap is 10,000/s."""
    monkeypatch.setattr(targets, "cores", lambda: 2)
    final = _row(targets.verdicts(_results(1200.0, 2000.0)), "HTTP 2 workers, 16 clients, new facts: final")
    assert final["reachable"] is False and "at most 909/s" in final["figure"]
    final = _row(targets.verdicts(_results(100.0, 20000.0)), "HTTP 2 workers, 16 clients, new facts: final")
    assert final["reachable"] is True and final["met"] is False


def test_without_a_floor_no_target_is_called_out_of_reach():
    """A run that did not measure the floor judges met / not met only."""
    results = _results(1200.0, 2000.0)
    del results["issue13_floor"]
    for row in targets.verdicts(results):
        assert row["reachable"] is None
        assert "out of reach" not in targets.verdict_word(row)


def _split(answer_us: float) -> dict:
    parts = {"answer": answer_us, "why-not": 300.0, "rest": 200.0, "questions": 8000.0}
    return {"parts": {name: {"cpu_median_us": us} for name, us in parts.items()},
            "probe_candidates_per_turn": 40, "questions_cpu_per_candidate_us": 200.0,
            "compiled_rules_cpu_per_state_us": 40.0}


def test_the_first_turn_verdict_says_what_2x_leaves_each_probe_build():
    """With a 2,000 us recommendation, a 3,000 us answer, 300 us why-not and 200 us rest, 2x leaves 500 us for 40
    probe builds: 12.5 us each (printed 12), beside the 200 us each takes, 40 us of it the compiled rules."""
    results = _results(1200.0, 2000.0)
    results["issue13_turn_split"] = _split(3000.0)
    turn = _row(targets.verdicts(results), "first chat turn <= 2x one traced recommendation")
    assert "leaves the questions 500 us" in turn["figure"]
    assert "12 us for each of the 40 builds" in turn["figure"] and "take 200 us each" in turn["figure"]
    assert "40 us of it the compiled rules" in turn["figure"]
    results["issue13_turn_split"] = _split(4000.0)
    turn = _row(targets.verdicts(results), "first chat turn <= 2x one traced recommendation")
    assert "alone take 4,500 us, 2x before any question" in turn["figure"]
    del results["issue13_turn_split"]
    assert "leaves" not in _row(targets.verdicts(results), "first chat turn <= 2x")["figure"]
