"""A build's quote: its bill of materials (cards, chassis, and for a multi-node fabric one adapter per GPU, the
switches of a non-blocking leaf-spine tree and the cables), the purchase price, the power at load, the rack units,
and what the work costs (the purchase amortized over the policy's period plus energy at its price per kWh, per
million output tokens at the plan's own throughput, or per run over its time to result). Parts and their power
are knowledge (knowledge/parts.yaml, gpus.yaml); prices are policy (rules/prices.yaml, read in ruleset/prices.py).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

HOURS_PER_YEAR = 8766.0  # 365.25 days
MAX_QUOTED_NODES = 10**9  # nodes; the largest fleet the grids size is ~4 million nodes
QUOTE_FIGURES = ("price_total", "power_kw", "rack_units", "price_per_million_tokens", "price_per_run")


@dataclass(frozen=True)
class PriceLine:
    """One part's price on the list, and where it comes from."""

    part: str
    price: float
    source: str
    public_estimate: bool = True


@dataclass(frozen=True)
class PriceList:
    """rules/prices.yaml, checked: one currency, a date, the policy's amortization period and energy price."""

    currency: str
    date: str  # ISO date the prices were read
    max_age_days: int
    amortization_years: float
    energy_price_per_kwh: float
    lines: Mapping[str, PriceLine]
    file: str = "rules/prices.yaml"
    digest: str = ""

    def price(self, part: str) -> float | None:
        line = self.lines.get(part)
        return line.price if line is not None else None


@dataclass(frozen=True)
class BomLine:
    part: str
    name: str
    quantity: int
    unit_price: float
    line_total: float


@dataclass(frozen=True)
class Quote:
    """What a build costs to buy and to run."""

    currency: str
    lines: tuple[BomLine, ...]
    price_total: float
    power_kw: float
    rack_units: int
    price_per_million_tokens: float | None = None
    price_per_run: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def figures(self) -> dict[str, float]:
        """The quote's figures by the names the answer's figures use (those that apply to the work)."""
        out = {"price_total": self.price_total, "power_kw": self.power_kw, "rack_units": self.rack_units}
        if self.price_per_million_tokens is not None:
            out["price_per_million_tokens"] = self.price_per_million_tokens
        if self.price_per_run is not None:
            out["price_per_run"] = self.price_per_run
        return out


@dataclass(frozen=True)
class Build:
    """What a quote needs of a plan: the card and node count, the fabric (an inter-node link id, or None when the
    nodes need none) and how many separate fabrics (replicas of multi-node units each have their own), and the
    plan's throughput or time to result."""

    gpu: str
    gpus_per_node: int
    nodes: int
    fabric: str | None = None
    fabrics: int = 1
    output_tokens_per_s: float | None = None
    time_to_result_days: float | None = None


def quote_of(build: Build, knowledge, prices: PriceList) -> Quote | None:
    """The quote of `build` (None: its card, its chassis or a fabric part is not on the list or in the parts)."""
    if not 1 <= build.nodes <= MAX_QUOTED_NODES:  # a rule may compute any count: past this, no quote is sane
        return None
    card = knowledge.gpus.get(build.gpu)
    chassis = knowledge.parts.chassis_for(build.gpus_per_node, card.form_factor) if card else None
    if card is None or chassis is None or card.board_power_w is None or prices.price(card.id) is None \
            or prices.price(chassis.id) is None:
        return None  # a card without its board power would be quoted at a power the rack cannot trust
    lines = [_line(card.id, card.name, build.nodes * build.gpus_per_node, prices),
             _line(chassis.id, chassis.name, build.nodes, prices)]
    watts = build.nodes * (chassis.base_power_w + build.gpus_per_node * card.board_power_w)
    units = build.nodes * chassis.rack_units
    if build.fabric is not None:
        parts = knowledge.parts.fabric(build.fabric)
        counts = fabric_counts(build.nodes * build.gpus_per_node, build.fabrics,
                               parts["switch"].ports if "switch" in parts else None)
        if counts is None or any(role not in parts or prices.price(parts[role].id) is None for role in counts):
            return None
        for role in ("adapter", "switch", "cable"):
            part = parts[role]
            lines.append(_line(part.id, part.name, counts[role], prices))
            watts += counts[role] * part.power_w
            units += counts[role] * part.rack_units
    total = sum(line.line_total for line in lines)
    power_kw = watts / 1000.0
    hourly = total / (prices.amortization_years * HOURS_PER_YEAR) + power_kw * prices.energy_price_per_kwh
    per_million = (hourly / (build.output_tokens_per_s * 3600.0) * 1e6
                   if build.output_tokens_per_s and build.output_tokens_per_s > 0 else None)
    per_run = hourly * build.time_to_result_days * 24.0 if build.time_to_result_days is not None else None
    return Quote(prices.currency, tuple(lines), total, power_kw, units, per_million, per_run)


def fabric_counts(gpus: int, fabrics: int, switch_ports: int | None) -> dict[str, int] | None:
    """Adapters, switches and cables of `fabrics` equal fabrics over `gpus` GPUs in all, one adapter per GPU: one
    switch when a fabric's ports fit on it, else a non-blocking two-tier leaf-spine tree (each leaf gives half its
    ports to GPUs, half to the spines). None: no switch is listed."""
    if switch_ports is None or switch_ports < 2:
        return None
    per_fabric = math.ceil(gpus / max(1, fabrics))
    if per_fabric <= switch_ports:
        switches, uplinks = 1, 0
    else:
        half = switch_ports // 2
        leaves = math.ceil(per_fabric / half)
        spines = math.ceil(leaves * half / switch_ports)
        switches, uplinks = leaves + spines, leaves * half
    return {"adapter": gpus, "switch": switches * fabrics, "cable": gpus + uplinks * fabrics}


def _line(part: str, name: str, quantity: int, prices: PriceList) -> BomLine:
    unit = prices.price(part)
    return BomLine(part, name, quantity, unit, unit * quantity)
