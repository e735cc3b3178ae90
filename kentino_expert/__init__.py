"""Kentino Expert: tells a GPU-server buyer what to buy, and why."""
from .errors import CatalogError, EngineError, InputError, KentinoError, KnowledgeError, RuleFileError
from .expert import Expert, recommend
from .version import __version__ as __version__

__all__ = ["Expert", "recommend", "KentinoError", "InputError", "CatalogError", "KnowledgeError",
           "RuleFileError", "EngineError"]
