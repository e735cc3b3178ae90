"""Where the bundled rules/ and knowledge/ are: in the wheel, or beside the package in a checkout."""
from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def bundled(name: str) -> Path:
    """The bundled `rules` or `knowledge` directory, whichever way the package was installed."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    return _PACKAGE.parent / name
