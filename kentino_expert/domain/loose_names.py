"""Catalog names as people write them: without case, separators, a repository owner, a vendor or a tuning suffix."""
from __future__ import annotations

import re

_ORGANIZATION = re.compile(r"^[\w.-]+/")  # a Hugging Face repository's owner: "meta-llama/"
_SEPARATORS = re.compile(r"[\s_-]+")
_WRAPPING = ({"meta"}, {"instruct", "chat", "it", "hf"})  # a vendor before the name, a tuning suffix after it


def loose_name(name: str) -> str:
    """A catalog name without case, separators, a repository owner, a leading vendor or a trailing tuning
    suffix: 'Meta-Llama-3.1-70B-Instruct', 'llama 3.1 70b' and 'llama-3.1-70b' are all 'llama3.170b'."""
    words = [w for w in _SEPARATORS.split(_ORGANIZATION.sub("", name.strip().lower())) if w]
    while len(words) > 1 and words[0] in _WRAPPING[0]:
        words.pop(0)
    while len(words) > 1 and words[-1] in _WRAPPING[1]:
        words.pop()
    return "".join(words)
