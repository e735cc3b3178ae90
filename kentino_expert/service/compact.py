"""The compact view of a decision (`?view=compact`, MCP `view: "compact"`): what a chat bot needs to reply and
ask on, in at most 2 KB of JSON (a full answer is ten to twenty times that: answer_size.py measures it for the
served schema and the docs).

It keeps the decision id, the status, the recommendation's shape, price, power and summary, the first three
questions (fact and question), the warning codes and the alternatives (card, kind, nodes, precision, works, price,
power). Text from the rules and the catalog is clipped to a byte budget per field, with an ellipsis, and lists to
a count (the number left out is given), so the whole stays within MAX_COMPACT_BYTES whatever the rule set writes;
the full answer stays available by the decision id.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .. import fastjson
from ..domain.vocabulary import Kind, Status

MAX_COMPACT_BYTES = 2048
VIEWS = ("full", "compact")
ELLIPSIS = "…"
# byte budgets of the JSON string of each clipped field, and the most items of each list
SUMMARY_BYTES = 320
ASK_BYTES = 160
NAME_BYTES = 40  # a fact, card, precision or warning code
MAX_QUESTIONS = 3
MAX_WARNINGS = 5
MAX_ALTERNATIVES = 3
_FROZEN = ConfigDict(frozen=True)


class CompactRecommendation(BaseModel):
    """What to buy, in short."""
    model_config = _FROZEN
    kind: Kind = Field(description="The kind of build recommended.")
    nodes: int | None = Field(description="Servers (nodes) to buy.")
    gpus_per_node: int | None = Field(description="GPUs in each node.")
    gpu: str | None = Field(description="The card, by its catalog id.")
    precision: str | None = Field(description="Weight precision the plan runs at.")
    price_total: float | None = Field(None, description="Purchase price of the build in the price list's currency "
                                                        "(null: no quote).")
    power_kw: float | None = Field(None, description="Power the rack must supply at load, kW (null: no quote).")
    summary: str = Field(description=f"The full answer's summary, clipped to {SUMMARY_BYTES} bytes with an "
                                     f"ellipsis when longer.")


class CompactQuestion(BaseModel):
    """A fact still worth asking for, and the question to put."""
    model_config = _FROZEN
    fact: str = Field(description="The fact to ask for (a property of the facts schema).")
    ask: str = Field(description=f"The question, clipped to {ASK_BYTES} bytes with an ellipsis when longer.")


class CompactAlternative(BaseModel):
    """Another build that was weighed."""
    model_config = _FROZEN
    gpu: str | None = Field(description="The card, by its catalog id.")
    kind: Kind | None = Field(description="The kind of build.")
    nodes: int | None = Field(description="Servers (nodes).")
    precision: str | None = Field(description="Weight precision the build's plan runs at.")
    works: bool | None = Field(description="Whether that build would serve the workload.")
    price_total: float | None = Field(None, description="Its purchase price (null: no quote).")
    power_kw: float | None = Field(None, description="Its power at load, kW (null: no quote).")


class CompactDecision(BaseModel):
    """A decision in at most 2 KB of JSON: what a chat bot needs to reply and to ask next. The full answer
    is GET /v1/decisions/{decision_id}, or the same call without `view=compact`."""
    model_config = _FROZEN
    view: str = Field("compact", description="Always 'compact': this is not the full answer.")
    decision_id: str | None = Field(description="Id of the decision in the log (null when not logged).")
    status: Status = Field(description="final, or provisional while a fact worth asking for is unknown.")
    recommendation: CompactRecommendation = Field(description="What to buy.")
    questions: list[CompactQuestion] = Field(description=f"The first {MAX_QUESTIONS} facts still worth asking "
                                                         f"for, most decisive first.")
    more_questions: int = Field(description="How many further questions the full answer has.")
    warnings: list[str] = Field(description=f"The codes of the first {MAX_WARNINGS} warnings.")
    more_warnings: int = Field(description="How many further warnings the full answer has.")
    alternatives: list[CompactAlternative] = Field(description=f"Up to {MAX_ALTERNATIVES} other builds weighed "
                                                               f"(empty when the answer has none).")
    currency: str | None = Field(None, description="The currency of every price_total (null: no quote).")


def clip(text, max_bytes: int) -> str | None:
    """`text` whose JSON string (quotes included) is at most `max_bytes`, cut with an ellipsis when longer."""
    if text is None:
        return None
    text = str(text)
    if _json_size(text) <= max_bytes:
        return text
    low, high = 0, len(text)  # the longest prefix that fits with the ellipsis: sizes grow with the prefix
    while low < high:
        middle = (low + high + 1) // 2
        if _json_size(text[:middle] + ELLIPSIS) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return text[:low] + ELLIPSIS


def _json_size(value) -> int:
    return len(fastjson.dumps_bytes(value))


def _field(item, name):
    """A field of a dict or of a model (the alternatives may come either way)."""
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _alternative(item) -> dict:
    kind, nodes, works = _field(item, "kind"), _field(item, "nodes"), _field(item, "works")
    return {"gpu": clip(_field(item, "gpu"), NAME_BYTES), "kind": kind,
            "nodes": nodes if isinstance(nodes, int) and not isinstance(nodes, bool) else None,
            "precision": clip(_field(item, "precision"), NAME_BYTES),
            "works": works if isinstance(works, bool) else None, **_price(_field(item, "figures") or {})}


def _price(figures: dict) -> dict:
    """price_total and power_kw of a build's figures (figures from a rule set may be anything: numbers only)."""
    return {name: (value if isinstance(value, (int, float)) and not isinstance(value, bool) else None)
            for name, value in ((n, _value(figures.get(n))) for n in ("price_total", "power_kw"))}


def _value(figure):
    return figure.get("value") if isinstance(figure, dict) else figure


def compact(response: dict) -> dict:
    """The compact view of a decision's JSON response (`Decision.response()`), as JSON-ready values."""
    rec = response["recommendation"]
    questions = response.get("questions") or []
    warnings = response.get("warnings") or []
    alternatives = response.get("alternatives") or []
    view = {
        "view": "compact", "decision_id": response.get("decision_id"), "status": response["status"],
        "recommendation": {"kind": rec["kind"], "nodes": rec.get("nodes"), "gpus_per_node": rec.get("gpus_per_node"),
                           "gpu": clip(rec.get("gpu"), NAME_BYTES), "precision": clip(rec.get("precision"), NAME_BYTES),
                           **_price(response.get("figures") or {}),
                           "summary": clip(rec.get("summary", ""), SUMMARY_BYTES)},
        "questions": [{"fact": clip(q["fact"], NAME_BYTES), "ask": clip(q["ask"], ASK_BYTES)}
                      for q in questions[:MAX_QUESTIONS]],
        "more_questions": max(0, len(questions) - MAX_QUESTIONS),
        "warnings": [clip(w["code"], NAME_BYTES) for w in warnings[:MAX_WARNINGS]],
        "more_warnings": max(0, len(warnings) - MAX_WARNINGS),
        "alternatives": [_alternative(a) for a in alternatives[:MAX_ALTERNATIVES]],
        "currency": clip((response.get("price_list") or {}).get("currency"), NAME_BYTES),
    }
    return view


def check_view(value) -> str:
    """'full' or 'compact'; ValueError naming the choices for anything else."""
    if value is None or value == "":
        return "full"
    if value not in VIEWS:
        raise ValueError(f"must be 'full' or 'compact', not '{str(value)[:40]}'")
    return value
