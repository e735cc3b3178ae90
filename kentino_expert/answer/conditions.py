"""The selection policy's conditions compiled once into closures (engine/closures.py, lang/semantics.py's meaning):
a turn judges dozens of candidate plans against the same few `works` conditions."""
from __future__ import annotations

from ..engine.closures import Truth, compile_truth
from ..lang import nodes

_KEPT: dict = {}  # id(condition node) -> (node, closure); the entry keeps the node alive, so its id stays its own
_KEPT_MAX = 1024  # a rule set's policy has a few dozen conditions; reloads add theirs: cleared when full


def truth_closure(node: nodes.Node) -> Truth:
    """The closure giving `node`'s truth in an environment (compiled on first use)."""
    found = _KEPT.get(id(node))
    if found is None:
        if len(_KEPT) >= _KEPT_MAX:
            _KEPT.clear()
        found = _KEPT[id(node)] = (node, compile_truth(node))
    return found[1]
