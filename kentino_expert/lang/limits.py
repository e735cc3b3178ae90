"""The bounds on what a rule set can make an answer cost, in one place (docs/rule-language.md names them)."""
from __future__ import annotations

# They are mechanism limits, the same whatever the policy says: each is several times what the bundled rules use
# (measured when they were set, in the comments), so a product manager meets one only by mistake or on purpose.
# `rules check` refuses a rule set beyond them at the place that passes one (E038-E040, E107, E108, E209, E210),
# and rendering keeps to them at run time (lang/templates.py). docs/threat-model.md names them too.

# A rule id, warning code or heuristic id, and every key of a rule file (a conclusion, parameter or fact name):
# they name rules in traces, logs and rule pages (bundled: 53 at most). E038.
MAX_ID_CHARS = 100
# A literal: a quoted text of a condition or a recommend expression, a conclusion's or a default's text value
# (bundled: 20 at most). A fact's text holds at most as much, so a longer literal could never equal one. E039.
MAX_LITERAL_CHARS = 200
# Any other text written in a rule file (a condition as a whole, a description): the engine's limits keep a
# condition to a few thousand characters (bundled: 565 at most); a 5 MB text is refused before it is read. E040.
MAX_TEXT_CHARS = 20_000
# The `{name}` fields of one template (bundled: 11 at most). E107.
MAX_TEMPLATE_FIELDS = 24
# A field's width or precision (`{x:>40}`, `{x:.40f}`): `{x:>99999999}` wrote 100 MB. E106.
MAX_TEMPLATE_WIDTH = 40
# One field as rendered: a text longer than the longest a fact may hold is cut with an ellipsis; a number longer
# than a width is written in its short form (1.8e+308, not 309 digits).
MAX_FIELD_CHARS = 200
MAX_NUMBER_CHARS = MAX_TEMPLATE_WIDTH
# One sentence: a template (`because`, a warning, `says`) as written (E108) and as rendered, where longer is cut
# with an ellipsis; a question (`ask`) or a default's reason (`why`) as written (bundled: 565 written, 413
# rendered over the `rules diff` grid).
MAX_SENTENCE_CHARS = 2_000
# Rules in a rule set: every answer tries each one (bundled: 78; 10,000 took 0.3 s per answer). E209.
MAX_RULES = 1_000
# The characters the rules and facts.yaml can put into one answer and its decision, counted as if every rule
# fired at its longest: ids, conditions (why not), sentences, conclusions, questions and assumptions (bundled:
# about 47,000; an answer is 14-24 KB). Each alternative adds one sentence. E210.
MAX_ANSWER_CHARS = 256_000

ELLIPSIS = "\u2026"


def cut(text: str, limit: int) -> str:
    """`text`, or its first `limit - 1` characters and an ellipsis when it is longer than `limit`."""
    return text if len(text) <= limit else text[:limit - 1] + ELLIPSIS

# What each bound bounds and what happens past it: the table of the bounds in docs/rule-language.md and
# docs/threat-model.md is generated from this (authoring/reference_tables.py), with each value as set above.
DOCUMENTED = (
    ("MAX_ID_CHARS", "characters of a rule id, warning code or heuristic id, and of a key of a rule file (a "
                     "conclusion, parameter or fact name)", "`E038`"),
    ("MAX_LITERAL_CHARS", "characters of a literal: a quoted text of a condition or recommend expression, a "
                          "conclusion's or a default's text value", "`E039`"),
    ("MAX_TEXT_CHARS", "characters of any other text of a rule file (a condition as a whole, a description)",
     "`E040`; nothing else of the file is read"),
    ("MAX_TEMPLATE_FIELDS", "fields of one template (`because`, a warning, `says`)", "`E107`"),
    ("MAX_TEMPLATE_WIDTH", "a field's width or precision (`{x:>40}`, `{x:.40f}`)", "`E106`"),
    ("MAX_SENTENCE_CHARS", "characters of a sentence: a template, a question (`ask`) or a reason (`why`) as "
                           "written; a template as rendered", "`E108`; rendered, cut with an ellipsis"),
    ("MAX_FIELD_CHARS", "characters of a field as rendered", "cut with an ellipsis"),
    ("MAX_NUMBER_CHARS", "characters of a number as rendered", "written in its short form (`1.8e+308`)"),
    ("MAX_RULES", "rules of a rule set (every answer tries each)", "`E209`, in the file holding the most rules"),
    ("MAX_ANSWER_CHARS", "characters the rules and facts.yaml can put into one answer and its decision, counted "
                         "as if every rule fired, each sentence at its longest", "`E210`, at the largest share"),
)
