"""`rules check` against the bounds of lang/limits.py: ids, literals, texts, rules and the text of an answer."""
from __future__ import annotations

import string
from collections import Counter

from ..errors import Location, clipped
from ..lang import nodes
from ..lang.limits import (
    MAX_ANSWER_CHARS,
    MAX_FIELD_CHARS,
    MAX_ID_CHARS,
    MAX_LITERAL_CHARS,
    MAX_NUMBER_CHARS,
    MAX_RULES,
    MAX_SENTENCE_CHARS,
    MAX_TEXT_CHARS,
)
from ..lang.templates import spec_width
from ..lang.valuetypes import BOOL, NUMBER, base_type
from ..yamlsrc import LocatedDict, LocatedList
from .diagnostics import DiagnosticSink


def id_problem(what: str, value: str) -> str | None:
    """Why `value` cannot be the id it is given as (None: it can): longer than MAX_ID_CHARS."""
    if len(value) <= MAX_ID_CHARS:
        return None
    return f"{what} '{clipped(value, 40)}' is {len(value):,} characters long; an id is at most {MAX_ID_CHARS}"


def literal_problem(value) -> str | None:
    """Why a text value written as a literal is too long (None: it is not)."""
    if not isinstance(value, str) or len(value) <= MAX_LITERAL_CHARS:
        return None
    return (f"a literal of {len(value):,} characters; a literal is at most {MAX_LITERAL_CHARS} (as long as a "
            "fact's text may be)")


def long_literal(node) -> nodes.Literal | None:
    """The first text literal of an expression longer than MAX_LITERAL_CHARS, or None."""
    if isinstance(node, nodes.Literal):
        return node if literal_problem(node.value) else None
    inner = node.items if isinstance(node, (nodes.In, nodes.ListLit)) else ()
    for child in (*nodes.children(node), *inner):
        found = long_literal(child)
        if found is not None:
            return found
    return None


def sentence_problem(text: str, what: str) -> str | None:
    """Why a sentence as written is too long (a template, a question, a reason), or None."""
    if len(text) <= MAX_SENTENCE_CHARS:
        return None
    return f"{what}: {len(text):,} characters; a sentence is at most {MAX_SENTENCE_CHARS:,}"


def within_written_bounds(data, display: str, sink: DiagnosticSink) -> bool:
    """Whether every key of the file is at most MAX_ID_CHARS (E038) and every text at most MAX_TEXT_CHARS
    (E040); each one past its bound is a root cause at its place, and nothing else of the file is read (no
    message quotes a megabyte)."""
    before = len(sink.errors)
    _walk(data, Location(display, 1, 1), display, sink)
    return len(sink.errors) == before


def _walk(value, where: Location, display: str, sink: DiagnosticSink) -> None:
    if isinstance(value, dict):
        keys = getattr(value, "key_locations", {})
        values = getattr(value, "value_locations", {})
        for key, item in value.items():
            if isinstance(key, str) and len(key) > MAX_ID_CHARS:
                sink.error(keys.get(key, where), "E038", f"the name '{clipped(key, 40)}' is {len(key):,} "
                           f"characters long; a name is at most {MAX_ID_CHARS}", root=True)
            _walk(item, values.get(key, where) if isinstance(value, LocatedDict) else where, display, sink)
    elif isinstance(value, list):
        places = getattr(value, "item_locations", []) if isinstance(value, LocatedList) else []
        for index, item in enumerate(value):
            _walk(item, places[index] if index < len(places) else where, display, sink)
    elif isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
        sink.error(where, "E040", f"a text of {len(value):,} characters; a text of a rule file is at most "
                   f"{MAX_TEXT_CHARS:,}")


def check_rule_count(rules, sink: DiagnosticSink) -> None:
    """E209 when the rule set holds more than MAX_RULES rules, at the rule of the file holding the most from
    which there are too many (counting the other files' rules first): the file added last, as a rule."""
    if len(rules) <= MAX_RULES:
        return
    per_file = Counter(rule.location.file for rule in rules)
    biggest, held = per_file.most_common(1)[0]
    mine = [rule for rule in rules if rule.location.file == biggest]
    first_too_many = mine[max(0, MAX_RULES - (len(rules) - held))]
    sink.error(first_too_many.location, "E209", f"the rule set holds {len(rules):,} rules, {held:,} of them in this "
               f"file; a rule set holds at most {MAX_RULES:,} (every answer tries each one), and from this rule on "
               "they are too many", root=True)


def _field_chars(name: str, spec: str, namespace) -> int:
    """The most characters a field renders to (lang/templates.field_text keeps to it)."""
    kind = namespace.types.get(name)
    values = kind[1] if isinstance(kind, tuple) and kind[0] == "enum" else None
    base = {NUMBER: MAX_NUMBER_CHARS, BOOL: len("False")}.get(base_type(kind) if kind else None)
    if base is None:
        base = max(map(len, values)) if values else MAX_FIELD_CHARS
    return max(base, spec_width(spec))


def sentence_chars(template: str, namespace) -> int:
    """The most characters a template renders to: its text, each field at its longest, cut at a sentence."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError:
        return min(len(template), MAX_SENTENCE_CHARS)
    total = sum(len(text) + (_field_chars(name, spec or "", namespace) if name is not None else 0)
                for text, name, spec, _ in parts)
    return min(total, MAX_SENTENCE_CHARS)


def _rule_chars(rule, namespace) -> int:
    """What one rule can put into an answer and its decision: id, heuristics, conditions, sentences, conclusions."""
    source = rule.source
    total = len(rule.id) + sum(map(len, source.heuristics)) + sum(len(c.text) for c in source.when)
    total += sentence_chars(source.because, namespace)
    if source.then.warn:
        total += len(source.then.warn[0]) + sentence_chars(source.then.warn[1], namespace)
    return total + sum(len(name) + len(str(value)) for name, value in source.then.conclude)


def check_answer_text(rules, policies: dict, namespace, sink: DiagnosticSink) -> None:
    """E210 when the rules and facts.yaml can put more than MAX_ANSWER_CHARS characters into one answer, at the
    rule (or fact) with the largest share."""
    shares = [(_rule_chars(rule, namespace), rule.location, rule.id) for rule in rules]
    shares += [(len(policy.ask) + max((len(d.why) for d in policy.defaults), default=0), policy.location, None)
               for policy in policies.values()]
    total = sum(chars for chars, _, _ in shares)
    if total <= MAX_ANSWER_CHARS:
        return
    chars, where, rule_id = max(shares, key=lambda share: share[0])
    sink.error(where, "E210", f"the rules and facts.yaml can put {total:,} characters into one answer (counted as if "
               f"every rule fired, each sentence at its longest); an answer holds at most {MAX_ANSWER_CHARS:,}: "
               f"the largest share is this {'rule' if rule_id else 'fact'}'s ({chars:,})", rule=rule_id)
