"""The heuristics of the source document (knowledge/heuristics.yaml): the id, section and text of each one the
rules cite, as rule pages and explanations quote them."""
from __future__ import annotations

from pathlib import Path

from ..errors import KnowledgeError, Location, did_you_mean
from ..yamlsrc import location_of

_HEURISTIC_KEYS = ("id", "section", "text")


def _check_heuristic_keys(item: dict, path: str) -> None:
    """A misspelt key (`sectoin:`) is refused at its line: it was dropped, and the heuristic lost its section."""
    for key in item:
        if key not in _HEURISTIC_KEYS:
            raise KnowledgeError(f"heuristic '{item['id']}': unknown key '{key}'",
                                 location=location_of(item, key, path),
                                 suggestion=did_you_mean(str(key), _HEURISTIC_KEYS))
    if "section" in item and item["section"] is not None and not isinstance(item["section"], str):
        raise KnowledgeError(f"heuristic '{item['id']}': 'section' must be text",
                             location=location_of(item, "section", path))


def read_heuristics(data, path: Path, locations: dict | None = None) -> dict[str, dict]:
    """id -> {section, text} of heuristics.yaml's parsed `data`; a KnowledgeError at the line of what is wrong.
    `locations`, when given, receives id -> the Location of its entry."""
    entries = data.get("heuristics") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise KnowledgeError("expected a top-level 'heuristics:' list", location=Location(str(path), 1, 1))
    out = {}
    for index, item in enumerate(entries):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not isinstance(item.get("text"), str):
            raise KnowledgeError("each heuristic needs 'id' and 'text'",
                                 location=location_of(entries, index, str(path)))
        where = location_of(entries, index, str(path))
        if item["id"] in out:  # the second would replace the first's text in every page and explanation
            raise KnowledgeError(f"duplicate heuristic id '{item['id']}'", location=where)
        _check_heuristic_keys(item, str(path))
        out[item["id"]] = {"section": str(item.get("section") or ""), "text": item["text"]}
        if locations is not None:
            locations[item["id"]] = where
    return out
