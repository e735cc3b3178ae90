"""The facts still worth asking for: missing, relevant to the task, with the question to ask."""
from __future__ import annotations

from .facts import Workload


def missing_facts(workload: Workload, ruleset) -> list[str]:
    """Facts relevant to the workload's task that the caller has not given."""
    known = workload.known()
    if "proposed_build" in known:
        known["proposed_nodes"] = True
    missing = []
    for name, policy in ruleset.fact_policies.items():
        if name in known or not policy.tasks or workload.task not in policy.tasks:
            continue
        if name == "model" and "params_b" in known:
            continue
        missing.append(name)
    return missing
