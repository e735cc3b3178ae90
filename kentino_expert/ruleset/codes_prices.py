"""The codes of the price list (rules/prices.yaml): a part it cannot price, a price that is not one, a currency
mix, settings a quote cannot use, and a list past its policy age."""
from __future__ import annotations

from .diagnostic_code import DiagnosticCode as Code

_FILE = "rules/prices.yaml"

PRICE_CODES = (
    Code("E041", "error", "a price line names a part the catalog does not know, or one priced twice",
         "Each line of rules/prices.yaml prices one part: a card of knowledge/gpus.yaml or a chassis, adapter, "
         "switch or cable of knowledge/parts.yaml, by its id. A line for any other name prices nothing (a typo "
         "leaves the real part unpriced), and a part priced twice has no one price.",
         "prices:\n    - {part: rtx-pro-600, price: 8000, source: a reseller's page}\n",
         "Write the part's id as the catalog has it (the message offers the closest), once.", file=_FILE),
    Code("E042", "error", "a price is not a number above 0, or a part a quote may list has no price",
         "A quote multiplies each part's price by its quantity: a missing, zero or negative price would quote a "
         "build for less than it costs. Every card Kentino ships and every part of knowledge/parts.yaml needs a "
         "price, since the build search may quote any of them.",
         "prices:\n    - {part: h100-sxm, price: 0, source: a placeholder}\n",
         "Give the part's price in the list's currency, above 0, with its source.", file=_FILE),
    Code("E043", "error", "a price line is in another currency than the list's",
         "A quote adds its lines: they must share the list's `currency`. A line that states another currency "
         "would be added as if it were the list's.",
         "prices:\n    - {part: h100-sxm, price: 25000, currency: USD, source: a US shop}\n",
         "Convert the price to the list's currency and say the rate and its date in `source`.", file=_FILE),
    Code("E044", "error", "a setting of the price list is missing or not what a quote can use",
         "`currency` is an ISO 4217 code (EUR), `date` the day the prices were read (2026-12-01), "
         "`max_age_days` a whole number of days, `amortization_years` and `energy_price_per_kwh` numbers above "
         "0: the price per million tokens and per run divide the purchase by the years and add the energy.",
         "prices:\n  amortization_years: 0\n",
         "Give the setting the message names a value of the kind it lists.", file=_FILE,
         replacing="amortization_years"),
    Code("W311", "warning", "the price list is older than its policy's max_age_days",
         "Card prices move by the month. A list read longer ago than `max_age_days` still quotes, but its "
         "prices may no longer be the ones a buyer would pay.",
         "prices:\n  date: 2020-01-01\n",
         "Check the prices against their sources and set `date` to the day you did.", file=_FILE,
         replacing="date"),
)
