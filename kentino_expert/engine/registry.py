"""The backends by name: `Expert(backend=...)`, `rules check` and the sandbox pick theirs here."""
from __future__ import annotations

from ..errors import EngineError, did_you_mean
from .backend import Backend
from .compiled import CompiledEngine
from .durable.engine import DurableEngine
from .reference import ReferenceEngine

DEFAULT = "durable"  # the engine that answers; the reference evaluator is its oracle
# the compiled evaluator answers hypothetical probes (what-ifs, build-search candidates), never a recorded answer
BACKENDS: dict[str, type[Backend]] = {DurableEngine.name: DurableEngine, ReferenceEngine.name: ReferenceEngine,
                                      CompiledEngine.name: CompiledEngine}


def backend_class(name: str) -> type[Backend]:
    """The backend registered under `name`; an unknown name is an EngineError."""
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        raise EngineError(f"unknown backend '{name}' (known: {', '.join(BACKENDS)})",
                          suggestion=did_you_mean(str(name), BACKENDS)) from None
