"""The benchmark's split of a first chat turn still finds the service's parts, and its counts add up."""
from __future__ import annotations

from benchmarks.turn_split import PARTS, turn_split


def test_the_split_times_every_part_and_counts_the_probes_candidates():
    """Each part of evaluate_decision is timed (a renamed part would read 0 here), what is left of the turn is
    not negative, and the probes' candidate builds are some of the turn's, as the histogram counts them."""
    split = turn_split(6)
    parts = split["parts"]
    for part in PARTS:
        assert parts[part]["cpu_median_us"] > 0, part
    assert parts["questions"]["cpu_median_us"] > parts["why-not"]["cpu_median_us"]
    assert 0 <= parts["rest"]["cpu_median_us"] < parts["whole turn"]["cpu_median_us"]
    assert split["probes_per_turn"] >= 5  # a first turn probes several values of each missing fact
    histogram = split["probes_by_candidates_sized"]
    assert abs(sum(histogram.values()) - split["probes_per_turn"]) < 1e-9
    from_histogram = sum(int(sized) * share for sized, share in histogram.items())
    assert abs(from_histogram - split["probe_candidates_per_turn"]) < 1e-9
    assert 0 < split["probe_candidates_per_turn"] < split["candidates_per_turn"]  # the answer sizes some too
    # the compiled rules are timed (a renamed evaluate would read 0) and are part of what a probe's build costs
    assert 0 < split["compiled_rules_cpu_per_state_us"] < split["questions_cpu_per_candidate_us"]
