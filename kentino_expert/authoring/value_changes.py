"""A changed field of an answer in `rules diff`, old and new: `tp 2 -> 4`, a sentence by the part that moved."""
from __future__ import annotations

from collections.abc import Mapping

CONTEXT = 24  # characters of a long text kept on each side of the part that changed
MIDDLE = 80  # ... and of that part itself


def leaves(old, new, path: str = "") -> list[tuple[str, object, object]]:
    """(path, old, new) of every part that differs: mappings by key (`figure.value`), anything else whole; a
    side without the part has None."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out = []
        for key in dict.fromkeys([*old, *new]):
            out += leaves(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
        return out
    return [] if old == new else [(path, old, new)]


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '\\"') + '"'


def _texts(old: str, new: str) -> tuple[str, str]:
    """Two texts as shown side by side: whole when short, else the part that changed with some context."""
    if len(old) <= CONTEXT * 2 + MIDDLE and len(new) <= CONTEXT * 2 + MIDDLE:
        return _quoted(old), _quoted(new)
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    start = max(0, head - CONTEXT)

    def part(text: str) -> str:
        end = len(text) - max(0, tail - CONTEXT)
        middle = text[start:end]
        if len(middle) > MIDDLE + 2 * CONTEXT:
            middle = middle[:MIDDLE + CONTEXT] + "\u2026"
        return _quoted(("\u2026" if start else "") + middle + ("\u2026" if end < len(text) else ""))
    return part(old), part(new)


def shown(value) -> str:
    """One value as the text report shows it: (none), true/false, a number, a word, a quoted text."""
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, str):
        return value if value and value.isprintable() and " " not in value and '"' not in value else _quoted(value)
    return str(value)


def change_text(name: str, old, new) -> str:
    """`tp 2 -> 4`; `warning operations-tax message "…2-5x…" -> "…2-9x…"`: each part that changed."""
    parts = []
    for path, before, after in leaves(old, new):
        label = f"{name} {path}" if path else name
        if isinstance(before, str) and isinstance(after, str) and " " in before + after:
            before_text, after_text = _texts(before, after)
        else:
            before_text, after_text = shown(before), shown(after)
        parts.append(f"{label} {before_text} -> {after_text}")
    return ", ".join(parts)
