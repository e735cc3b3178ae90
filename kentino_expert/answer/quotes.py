"""A plan's quote for the build search and the answer: the plan's build as domain/quote.py prices it (its
fabric only where nodes talk over one: a multi-node plan, or each unit of replicas of multi-node units), and the
least any plan of a candidate can cost (the search's bound when it ranks by price)."""
from __future__ import annotations

import math
import threading
import weakref

from ..domain.quote import Build, PriceList, Quote, quote_of
from .cache import LruCache
from .model import BomLineOut, PriceListId
from .plans import UNIT_REPLICAS, Plan

FABRIC_KINDS = ("multi-node-ib", UNIT_REPLICAS)  # kind classes whose nodes exchange activations over a fabric


QUOTES_KEPT = 4096  # builds' quotes kept per price list (a quote is ~1 KB): a chat turn prices ~100 builds
PRICERS_KEPT = 16  # (knowledge, price list) pairs whose pricers are kept: a process holds one or two rule sets


class Pricer:
    """Quotes plans with one knowledge catalog and one price list (None: no price list, no quotes). Both never
    change once loaded, so a build's quote and a shape's floor are memoized: `Pricer(knowledge, prices)` hands
    back the pricer already made for the same two objects."""

    _made: dict = {}  # (id(knowledge), id(prices)) -> (weakref of each, the pricer)
    _lock = threading.Lock()

    def __new__(cls, knowledge, prices: PriceList | None):
        key = (id(knowledge), id(prices))
        with cls._lock:
            entry = cls._made.get(key)
            if entry is not None and entry[0]() is knowledge and (prices is None or entry[1]() is prices):
                return entry[2]
            pricer = super().__new__(cls)
            pricer.knowledge, pricer.prices = knowledge, prices
            pricer._floors, pricer._quotes = {}, LruCache(QUOTES_KEPT)
            if len(cls._made) >= PRICERS_KEPT:  # an old pair (a reloaded rule set) makes room
                cls._made.pop(next(iter(cls._made)))
            cls._made[key] = (weakref.ref(knowledge), weakref.ref(prices) if prices is not None else None, pricer)
            return pricer

    def quote(self, plan: Plan) -> Quote | None:
        """The plan's quote (None: no price list, a frontier plan, or a part the list or the parts lack)."""
        if self.prices is None or plan.kind in (None, "frontier") or not plan.gpu or not plan.gpus_per_node:
            return None
        build = build_of(plan, self.knowledge)
        return self._quotes.get_or_compute(build, lambda: quote_of(build, self.knowledge, self.prices))

    def floor(self, gpu: str, gpus_per_node: int | None) -> float:
        """The least a plan of this card and shape can cost: one node, its cards and its chassis (0 when it
        cannot be priced: such a candidate is sized rather than skipped)."""
        if self.prices is None or not gpus_per_node:
            return 0.0
        found = self._floors.get((gpu, gpus_per_node))
        if found is None:
            quote = quote_of(Build(gpu, gpus_per_node, 1), self.knowledge, self.prices)
            found = self._floors[(gpu, gpus_per_node)] = quote.price_total if quote is not None else 0.0
        return found


def build_of(plan: Plan, knowledge) -> Build:
    """What domain/quote.py needs of a plan."""
    nodes = max(1, int(plan.nodes or 1))
    fabric, fabrics = None, 1
    link = knowledge.links.get(plan.interconnect or "")
    if plan.kind_class in FABRIC_KINDS and nodes > 1 and link is not None and link.scope == "inter-node":
        fabric = link.id
        fabrics = max(1, int(plan.replicas or 1)) if plan.kind_class == UNIT_REPLICAS else 1
    return Build(plan.gpu, int(plan.gpus_per_node), nodes, fabric, fabrics,
                 plan.figures.get("output_tokens_per_s"), plan.time_to_result_days)


# the quote's figures in the answer: unit (the currency where it says {currency}) and meaning
QUOTE_FIGURE_TEXTS = {
    "price_total": ("{currency}", "Purchase price of the build: the sum of its bill of materials (rules/prices.yaml)."),
    "power_kw": ("kW", "Power the rack must supply at load: every node's cards at board power and its chassis, plus "
                       "the fabric's adapters and switches."),
    "rack_units": ("U", "Rack units of the nodes and switches."),
    "price_per_million_tokens": ("{currency} per million output tokens",
                                 "What a million output tokens cost at the plan's own throughput: the purchase "
                                 "amortized over the price list's years plus the energy at its price per kWh."),
    "price_per_run": ("{currency} per run", "What one run costs over its time to result: the purchase amortized "
                                            "over the price list's years plus the energy at its price per kWh."),
}


def quote_figures(quote: Quote) -> dict[str, tuple[float, str, str]]:
    """name -> (value, unit, description) of a quote's figures."""
    return {name: (value, QUOTE_FIGURE_TEXTS[name][0].format(currency=quote.currency), QUOTE_FIGURE_TEXTS[name][1])
            for name, value in quote.figures().items()}


def bill_of(quote: Quote | None) -> list[BomLineOut]:
    """The answer's bill of materials of a quote (empty without one)."""
    if quote is None:
        return []
    return [BomLineOut(part=line.part, name=line.name, quantity=line.quantity, unit_price=line.unit_price,
                       line_total=line.line_total) for line in quote.lines]


def price_list_id(prices: PriceList | None) -> PriceListId | None:
    if prices is None:
        return None
    return PriceListId(file=prices.file, digest=prices.digest, currency=prices.currency, date=prices.date,
                       amortization_years=prices.amortization_years, energy_price_per_kwh=prices.energy_price_per_kwh)


def recommended_plan(recommendation, figures: dict) -> Plan:
    """The traced answer's recommendation as a plan a quote reads (its throughput and time to result)."""
    parallelism = recommendation.parallelism
    return Plan(kind=recommendation.kind, nodes=recommendation.nodes, gpus_per_node=recommendation.gpus_per_node,
                gpu=recommendation.gpu, precision=recommendation.precision, pp=parallelism.pp, values={},
                because="", time_to_result_days=figures.get("time_to_result_days"),
                figures={"output_tokens_per_s": figures["output_tokens_per_s"]}
                if "output_tokens_per_s" in figures else {},
                tp=parallelism.tp, dp=parallelism.dp, interconnect=recommendation.interconnect,
                replicas=recommendation.replicas)


def work_price(quote: Quote | None) -> float:
    """What the work costs on a quote's build: per run when the plan has a time to result (training, batch), else
    per million output tokens (serving); infinite when neither is known (ranked last)."""
    if quote is None:
        return math.inf
    for value in (quote.price_per_run, quote.price_per_million_tokens):
        if value is not None:
            return value
    return math.inf


def price_text(quote: Quote, criterion: str) -> str:
    """The figure a price criterion compared, in words ("EUR 80,681", "EUR 0.43 per million output tokens")."""
    if criterion == "cheapest":
        return f"{quote.currency} {quote.price_total:,.0f}"
    if quote.price_per_run is not None:
        return f"{quote.currency} {quote.price_per_run:,.0f} per run"
    return f"{quote.currency} {quote.price_per_million_tokens:,.2f} per million output tokens"
