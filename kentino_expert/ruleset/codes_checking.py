"""The codes of checking rules (E1xx names and types, E2xx what the engine can run, W3xx warnings)."""
from __future__ import annotations

from ..lang.limits import (
    MAX_ANSWER_CHARS,
    MAX_FIELD_CHARS,
    MAX_NUMBER_CHARS,
    MAX_RULES,
    MAX_SENTENCE_CHARS,
    MAX_TEMPLATE_FIELDS,
)
from .diagnostic_code import DiagnosticCode as Code


def _rule(when: str, then: str = "conclude: {big_model: true}", extra: str = "", rule_id: str = "big-model",
          because: str = "The model is past the single-node cliff.") -> str:
    """One rule of a `rules:` list, with a one-line `when` (quoted when it needs to be)."""
    return (f"  - id: {rule_id}\n    heuristics: [H-CLIFF-405B]\n{extra}    when: {when}\n    then:\n"
            f"      {then}\n    because: {because}\n")


def _folded(expression: str, width: int = 88) -> str:
    """A long condition as a folded block (`>-`): its lines join with spaces into the one expression."""
    lines, line = [], ""
    for word in expression.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return ">-\n" + "\n".join(f"      {text}" for text in lines + [line])


def _any_of(terms) -> str:
    return " or ".join(terms)


EXPRESSIONS = (
    Code("E101", "error", "an expression does not parse",
         "A condition (or a recommend expression, or a default's `when`) is not a well-formed expression of "
         "the rule language: a missing operand, an unclosed parenthesis, a stray character, a list outside "
         "`in`, or nesting past the limit. The column points at the first character that does not fit.",
         "rules:\n" + _rule("params_b >="),
         "Complete the expression; docs/rule-language.md lists the operators and functions.", ),
    Code("E102", "error", "a name is not a fact, figure, conclusion or parameter",
         "An expression, or a fact's `answered_by`, names something nothing defines. The message offers "
         "the closest known name. Names are the input facts, the figures the sizing computes, the "
         "conclusions of rules and the parameters of parameters.yaml.",
         "rules:\n" + _rule("param_b >= cliff_params_b"),
         "Use the suggested name, or define it (a parameter in parameters.yaml, a conclusion in a rule).", ),
    Code("E103", "error", "types do not match (a number compared with a word, an unknown enum value, ...)",
         "Both sides of a comparison must be of one type, arithmetic takes numbers, a word compared with "
         "a fact of listed values must be one of them (for a catalog fact, the catalog id rather than an "
         "alias), and a condition must be true or false.",
         "rules:\n" + _rule("task == 'inferense'"),
         "Compare like with like; use the values the message lists.", ),
    Code("E104", "error", "a heuristic id is not in knowledge/heuristics.yaml",
         "Each rule cites the heuristics of the source document it encodes, by their ids in "
         "knowledge/heuristics.yaml; an id that is not there is a misspelling or a heuristic not yet "
         "recorded.",
         "rules:\n" + _rule("params_b >= cliff_params_b").replace("H-CLIFF-405B", "H-CLIF-405B"),
         "Use the suggested id, or add the heuristic (with its source) to knowledge/heuristics.yaml.", ),
    Code("E105", "error", "a rule id, or a warning code, is used twice",
         "Rule ids identify rules in traces and logs, so each is used once. A warning code is given at "
         "most once per answer: a second rule warning with the same code would be silenced by the first.",
         "rules:\n" + _rule("params_b >= cliff_params_b") + _rule("params_b >= 671", "conclude: {huge_model: true}"),
         "Rename one of the two; for warnings, give each its own code or merge the two rules.", ),
    Code("E106", "error", "a template names an unknown value or has a bad format",
         "`because` and `warn.message` are templates: `{name}` or `{name:.0f}` show a fact, figure, "
         "conclusion or parameter. The name must exist and the format must suit its values "
         "(`:.0%` on a number, none on a word).",
         "rules:\n" + _rule("params_b >= cliff_params_b", because="\"The model has {param_b:g}B parameters.\""),
         "Use a known name (the message suggests one) and a format its values take.", ),
    Code("E107", "error", f"a template has more than {MAX_TEMPLATE_FIELDS} fields",
         f"A `because`, warning or `says` template shows at most {MAX_TEMPLATE_FIELDS} values "
         "(kentino_expert/lang/limits.py): each field is rendered in every answer the rule is in, and a "
         f"template of 100,000 fields made every answer 4 MB. At run time a field renders at most "
         f"{MAX_FIELD_CHARS} characters and a sentence at most {MAX_SENTENCE_CHARS:,} (longer is cut with an "
         "ellipsis).",
         "rules:\n" + _rule("params_b >= cliff_params_b", because='"\u2026"'),
         "Show the few figures that explain the rule; the answer lists every figure anyway.",
         repeat="{params_b:g} ", times=MAX_TEMPLATE_FIELDS + 1),
    Code("E108", "error", f"a sentence is longer than {MAX_SENTENCE_CHARS:,} characters as written",
         f"A `because`, warning or `says` template, a fact's question (`ask`) and a default's reason (`why`) "
         f"is one sentence of an answer, at most {MAX_SENTENCE_CHARS:,} characters as written "
         "(kentino_expert/lang/limits.py). Rendered, a template is cut with an ellipsis at that length "
         "(its fields can make it longer than it is written).",
         "rules:\n" + _rule("params_b >= cliff_params_b",
                            because="The model is past the single-node cliff.\u2026"),
         "Say why in a sentence or two, with the figures that decide it; the rule's `description` and its "
         "heuristics hold the background.", repeat=" Far past it.", times=160),
)

ENGINE = (
    Code("E201", "error", "a rule shape the engine cannot run safely",
         "durable-rules, the engine, compares a fact with a value: arithmetic on the left of a comparison, "
         "a divisor it cannot test against zero, an `in` list of over 64 items, a constant beyond a "
         "double or a name over 200 characters cannot be given to it.",
         "rules:\n" + _rule("\"qps + 1 > 3\""),
         "Move the arithmetic to the right-hand side (`qps > 2`); divide by a name, a number, a product of "
         "those, or `name + ...` / `name - ...`, which the engine can guard against zero.", ),
    Code("E202", "error", "too many conditions under one node of the engine's network (a long `or`; "
         "durable-rules hangs at 512)",
         "An `or` of over 64 alternatives, over 256 conditions under one node of the engine's network "
         "(durable-rules loops forever at 512), over 127 `not exists` terms and `or` continuations under "
         "one node (it crashes at 128), or over 255 rules ending at one condition.",
         "rules:\n" + _rule(_folded(_any_of(f"params_b == {n}" for n in range(1, 66)))),
         "Use a range (`params_b >= 1 and params_b <= 65`) or split the rule.", ),
    Code("E203", "error", "one fact can leave more than 64 matching conditions pending (durable-rules error 303 "
         "on every request)",
         "durable-rules walks the conditions one fact matches on a stack of 64 entries; `or`s whose terms "
         "can hold together leave one entry each, and past 64 every request fails with error 303.",
         "rules:\n" + _rule(_folded(f"({_any_of(f'params_b > -{n}' for n in range(1, 34))}) and "
                                    f"({_any_of(f'concurrency > -{n}' for n in range(1, 34))})")),
         "Write terms that exclude one another (ranges that do not overlap), or fewer of them.", ),
    Code("E204", "error", "chained or nested `or`s make one fact walk too many conditions (every matching "
         "branch walks the rest again)",
         "Every matching branch of an `or` walks the rest of the rule again, so `or`s joined by `and` "
         "multiply: seven groups of three always-true alternatives walk 3^7 paths on every request.",
         "rules:\n" + _rule(_folded(" and ".join(["(params_b > -1 or params_b > -2 or params_b > -3)"] * 7))),
         "Write each `or` so that at most one of its terms holds, or split the rule.", ),
    Code("E205", "error", "a rule compiles to more than 15 and/or groups (durable-rules refuses it, error 113)",
         "Each `or`, each `in` list and each negated comparison is one and/or group of the rule's pattern; "
         "durable-rules refuses a rule with more than 15.",
         "rules:\n" + _rule(_folded(" and ".join(f"(concurrency == {n} or concurrency == {n + 100})"
                                                for n in range(15)))),
         "Split the rule, or use ranges in place of alternatives.", ),
    Code("E206", "error", "arithmetic that can overflow: a value not provably finite over the ranges of its names",
         "Every product, sum and quotient of a condition or a recommend value must stay finite over the "
         "ranges of the names it reads (the facts' bounds, the figures' declared ranges, the values rules "
         "conclude); the message names the operation that can overflow. A divisor that can be tiny counts "
         "as one that can make any size.",
         "rules:\n" + _rule("params_b > concurrency * context_tokens * 1e300"),
         "Scale the numbers (`params_b > concurrency * context_tokens * 1e-6`), or bound what is divided "
         "by.", ),
    Code("E207", "error", "the rule set fails in a sandbox: building it or answering an example hangs, crashes "
         "or fails",
         "When the files are clean, `rules check` builds the rule set on the engine in a child process and "
         "answers every rule's `example` there, under a time and memory limit (KENTINO_SANDBOX_SECONDS, "
         "KENTINO_SANDBOX_MEMORY_MB). A hang past the limit, a crash, running out of memory, or an answer "
         "that fails (a recommendation no answer can hold) is E207; so is a check that fails in a way "
         "nothing else names.",
         "# any rule set, with a time limit the trial cannot meet (it cannot even start in it)\nrules: []\n",
         "The message says what failed and while doing what, and names the rule when it was answering "
         "its example: simplify or split that rule, or, when the rule set is merely large, raise the "
         "limit.", trial=True, environment="KENTINO_SANDBOX_SECONDS=0.05"),
    Code("E208", "error", "a division by the constant 0",
         "The rule language makes `x / 0` unknown, on purpose: a divisor that is 0 for some facts leaves "
         "only that comparison false (its negation true), or that recommend field out of that plan. A "
         "divisor that is 0 for every fact, written as `0`, as constant arithmetic such as `(1 - 1)` or "
         "as parameters that come to 0, makes the condition false on every answer (or true, negated) and "
         "the field absent from every plan, silently: always a mistake. The column is the `/`.",
         "rules:\n" + _rule("\"params_b > params_b / 0\""),
         "Divide by what was meant (a figure, a parameter that is not 0), or remove the division.", ),
    Code("E209", "error", f"the rule set holds more than {MAX_RULES:,} rules",
         f"A rule set holds at most {MAX_RULES:,} rules (kentino_expert/lang/limits.py): every answer tries "
         "each one, so answering slows with their number (10,000 rules took 0.3 s an answer and timed out "
         "the sandbox). The error stands in the file holding the most rules, at its first rule past the "
         "bound when the other files' rules are counted first.",
         "rules:\n\u2026\n",
         "Merge rules that say the same for neighbouring values (a condition can compare with a parameter or "
         "use `in`), or split the policy: generated rules belong in a table of knowledge/, not in rules.",
         repeat="  - {id: rule-{n}, heuristics: [H-CLIFF-405B], when: params_b >= {n}, "
                "then: {conclude: {big_{n}: true}}, because: Big.}\n", times=MAX_RULES, root=True),
    Code("E210", "error", f"the rules can put more than {MAX_ANSWER_CHARS:,} characters into one answer",
         "The text the rules and facts.yaml can put into one answer and its decision is bounded "
         f"({MAX_ANSWER_CHARS:,} characters, kentino_expert/lang/limits.py): every rule's id, heuristics, "
         "conditions (an answer says why a kind was not chosen with them), conclusions and sentences, each "
         f"sentence at its longest (its text and each field at its longest: a number {MAX_NUMBER_CHARS} "
         f"characters or its width, a word of a list its longest value, any other text {MAX_FIELD_CHARS}), "
         "and every fact's question and longest default reason, counted as if every rule fired. The error "
         "stands at the rule with the largest share.",
         "rules:\n\u2026\n",
         "Shorten the sentences of the rule the message names and of its neighbours, show fewer text fields "
         "(`{model}` counts as 200 characters), or merge rules.",
         repeat="  - {id: long-{n}, heuristics: [H-CLIFF-405B], when: params_b >= {n}, then: {warn: {code: "
                "long-{n}, message: '" + "{model} " * 12 + "'}}, because: '" + "{model} " * 12 + "'}\n",
         times=100),
)

WARNINGS = (
    Code("W301", "warning", "a rule can never fire (contradictory conditions or a field no rule recommends)",
         "No value meets all of the rule's conditions on one name, or the rule reads a recommendation "
         "field no rule recommends: the rule is dead.",
         "rules:\n" + _rule("[params_b > 100, params_b < 50]"),
         "Correct the condition in error, or delete the rule.", ),
    Code("W302", "warning", "a rule is shadowed by a higher-priority rule that always pre-empts it",
         "Whenever this rule could fire, an earlier rule fires first and writes what this one would write "
         "(a conclusion is written once; an answer has one recommendation), so this rule never fires.",
         "rules:\n" + _rule("params_b > 10", extra="    priority: 1\n", rule_id="large-model")
         + _rule("params_b > 100", extra="    priority: 2\n"),
         "Give the narrower rule the smaller priority, or make the two exclude each other.", ),
    Code("W303", "warning", "a parameter no rule uses",
         "A parameter of parameters.yaml that no condition, recommend expression or template reads "
         "changes nothing: a leftover or a misspelt reference.",
         "parameters:\n  spare_threshold:\n    value: 0.5\n    unit: fraction\n",
         "Use it in the rule it was meant for, or delete it.", file="rules/parameters.yaml"),
    Code("W304", "warning", "a heuristic of the catalog that no rule encodes",
         "Every heuristic of knowledge/heuristics.yaml should be encoded by at least one rule (cited in "
         "its `heuristics`); one that is not is advice the expert never gives.",
         "heuristics:\n- id: H-NEW-ADVICE\n  section: Capacity and fit\n  text: Advice no rule encodes yet.\n",
         "Cite it from the rule that encodes it, or write that rule.", file="knowledge/heuristics.yaml"),
    Code("W305", "warning", "a rule reads a conclusion that only lower-priority rules produce",
         "Rules are tried in priority order: a rule reading a conclusion that only later rules conclude is "
         "tried before the conclusion can exist (it may still fire later, when chaining comes back to it, "
         "but the order says otherwise).",
         "rules:\n" + _rule("big_model", "conclude: {needs_many_nodes: true}", "    priority: 1\n", "reads-early")
         + _rule("params_b >= cliff_params_b", extra="    priority: 2000\n"),
         "Give the rule that concludes the smaller priority.", ),
    Code("W306", "warning", "a rule does not fire on its own example (found by answering it in the sandbox)",
         "The rule's `example` is answered in the sandbox and the rule did not fire on it: a threshold "
         "moved and left the example behind, or the example never matched. Not said again for a rule "
         "that W301 or W302 already says cannot fire.",
         "rules:\n" + _rule("params_b >= cliff_params_b")
         + "    example: {task: inference, model: llama-3.1-8b}\n",
         "Change the example so that it meets the rule's conditions (here a model of 405B or more), or "
         "correct the condition.", trial=True),
    Code("W307", "warning", "a rule file holds no rules (empty, or only comments)",
         "Every `*.yaml` of the rule directory other than parameters.yaml, facts.yaml and selection.yaml "
         "is read for rules. An empty one adds nothing, which is seldom meant: the rules were cut from it "
         "(the errors then name the names they concluded, in other files), or it was saved before its "
         "rules were written.",
         "# the L4 rules go here\n",
         "Write the file's rules (`rules:` and a list), or delete the file."),
    Code("W308", "warning", "a file or subdirectory of the rule directory looks like rules but is not read",
         "Only the files named `*.yaml` directly in the rule directory are read. A rule file saved as "
         "`.yml` (or `.YAML`), or put in a subdirectory, is left out without a word otherwise: its rules "
         "never fire and `rules check` checks none of them.",
         "rules:\n  - id: l4-note\n    heuristics: [H-FIT-CAPACITY]\n    when: gpu == 'l4'\n    then:\n"
         "      warn: {code: l4-note, message: An L4 node.}\n    because: The card is an L4.\n",
         "Rename the file to end in `.yaml`, or move it up into the rule directory; delete it if it is not "
         "meant to be read.", file="rules/example.yml"),
    Code("W309", "warning", "a parameter has the name of a fact, a figure or another name of the state",
         "A rule that names a parameter reads its value: parameters are folded into the conditions and "
         "recommend expressions. A parameter named like a fact (or a figure) therefore takes that name's "
         "place in the rules only, while the sizing, the defaults and the answer still read the fact: the "
         "rules decide on one number and the answer shows another, and nothing says so.",
         "parameters:\n  gpus_per_node:\n    value: 4\n    unit: GPUs\n    description: Our standard node.\n",
         "Give the parameter a name of its own (`standard_gpus_per_node`) and compare the fact with it in the "
         "rules that meant to.", file="rules/parameters.yaml"),
    Code("W310", "warning", "a card Kentino ships is missing from selection.yaml's card preference",
         "The build search sizes every card of knowledge/gpus.yaml with `kentino_ships: true`, and ranks them "
         "by `cards` in rules/selection.yaml. A shipped card that `cards` does not list is ranked after every "
         "card listed, whatever it is: most often it was just added to the catalog and not yet to the policy.",
         "selection:\n  order: [buildable, card-preference]\n  kinds: [single-node, dp-replicas, multi-node-ib, "
         "frontier]\n  cards: [rtx-pro-6000, l40, rtx-5090]\n",
         "Add the card to `cards` where it ranks (docs/knowledge.md says what a new card needs).",
         file="rules/selection.yaml"),
)

CHECKING_CODES = EXPRESSIONS + ENGINE + WARNINGS
