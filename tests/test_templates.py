"""Rule templates (`because`, `warn.message`): the fast path renders exactly as the general formatter."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kentino_expert.lang.templates import _Formatter
from kentino_expert.lang.templates import render_template as render

ENV = {"a": 1.2345, "b": "x", "n": 1312.14, "p": 0.31, "none": None, "i": 7}
PIECES = ["{a}", "{a:.0%}", "{n:,.0f}", "{b}", "{b:>5}", "{missing}", "{none}", "{a:g}", "{{", "}}", "{", "}",
          "{a!r}", "{0}", "{}", "{b:d}", "text ", "{a:{n}}", "{x.y}", "{a[0]}", "{i:d}", "{i:.1f}", "{none:.2f}"]


def general(template: str, env: dict) -> str:
    try:
        return _Formatter(env).format(template)
    except (ValueError, IndexError, KeyError, AttributeError, TypeError):
        return template


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=6))
def test_compiled_templates_match_the_general_formatter(pieces):
    """Any mix of fields, specs, escapes and malformed braces renders as string.Formatter would."""
    template = "".join(pieces)
    assert render(template, ENV) == general(template, ENV)


def test_examples():
    """Known values format with their spec; unknown ones print as '?'; a bad spec falls back to str()."""
    assert render("{p:.0%} of {n:,.0f} GB", ENV) == "31% of 1,312 GB"
    assert render("{missing} and {b:d}", ENV) == "? and x"
    assert render("{none}", ENV) == "None"
