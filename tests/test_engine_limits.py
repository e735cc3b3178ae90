"""durable-rules' structural limits, re-measured on the C core in a child process, against the model
(kentino_expert.engine.durable.network) that `rules check` and the engine's packing rely on: the model accepts a
shape at each limit, where the core runs it, and refuses it one step beyond, where the core hangs,
crashes or fails."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kentino_expert.engine.durable import network as net

HANG_SECONDS = 4  # a hard timeout on the shapes that hang the core: each runs in ~0.1 s when it does not

PROBE = r"""
import json, sys
import durable_rules_engine as dre
rules, facts = json.loads(sys.argv[1]), json.loads(sys.argv[2])
try:
    handle = dre.create_ruleset('probe', json.dumps(rules))
except Exception as exc:
    print('build error', exc); sys.exit(0)
print('built', flush=True)
for index, fact in enumerate(facts):
    try:
        dre.assert_fact(handle, json.dumps(dict(dict(t='g', sid='s', id='f%d' % index), **fact)))
    except Exception as exc:
        print('assert error', exc); sys.exit(0)
print('ok')
"""


def _core(rules: dict, facts: list[dict]) -> str:
    """What the real C core does with `rules` and then `facts`: 'ok', 'build error ...', 'assert
    error ...', 'hang (building)', 'hang (asserting)' or 'crash (signal n)'."""
    try:
        done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(rules), json.dumps(facts)],
                              capture_output=True, text=True, timeout=HANG_SECONDS)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return "hang (asserting)" if "built" in out else "hang (building)"
    if done.returncode < 0:
        return f"crash (signal {-done.returncode})"
    return done.stdout.strip().splitlines()[-1]


def _rule(terms):
    return {"all": [{"m": {"$and": [{"t": "g"}] + terms}}]}


def _model(patterns: list[list]) -> list[str]:
    """The codes of the limits the model says one group of these patterns goes beyond."""
    group = net.Group("g")
    for terms in patterns:
        group.add(terms)
    return [excess.code for excess in group.excesses()]


def test_conditions_under_one_node():
    """511 conditions under one node run; 512 hang every assert, 513 hang the build; the model stops at 256."""
    def chain(n):
        return [{"$or": [{"x": i} for i in range(n)]}]
    assert _core({"r": _rule(chain(511))}, [{"x": 3}]) == "ok"
    assert _core({"r": _rule(chain(512))}, [{"x": 3}]) == "hang (asserting)"
    assert _core({"r": _rule(chain(513))}, []) == "hang (building)"
    assert _model([chain(net.MAX_SIBLINGS)]) == [] and _model([chain(net.MAX_SIBLINGS + 1)]) == ["E202"]


def test_matching_stack():
    """A fact leaving 64 conditions pending runs; 65 are error 303; the model draws the line at the same place."""
    def always(n):
        return [{"$or": [{"$gt": {"x": -i - 1}} for i in range(n)]}, {"z": 1}]
    assert _core({"r": _rule(always(64))}, [{"x": 1, "z": 1}]) == "ok"
    assert "303" in _core({"r": _rule(always(65))}, [{"x": 1, "z": 1}])
    assert _model([always(64)]) == [] and _model([always(65)]) == ["E203"]


def test_exclusive_alternatives_do_not_stack():
    """Equalities on one property cannot hold together: 200 of them leave one pending, in the core and in the model."""
    chain = [{"$or": [{"x": i} for i in range(200)]}, {"z": 1}]
    assert _core({"r": _rule(chain)}, [{"x": 7, "z": 1}, {"x": 1000, "z": 1}]) == "ok"
    assert _model([chain]) == []


def test_and_or_groups_in_one_rule():
    """15 and/or groups build; the 16th is error 113; the model counts them the same way."""
    def groups(n):  # the top $and is one group
        return [{"$or": [{f"x{i}": 1}, {f"x{i}": 2}]} for i in range(n - 1)]
    assert _core({"r": _rule(groups(15))}, [{f"x{i}": 1 for i in range(14)}]) == "ok"
    assert "113" in _core({"r": _rule(groups(16))}, [])
    assert net.rule_excesses(groups(15)) == []
    assert [e.code for e in net.rule_excesses(groups(16))] == ["E205"]


def test_not_exists_under_one_node():
    """127 `not exists` conditions under one node run; 128 crash the core; the model stops at 127."""
    def rules(n):
        return {f"r{i}": _rule([{"$nex": {f"y{i}": 1}}]) for i in range(n)}
    present = {f"y{i}": 1 for i in range(128)}
    assert _core(rules(127), [present]) == "ok"
    assert _core(rules(128), [present]).startswith("crash")
    assert _model([[{"$nex": {f"y{i}": 1}}] for i in range(127)]) == ["E203"]  # all absent: 127 pending
    assert "E202" in _model([[{"$nex": {f"y{i}": 1}}] for i in range(128)])


def test_rules_ending_at_one_node():
    """255 rules with one pattern run; 256 crash the core; the model refuses the 256th."""
    def rules(n):
        return {f"r{i}": _rule([{"x": 1}]) for i in range(n)}
    assert _core(rules(255), [{"x": 1}]) == "ok"
    assert _core(rules(256), [{"x": 1}]).startswith("crash")
    assert _model([[{"x": 1}]] * 255) == [] and _model([[{"x": 1}]] * 256) == ["E202"]


@pytest.mark.parametrize("branches, groups, refused", [(2, 10, False), (2, 11, True), (3, 6, False), (3, 7, True),
                                                       (4, 5, False), (4, 6, True)])
def test_chained_ors_multiply_the_walk(branches, groups, refused):
    """Every matching `or` branch walks the rest again: the model's count grows as branches ** groups
    (measured on the core: three branches x 13 groups take 1.8 s per assert)."""
    chain = [{"$or": [{"$gt": {f"x{g}": -b - 1}} for b in range(branches)]} for g in range(groups)]
    codes = [e.code for e in net.rule_excesses(chain)]
    assert ("E204" in codes) == refused, codes


def test_packing_splits_what_one_group_cannot_hold():
    """Rules that each run alone but not together (always-true `or`s of 40) get fact groups of their own."""
    patterns = [[{"$or": [{"$gt": {f"x{r}": -i - 1}} for i in range(40)]}] for r in range(3)]
    assert all(net.rule_excesses(p) == [] for p in patterns)
    assert _model(patterns) == ["E203"]
    assert net.pack(patterns, 64) == [[0], [1], [2]]
    ordinary = [[{f"flag{r}": True}] for r in range(100)]
    assert [len(g) for g in net.pack(ordinary, 64)] == [64, 36]
