"""knowledge/latency.yaml checked when loaded: each latency class's per-user decode target and time to first
token, the prompt length the first-token limits hold for."""
from __future__ import annotations

from pathlib import Path

from ..errors import KnowledgeError, Location
from ..yamlsrc import location_of
from .vocabulary import LATENCIES

_BY_CLASS = (("per_user_tokens_per_s", "tokens/s"), ("time_to_first_token_s", "seconds"))
_COUNTS = ("ttft_reference_prompt_tokens",)


def _positive(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 < value < 1e9


def check_latency(data, path: Path) -> None:
    """A KnowledgeError at the line of the first table or number latency.yaml lacks or gets wrong."""
    if not isinstance(data, dict):
        raise KnowledgeError("expected a mapping", location=Location(str(path), 1, 1))
    for table, unit in _BY_CLASS:
        targets = data.get(table)
        if not isinstance(targets, dict):
            raise KnowledgeError(f"expected a '{table}:' mapping", location=Location(str(path), 1, 1))
        for name, value in targets.items():
            where = location_of(targets, name, str(path))
            if name not in LATENCIES:
                raise KnowledgeError(f"{table}: unknown latency class '{name}'", location=where)
            if not _positive(value):
                raise KnowledgeError(f"{table}.{name}: expected a positive number of {unit}", location=where)
    for name in _COUNTS:
        if not _positive(data.get(name)):
            where = location_of(data, name, str(path)) if name in data else Location(str(path), 1, 1)
            raise KnowledgeError(f"{name}: expected a positive number of tokens", location=where)
