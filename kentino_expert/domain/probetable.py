"""The probe table (knowledge/probes.yaml): the values a what-if question about a fact is probed with, checked
when the knowledge is loaded."""
from __future__ import annotations

from pathlib import Path

from ..errors import CatalogError, KnowledgeError, Location, did_you_mean
from ..lang.valuetypes import is_enum
from ..yamlsrc import location_of, to_plain
from .state import FACT_TYPES
from .workload import Workload, fact_problem

PROBES_FILE = "probes.yaml"
MAX_PROBE_VALUES = 16  # each value is a rule evaluation in every turn that misses the fact
# the facts a caller gives one value of (not task, which every turn has; not proposed_build, a nested build)
PROBED_FACTS = tuple(name for name in Workload.model_fields
                     if name not in ("task", "proposed_build") and not is_enum(FACT_TYPES.get(name)))


def check_probes(data, path: Path, resolve) -> dict[str, tuple]:
    """probes.yaml's `probes:` mapping as fact -> values, each value one the fact accepts (`resolve(fact, value)`
    raises a CatalogError for an id the catalog does not hold); any other content is a KnowledgeError at its
    line and column."""
    probes = data.get("probes") if isinstance(data, dict) else None
    if not isinstance(probes, dict):
        raise KnowledgeError("expected a top-level 'probes:' mapping of fact -> list of values",
                             location=Location(str(path), 1, 1))
    return {str(fact): _values(probes, fact, path, resolve) for fact in probes}


def _values(probes: dict, fact, path: Path, resolve) -> tuple:
    where = location_of(probes, fact, str(path))
    if fact not in PROBED_FACTS:
        enumerated = fact != "task" and is_enum(FACT_TYPES.get(fact))  # every turn gives its task
        why = "an enumerated fact is probed with every value it has" if enumerated else \
            "not a fact a question asks for"
        raise KnowledgeError(f"probes.{fact}: {why}", location=where,
                             suggestion=None if enumerated else did_you_mean(str(fact), PROBED_FACTS))
    values = probes[fact]
    if not isinstance(values, list) or not values:
        raise KnowledgeError(f"probes.{fact}: expected a list of one or more values", location=where)
    if len(values) > MAX_PROBE_VALUES:
        raise KnowledgeError(f"probes.{fact}: {len(values)} values, at most {MAX_PROBE_VALUES}", location=where)
    for index, value in enumerate(values):
        problem = _problem(fact, value, resolve)
        if problem:
            raise KnowledgeError(f"probes.{fact}[{index}]: {problem}", location=location_of(values, index, str(path)))
    return tuple(to_plain(values))


def _problem(fact: str, value, resolve) -> str | None:
    """Why a caller could not give `value` for `fact`, or None."""
    problem = fact_problem(fact, value)
    if problem:
        return problem
    try:
        resolve(fact, value)
    except CatalogError as exc:
        return exc.suggested()
    return None
