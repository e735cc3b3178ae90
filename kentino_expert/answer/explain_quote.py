"""The quote in an explanation (Markdown and HTML), from an answer's JSON: the bill of materials with its totals,
and the price list's file, date and digest beside the rule set's (an old quote replays with its own prices)."""
from __future__ import annotations

from collections.abc import Callable

from .render_quote import money, quote_totals


def _bill(answer: dict) -> tuple[list, str]:
    lines = answer.get("bill_of_materials") or []
    currency = str((answer.get("price_list") or {}).get("currency") or "")
    return lines, currency


def _totals(answer: dict, currency: str) -> str:
    figures = {name: figure.get("value") for name, figure in (answer.get("figures") or {}).items()
               if isinstance(figure, dict)}
    return quote_totals(figures, currency)


def bill_markdown(answer: dict) -> list[str]:
    """'## Quote' with the bill as a table (nothing without a bill)."""
    lines, currency = _bill(answer)
    if not lines:
        return []
    out = ["## Quote", "", f"**{_totals(answer, currency)}**", "", "| part | | quantity | unit price | total |",
           "|---|---|---:|---:|---:|"]
    out += [f"| `{line['part']}` | {line['name']} | {line['quantity']:,} | {money(line['unit_price'], currency)} | "
            f"{money(line['line_total'], currency)} |" for line in lines]
    return out + [""]


def bill_html(answer: dict, escape: Callable[[object], str]) -> list[str]:
    """The quote section of the HTML page (nothing without a bill)."""
    lines, currency = _bill(answer)
    if not lines:
        return []
    parts = [f'<section class="quote"><h2>Quote</h2><p><strong>{escape(_totals(answer, currency))}</strong></p>',
             "<table><tr><th>part</th><th></th><th>quantity</th><th>unit price</th><th>total</th></tr>"]
    parts += [f"<tr><td><code>{escape(line['part'])}</code></td><td>{escape(line['name'])}</td>"
              f"<td>{line['quantity']:,}</td><td>{escape(money(line['unit_price'], currency))}</td>"
              f"<td>{escape(money(line['line_total'], currency))}</td></tr>" for line in lines]
    return parts + ["</table></section>"]


def _price_list(answer: dict) -> dict | None:
    found = answer.get("price_list")
    return found if isinstance(found, dict) and found.get("digest") else None


def price_list_markdown(answer: dict) -> list[str]:
    found = _price_list(answer)
    if found is None:
        return []
    return [f"- price list: `{found.get('file')}` of {found.get('date')}, in {found.get('currency')}, digest "
            f"`{found['digest']}`"]


def price_list_html(answer: dict, escape: Callable[[object], str]) -> str:
    found = _price_list(answer)
    if found is None:
        return ""
    return (f"; price list <code>{escape(found.get('file'))}</code> of {escape(found.get('date'))}, digest "
            f"<code>{escape(found['digest'])}</code>")
