"""rules/prices.yaml, the price list a product manager keeps: one currency, the date the prices were read, the
policy's amortization period and energy price, and each part's price with its source (read and checked here
against knowledge/gpus.yaml and knowledge/parts.yaml; domain/quote.py prices a build with it)."""
from __future__ import annotations

import datetime
import hashlib
import math
import re
from types import MappingProxyType

from ..domain.quote import PriceLine, PriceList
from ..errors import Location, did_you_mean
from ..yamlsrc import location_of
from .diagnostics import DiagnosticSink
from .rulefile import check_keys

PRICES_FILE = "prices.yaml"
PRICES_KEYS = ("currency", "date", "max_age_days", "amortization_years", "energy_price_per_kwh", "lines")
LINE_KEYS = ("part", "price", "currency", "source", "public_estimate")
_CURRENCY = re.compile(r"^[A-Z]{3}$")  # ISO 4217


def read_prices(data, display: str, text: str, knowledge, sink: DiagnosticSink,
                today: datetime.date | None = None) -> PriceList | None:
    """The checked price list of a prices file (None when its settings cannot be read); every problem goes to
    `sink` at its line."""
    body = data.get("prices") if isinstance(data, dict) else None
    if not isinstance(body, dict):
        sink.error(Location(display, 1, 1), "E004", "expected a top-level 'prices:' mapping")
        return None
    check_keys(data, ("prices",), display, sink, "the price list")
    check_keys(body, PRICES_KEYS, display, sink, "prices")
    settings = _settings(body, display, sink)
    lines = _lines(body, display, settings.get("currency"), knowledge, sink)
    _check_complete(lines, body, display, knowledge, sink)
    if len(settings) < 5:
        return None
    read_on = settings["date"]
    age = ((today or datetime.date.today()) - read_on).days
    if age > settings["max_age_days"]:
        sink.warning(location_of(body, "date", display), "W311",
                     # no count of days: the message (and the documented example of it) reads the same every day
                     f"the price list was read on {read_on.isoformat()}, longer ago than the policy's "
                     f"max_age_days of {settings['max_age_days']:,}: check the prices and give today's date")
    return PriceList(settings["currency"], read_on.isoformat(), settings["max_age_days"],
                     settings["amortization_years"], settings["energy_price_per_kwh"], MappingProxyType(lines),
                     display, hashlib.sha256(text.encode()).hexdigest())


def _settings(body, display: str, sink: DiagnosticSink) -> dict:
    """The list's own settings that are right (E044 for each one that is not)."""
    out = {}
    currency = body.get("currency")
    if not isinstance(currency, str) or not _CURRENCY.match(currency):
        _bad(body, "currency", display, sink, "an ISO 4217 code such as EUR")
    else:
        out["currency"] = currency
    when = body.get("date")
    if isinstance(when, str):
        try:
            when = datetime.date.fromisoformat(when)
        except ValueError:
            when = None
    if not isinstance(when, datetime.date) or isinstance(when, datetime.datetime):
        _bad(body, "date", display, sink, "the date the prices were read, as 2026-12-01")
    else:
        out["date"] = when
    for key, kind in (("max_age_days", "a whole number of days above 0"),
                      ("amortization_years", "a number of years above 0"),
                      ("energy_price_per_kwh", "a price above 0 per kWh")):
        value = body.get(key)
        whole = key == "max_age_days"
        if not _positive(value) or (whole and not isinstance(value, int)):
            _bad(body, key, display, sink, kind)
        else:
            out[key] = value
    return out


def _bad(body, key: str, display: str, sink: DiagnosticSink, wanted: str) -> None:
    where = location_of(body, key, display) if key in body else getattr(body, "location", Location(display))
    shown = "missing" if key not in body else f"{body[key]!r}"
    sink.error(where, "E044", f"prices.{key}: {shown}; expected {wanted}")


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _lines(body, display: str, currency: str | None, knowledge, sink: DiagnosticSink) -> dict:
    raw = body.get("lines")
    if not isinstance(raw, list):
        _bad(body, "lines", display, sink, "a list of {part, price, source}")
        return {}
    known = {**{gpu.id: gpu for gpu in knowledge.gpus.values()}, **dict.fromkeys(knowledge.parts.ids())}
    out: dict = {}
    for index, line in enumerate(raw):
        where = location_of(raw, index, display)
        if not isinstance(line, dict):
            sink.error(where, "E004", "a price line is a mapping {part, price, source}")
            continue
        check_keys(line, LINE_KEYS, display, sink, "a price line")
        part, price = line.get("part"), line.get("price")
        if not isinstance(part, str):
            part = repr(part)  # a list or a mapping where an id goes: named in the message as written
        if part not in known:
            sink.error(location_of(line, "part", display) if "part" in line else where, "E041",
                       f"prices.lines[{index}].part: '{part}' is not a card of knowledge/gpus.yaml or a part of "
                       "knowledge/parts.yaml", suggestion=did_you_mean(str(part), known))
        elif part in out:
            sink.error(location_of(line, "part", display), "E041", f"prices.lines[{index}].part: '{part}' is "
                       "priced twice")
        if not _positive(price):
            sink.error(location_of(line, "price", display) if "price" in line else where, "E042",
                       f"prices.lines[{index}].price: {price!r} for '{part}'; a price is a number above 0")
        if "currency" in line and line["currency"] != currency:
            sink.error(location_of(line, "currency", display), "E043",
                       f"prices.lines[{index}].currency: '{line['currency']}' in a list priced in {currency}; "
                       f"convert the price to {currency} (and say the rate in its source)")
        if not isinstance(line.get("source"), str) or not line["source"].strip():
            sink.error(where, "E004", f"prices.lines[{index}]: missing 'source' (where the price comes from)")
        if part in known and part not in out and _positive(price):
            out[part] = PriceLine(part, float(price), line.get("source") or "", bool(line.get("public_estimate", True)))
    return out


def _check_complete(lines: dict, body, display: str, knowledge, sink: DiagnosticSink) -> None:
    """E042 for each part a quote may need that the list does not price: every card Kentino ships, every chassis
    and every fabric part of knowledge/parts.yaml."""
    needed = [gpu.id for gpu in knowledge.gpus.values() if gpu.kentino_ships] + list(knowledge.parts.ids())
    raw = body.get("lines")
    named = {line.get("part") for line in raw if isinstance(line, dict) and isinstance(line.get("part"), str)} \
        if isinstance(raw, list) else set()
    where = location_of(body, "lines", display) if "lines" in body else Location(display, 1, 1)
    for part in needed:
        if part not in lines and part not in named:  # a line with a bad price has its own E042
            sink.error(where, "E042", f"prices.lines: no price for '{part}', a part a quote may list; add "
                       f"`- {{part: {part}, price: ..., source: ...}}`")
