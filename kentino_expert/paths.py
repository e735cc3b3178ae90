"""Which rules/ and knowledge/ a command uses: the one named, the checkout it runs in, else the packaged one.

A command looks for its directories in this order (the first that names one wins):
  1. --rules / --knowledge;
  2. the KENTINO_RULES / KENTINO_KNOWLEDGE environment variables;
  3. the nearest project file, found as ruff finds its configuration: from the current directory
     up to the root, the first `kentino.toml`, or `pyproject.toml` with a `[tool.kentino]` table
     (in one directory `kentino.toml` wins). Its `rules` and `knowledge` keys are paths relative to
     the file; a key it leaves out means the packaged directory;
  4. the directories packaged with the installed code.
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import KentinoError, Location, did_you_mean

_PACKAGE = Path(__file__).resolve().parent
NAMES = ("rules", "knowledge")
ENVIRONMENT = {"rules": "KENTINO_RULES", "knowledge": "KENTINO_KNOWLEDGE"}
PROJECT_FILE = "kentino.toml"
PYPROJECT_FILE = "pyproject.toml"


class ProjectFileError(KentinoError):
    """A kentino.toml or [tool.kentino] table that cannot be read or names no directory."""


def bundled(name: str) -> Path:
    """The packaged `rules` or `knowledge` directory, whichever way the package was installed."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    return _PACKAGE.parent / name


@dataclass(frozen=True)
class ProjectFile:
    """A project file found by the walk up, and the table of it that configures Kentino."""
    path: Path
    table: dict


def _read_toml(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
        return tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ProjectFileError(f"cannot read: {getattr(exc, 'strerror', None) or exc}",
                               location=Location(str(path))) from None
    except tomllib.TOMLDecodeError as exc:
        where = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        message = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(exc))
        if where:
            location = Location(str(path), int(where.group(1)), int(where.group(2)))
        else:  # tomllib says "(at end of document)": the place after the last character
            lines = text.split("\n")
            location = Location(str(path), len(lines), len(lines[-1]) + 1)
        raise ProjectFileError(f"invalid TOML: {message}", location=location) from None


def _table_of(directory: Path) -> ProjectFile | None:
    own = directory / PROJECT_FILE
    if own.is_file():
        return ProjectFile(own, _read_toml(own))
    pyproject = directory / PYPROJECT_FILE
    if pyproject.is_file():
        tool = _read_toml(pyproject).get("tool")
        table = tool.get("kentino") if isinstance(tool, dict) else None
        if table is not None:
            if not isinstance(table, dict):
                raise ProjectFileError("tool.kentino must be a table", location=Location(str(pyproject)))
            return ProjectFile(pyproject, table)
    return None


def find_project(start: Path | None = None) -> ProjectFile | None:
    """The nearest kentino.toml, or pyproject.toml with [tool.kentino], from `start` (default: here) up."""
    try:
        here = Path(os.path.abspath(start if start is not None else Path.cwd()))
    except OSError:  # the current directory was deleted under us: no checkout to be in
        return None
    for directory in (here, *here.parents):
        found = _table_of(directory)
        if found is not None:
            _check_keys(found)
            return found
    return None


def _check_keys(project: ProjectFile) -> None:
    """A misspelt key would silently mean the packaged directory: it is an error instead."""
    for key in project.table:
        if key not in NAMES:
            prefix = "" if project.path.name == PROJECT_FILE else "tool.kentino."
            raise ProjectFileError(f"unknown key {prefix}{key} (known: {', '.join(NAMES)})",
                                   location=Location(str(project.path)), suggestion=did_you_mean(key, NAMES))


def _from_project(project: ProjectFile, name: str) -> Path | None:
    value = project.table.get(name)
    if value is None:
        return None
    key = name if project.path.name == PROJECT_FILE else f"tool.kentino.{name}"
    if not isinstance(value, str) or not value:
        raise ProjectFileError(f"{key} must be a directory path (a string)", location=Location(str(project.path)))
    directory = Path(os.path.abspath(project.path.parent / value))
    if not directory.is_dir():
        raise ProjectFileError(f"{key} = '{value}': no such directory {directory}",
                               location=Location(str(project.path)))
    return directory


def locate(name: str, explicit: str | os.PathLike | None = None, start: Path | None = None) -> Path:
    """The absolute `rules` or `knowledge` directory a command uses (see the module's docstring)."""
    given = explicit or os.environ.get(ENVIRONMENT[name]) or None
    if given:
        return Path(os.path.abspath(given))
    project = find_project(start)
    found = _from_project(project, name) if project is not None else None
    return found if found is not None else bundled(name)
