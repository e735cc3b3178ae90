"""The quote in the text and Markdown answers: the bill of materials, the purchase price, power and rack units,
what the work costs, and the price list it comes from."""
from __future__ import annotations

from .model import Answer


def money(value: float, currency: str) -> str:
    return f"{currency} {value:,.0f}" if abs(value) >= 100 else f"{currency} {value:,.2f}"


def _currency(answer: Answer) -> str:
    return answer.price_list.currency if answer.price_list is not None else ""


def quote_totals(figures: dict, currency: str) -> str:
    """'EUR 95,400, 6.2 kW, 4 U; EUR 0.61 per million output tokens' from a build's figures ('' without a quote)."""
    value = {name: (f.value if hasattr(f, "value") else f) for name, f in figures.items()}
    if "price_total" not in value:
        return ""
    text = f"{money(value['price_total'], currency)}, {value['power_kw']:,.1f} kW, {value['rack_units']:,.0f} U"
    if "price_per_million_tokens" in value:
        text += f"; {money(value['price_per_million_tokens'], currency)} per million output tokens"
    if "price_per_run" in value:
        text += f"; {money(value['price_per_run'], currency)} per run"
    return text


def price_list_line(answer: Answer) -> str:
    prices = answer.price_list
    return (f"prices of {prices.date} ({prices.file}, {prices.digest[:16]}), purchase over "
            f"{prices.amortization_years:g} years, energy at {money(prices.energy_price_per_kwh, prices.currency)}"
            "/kWh")


def quote_text(answer: Answer) -> list[str]:
    """The text answer's quote section (none without a bill of materials)."""
    if not answer.bill_of_materials:
        return []
    currency = _currency(answer)
    lines = [f"Quote: {quote_totals(answer.figures, currency)}"]
    lines += [f"  {line.quantity:>4} x {line.name} ({line.part}) at {money(line.unit_price, currency)} = "
              f"{money(line.line_total, currency)}" for line in answer.bill_of_materials]
    return lines + [f"  ({price_list_line(answer)})", ""]


def quote_markdown(answer: Answer) -> list[str]:
    """The Markdown report's quote: the bill as a table, the totals and the price list."""
    if not answer.bill_of_materials:
        return []
    currency = _currency(answer)
    out = ["## Quote", "", f"**{quote_totals(answer.figures, currency)}**", "",
           "| part | | quantity | unit price | total |", "|---|---|---:|---:|---:|"]
    out += [f"| `{line.part}` | {line.name} | {line.quantity:,} | {money(line.unit_price, currency)} | "
            f"{money(line.line_total, currency)} |" for line in answer.bill_of_materials]
    return out + ["", f"From the {price_list_line(answer)}.", ""]


def alternative_price(alternative, answer: Answer) -> str:
    """', EUR 95,400, 6.2 kW' for an alternative with a quote ('' without)."""
    figures = alternative.figures
    if "price_total" not in figures:
        return ""
    power = f"{figures['power_kw']:,.1f} kW"
    if alternative.figure is not None and alternative.figure.name == "price_total":  # the deciding figure says it
        return f", {power}"
    return f", {money(figures['price_total'], _currency(answer))}, {power}"
