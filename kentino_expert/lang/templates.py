"""Templates of rule files (`because`, `warn.message`): `{name:spec}` fields filled from the state, and checked.

Rendering never fails: an unknown value prints as '?', a spec a value cannot take falls back to the bare
value. Checking (`rules check`, E106) refuses what would make that fallback silent, E107 more fields than
MAX_TEMPLATE_FIELDS and E108 a template longer than a sentence. Rendering keeps to limits.py: a field and a
sentence longer than their bounds are cut with an ellipsis.
"""
from __future__ import annotations

import functools
import math
import re
import string

from ..errors import did_you_mean
from . import limits
from .limits import cut
from .semantics import MISSING
from .valuetypes import BOOL, NUMBER, TEXT, base_type


class _Formatter(string.Formatter):
    def __init__(self, env):
        super().__init__()
        self.env = env

    def get_value(self, key, args, kwargs):
        return self.env.get(key, MISSING)

    def format_field(self, value, format_spec):
        return "?" if value is MISSING else field_text(value, format_spec)


def field_text(value, spec: str) -> str:
    """One field as rendered: the value in its spec (the bare value when the spec does not suit it), a number
    longer than MAX_NUMBER_CHARS in its short form, any text cut at MAX_FIELD_CHARS (lang/limits.py)."""
    try:
        text = format(value, spec)
    except (ValueError, TypeError):
        text = str(value)
    if len(text) > limits.MAX_NUMBER_CHARS and isinstance(value, (int, float)) and not isinstance(value, bool):
        text = _short_number(value, spec.endswith("%"), text)
    return cut(text, limits.MAX_FIELD_CHARS)


def _short_number(value, percent: bool, text: str) -> str:
    """A number too long in its spec, in six significant digits (as a percentage when the spec is one)."""
    try:
        short = float(value) * (100 if percent else 1)
    except OverflowError:  # an integer beyond a double
        short = math.inf
    if not math.isfinite(short):
        return cut(text, limits.MAX_NUMBER_CHARS)
    return format(short, ".6g") + ("%" if percent else "")


def template_names(template: str) -> set[str]:
    """The names a template's fields read (none for a template that does not parse)."""
    try:
        return {field for _, field, _, _ in string.Formatter().parse(template) if field}
    except ValueError:
        return set()


def render_template(template: str, env: dict) -> str:
    """Fill `{name:spec}` fields from env; unknown values print as '?'."""
    return render_layers(template, (env,))


def render_layers(template: str, layers: tuple) -> str:
    """`render_template` with the values looked up in `layers`, the first that has a name winning (no merged copy);
    a sentence longer than MAX_SENTENCE_CHARS is cut with an ellipsis."""
    return cut(_rendered(template, layers), limits.MAX_SENTENCE_CHARS)


def _rendered(template: str, layers: tuple) -> str:
    parts = _compiled(template)
    if parts is None:
        env = {}
        for layer in reversed(layers):
            env.update(layer)
        try:
            return _Formatter(env).format(template)
        except (ValueError, IndexError, KeyError, AttributeError, TypeError):
            return template
    out = []
    for literal, name, spec in parts:
        out.append(literal)
        if name is not None:
            value = MISSING
            for layer in layers:
                if name in layer:
                    value = layer[name]
                    break
            out.append("?" if value is MISSING else field_text(value, spec))
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def _compiled(template: str):
    """(literal, name, spec) parts of a template of plain `{name:spec}` fields, else None.

    Templates are few and rendered on every firing: parsing each once took a third of a request.
    Anything unusual (a conversion, an index, a nested spec) goes to the general formatter.
    """
    parts = []
    try:
        for literal, name, spec, conversion in string.Formatter().parse(template):
            if name is not None and (conversion or not name.isidentifier() or "{" in (spec or "")):
                return None
            parts.append((literal, name, spec or ""))
    except ValueError:
        return None
    return tuple(parts)


_SPEC = re.compile(r"^(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?z?#?0?(?P<width>[0-9]+)?[,_]?"
                   r"(?:\.(?P<precision>[0-9]+))?(?P<type>[bcdeEfFgGnosxX%])?$", re.DOTALL)
_SAMPLES = {NUMBER: (1234.5, 12), TEXT: ("text",), BOOL: (True,)}


def spec_width(spec: str) -> int:
    """The width a format spec pads to (0: none, or not a spec)."""
    match = _SPEC.match(spec)
    return int(match.group("width")) if match and match.group("width") else 0


def check_template(template: str, where, namespace, sink, rule_id, what: str):
    """E106 for an unknown name, a conversion, a nested field, or a format spec the name's values
    cannot take (at run time a failing spec falls back to the bare value, silently); E107 for more fields than
    MAX_TEMPLATE_FIELDS, E108 for a template longer than a sentence. `namespace` has `types` (name -> type) and
    `names()`; `sink.error(where, code, message, ...)` takes the problems."""
    if len(template) > limits.MAX_SENTENCE_CHARS:
        sink.error(where, "E108", f"{what}: {len(template):,} characters; a sentence is at most "
                   f"{limits.MAX_SENTENCE_CHARS:,}", rule=rule_id)
        return
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        sink.error(where, "E106", f"{what}: {exc}", rule=rule_id)
        return
    fields = sum(1 for _, name, _, _ in parts if name is not None)
    if fields > limits.MAX_TEMPLATE_FIELDS:
        sink.error(where, "E107", f"{what}: {fields:,} fields; a template has at most "
                   f"{limits.MAX_TEMPLATE_FIELDS} (each is rendered in every answer the rule is in)", rule=rule_id)
        return
    for _, field_name, spec, conversion in parts:
        if field_name is None:
            continue
        problem, suggestion = _field_problem(field_name, spec, conversion, namespace)
        if problem:
            sink.error(where, "E106", f"{what}: {problem}", rule=rule_id, suggestion=suggestion)


def _field_problem(name, spec, conversion, namespace):
    """(why the field `{name!conversion:spec}` is wrong, a suggestion), or (None, None)."""
    if not name.isidentifier():
        return f"'{{{name}}}' must be a plain name", None
    if conversion:
        return f"'{{{name}!{conversion}}}': a conversion (!{conversion}) is not allowed; write '{{{name}}}'", None
    if name not in namespace.types:
        return f"unknown name '{name}'", did_you_mean(name, namespace.names())
    if spec and "{" in spec:
        return "nested fields are not allowed", None
    return (_spec_problem(name, spec, namespace.types[name]) if spec else None), None


def _spec_problem(name, spec, kind) -> str | None:
    match = _SPEC.match(spec)
    if not match:
        return f"'{{{name}:{spec}}}': '{spec}' is not a format spec"
    for part in ("width", "precision"):
        if match.group(part) and int(match.group(part)) > limits.MAX_TEMPLATE_WIDTH:
            return f"'{{{name}:{spec}}}': the {part} is at most {limits.MAX_TEMPLATE_WIDTH}"
    kind = base_type(kind)
    samples = _SAMPLES.get(kind, (1234.5, 12, "text", True))  # "mixed": any of them
    for sample in samples:
        try:
            format(sample, spec)
            return None
        except (ValueError, TypeError):
            continue
    return f"'{{{name}:{spec}}}': '{spec}' does not format {'a text' if kind == TEXT else 'this value'}"
