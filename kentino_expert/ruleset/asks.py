"""The questions of facts.yaml filled from the catalog: `{shipped_cards}` in an `ask` lists the cards Kentino ships."""
from __future__ import annotations

from dataclasses import replace

from ..lang.templates import check_template, render_template
from ..lang.valuetypes import TEXT
from .namespace import Namespace


def shipped_cards(knowledge) -> str:
    """'rtx-pro-6000 (96 GB), rtx-5090 (32 GB), l40 (48 GB) or l4 (24 GB)': the cards Kentino ships, in the
    catalog's order, by the ids the fact `gpu` takes."""
    cards = [f"{gpu.id} ({gpu.memory_gb:g} GB)" for gpu in knowledge.gpus.values() if gpu.kentino_ships]
    return " or ".join([", ".join(cards[:-1]), cards[-1]] if len(cards) > 1 else cards)


# the names an `ask` may show, each filled from the knowledge catalog when the rule set is compiled
ASK_NAMES = {"shipped_cards": shipped_cards}
_NAMESPACE = Namespace(dict.fromkeys(ASK_NAMES, TEXT), dict.fromkeys(ASK_NAMES, "catalog"))


def filled(policies: dict, knowledge, sink) -> dict:
    """The fact policies with each `ask` filled from the catalog; E106 at the question for a name it does not
    know (an unknown name would otherwise be asked as `?`)."""
    values = {name: fill(knowledge) for name, fill in ASK_NAMES.items()}
    out = {}
    for name, policy in policies.items():
        errors = len(sink.errors)
        check_template(policy.ask, policy.ask_location or policy.location, _NAMESPACE, sink, None, f"ask of '{name}'")
        out[name] = replace(policy, ask=render_template(policy.ask, values)) if len(sink.errors) == errors else policy
    return out
