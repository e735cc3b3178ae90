"""Kentino Expert: tells a GPU-server buyer what to buy, and why."""
from .expert import Expert, recommend
from .errors import CatalogError, EngineError, InputError, KentinoError, KnowledgeError, RuleFileError
from .version import __version__

__all__ = ["Expert", "recommend", "KentinoError", "InputError", "CatalogError", "KnowledgeError",
           "RuleFileError", "EngineError"]
