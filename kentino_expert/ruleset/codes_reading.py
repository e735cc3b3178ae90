"""The codes of reading rule files (E0xx): a file that cannot be read, keys, and values of the wrong form."""
from __future__ import annotations

from ..domain.vocabulary import KINDS, PRECISIONS
from ..lang.limits import MAX_ID_CHARS, MAX_LITERAL_CHARS, MAX_TEXT_CHARS
from .diagnostic_code import DiagnosticCode as Code

_RULE = "rules:\n  - id: big-model\n    heuristics: [H-CLIFF-405B]\n"
_THEN = "    when: params_b >= cliff_params_b\n    then:\n"
_BECAUSE = "    because: The model is past the single-node cliff.\n"


def _rule(middle: str, then: str = "      conclude: {big_model: true}\n", tail: str = _BECAUSE) -> str:
    """A rule file of one rule: `middle` after its heuristics, `then` as its effects."""
    return _RULE + middle + _THEN + then + tail


FILES = (
    Code("E001", "error", "a file cannot be read: a tab, an indentation slip or other invalid YAML, not UTF-8, "
         "or missing",
         "The file could not be read, so nothing in it could be checked. Most often the YAML is broken: a "
         "tab in the indentation (YAML indents with spaces only), a line indented one space more or "
         "less than the lines it belongs with, a list item (`- `) among the keys of a mapping or a key among "
         "list items, a list item indented deeper than the one above it (YAML reads it as the rest of that "
         "item's text), a quote left open or closed early by a quote inside it, a bracket left open or closed "
         "by the other kind, or a `: ` inside an unquoted value. The message says which, at the line to fix, "
         "and names the lines it is measured against. The same code is given for a file that is not UTF-8, a "
         "merge key (`<<`), "
         "a duplicate key, a document past the size limits, a missing `parameters.yaml` or `facts.yaml`, "
         "a rule directory that does not exist, and a knowledge file that cannot be loaded.",
         _RULE + "     when: params_b >= cliff_params_b\n    then:\n      conclude: {big_model: true}\n" + _BECAUSE,
         "Indent with spaces, two per level; the keys of one mapping start in the same column. Fix the "
         "line the message names, then run `rules check` again: the other checks run once every file "
         "reads.", root=True),
    Code("E002", "error", "a key is unknown or misplaced",
         "A mapping holds a key the reader does not know there: a misspelling (`prority`), or a key of "
         "another place (`recommend` directly under the rule instead of under `then`). An unknown key "
         "would otherwise be silently ignored. The message offers the closest known key.",
         _rule("    prority: 500\n"),
         "Spell the key as the message suggests, or move it where it belongs (the keys of each part are "
         "listed in docs/rule-language.md).", schema=True),
    Code("E004", "error", "a required key is missing",
         "A rule needs `id`, `heuristics` (at least one), `when`, `then` and `because`; `recommend` needs "
         "`kind`; `warn` needs `code` and `message`; each fact of `facts.yaml` needs `description` and "
         "`ask`; `parameters.yaml`, `facts.yaml` and every other rule file need their top-level "
         "`parameters:`, `facts:` or `rules:`. A file without its top-level key is a root cause: the "
         "checks across files wait until it reads.",
         _RULE + _THEN + "      conclude: {big_model: true}\n",
         "Add the missing key; `because` says, in words and with the figures, why the rule fires.",
         schema=True),
)

RULE_SHAPE = (
    Code("E010", "error", "a rule is not a mapping",
         "Each item of a `rules:` list is one rule: a mapping with `id`, `heuristics`, `when`, `then` and "
         "`because`. A plain word or a list there is not a rule.",
         "rules:\n  - big-model\n",
         "Write the rule as a mapping under its `- ` (`- id: big-model` followed by its other keys, "
         "lined up under `id`).", schema=True),
    Code("E011", "error", "a rule id is not kebab-case",
         "A rule id is lower-case words joined by hyphens (`fits-one-node-at-fp8`): it names the rule in "
         "traces, in the decision log and in the rule's page, and stays the same across edits.",
         _rule("").replace("id: big-model", "id: Big_Model"),
         "Rename the rule in kebab-case: lower-case letters and digits, words joined by `-`.", schema=True),
    Code("E012", "error", "a priority is not a number from -1,000,000 to 1,000,000",
         "`priority` orders the rules (the smaller is tried first). It must be a finite number within "
         "±1,000,000: NaN sorts nowhere, and a huge number breaks every conversion after it.",
         _rule("    priority: first\n"),
         "Give a number such as 500; leave gaps (100, 110, ...) so that a rule can be put in between.",
         schema=True),
    Code("E013", "error", "a text field is not text",
         "`description`, `because`, `warn.code`, `warn.message`, and a fact's `description` and `ask` are "
         "text. A number or a list there is a slip (`because: 42`), often a value meant for another key.",
         _rule("", tail="    because: 42\n"),
         "Write the text; quote it when it starts with a character YAML reads otherwise ({, [, ', \", *, &, "
         "!, %, @, `) or holds `: `.", schema=True),
    Code("E014", "error", "a list of ids is not a list of words",
         "`heuristics`, and a fact's `tasks` and `answered_by`, are lists of ids (one id alone is also "
         "taken). A number or a mapping in the list is not an id.",
         _rule("").replace("[H-CLIFF-405B]", "[H-CLIFF-405B, 405]"),
         "List the ids in brackets, separated by commas: `heuristics: [H-CLIFF-405B, H-MS-405B-LATENCY]`.",
         schema=True),
    Code("E015", "error", "a condition is not text",
         "Each entry of `when` (and the `when` of a fact's default) is an expression of the rule language, "
         "written as text: `params_b >= cliff_params_b`. A number or a mapping there is not a condition.",
         _RULE + "    when:\n      - params_b >= cliff_params_b\n      - 405\n    then:\n"
         "      conclude: {big_model: true}\n" + _BECAUSE,
         "Write the condition as a comparison (`params_b >= 405`); quote it when it starts with a quote.",
         schema=True),
    Code("E016", "error", "`when` is an empty list",
         "A rule with no condition would fire on every request; an empty list is more likely a slip.",
         _RULE + "    when: []\n    then:\n      conclude: {big_model: true}\n" + _BECAUSE,
         "Give at least one condition; a rule meant to fire always can say `when: exists task`.",
         schema=True),
    Code("E017", "error", "`example` is not a mapping of facts",
         "A rule's `example` is a workload that fires it: a mapping of facts, as a request would give them. "
         "It is shown on the rule's page and answered in the sandbox.",
         _rule("    example: llama-3.1-405b\n"),
         "Write the facts as a mapping: `example: {task: inference, model: llama-3.1-405b}`.", schema=True),
    Code("E018", "error", "a rule's example is not a valid workload",
         "The `example` is checked as a request would be: its facts must be known, of the right type and "
         "within their bounds, and its model, GPU and fabric must be in the knowledge catalog (an alias "
         "is taken). The message names the fact at fault and the closest spelling.",
         _rule("    example: {task: inference, model: llama-3.1-4050b}\n"),
         "Correct the fact the message names (`kentino-expert schema facts` lists every fact and its "
         "allowed values).", ),
)

THEN = (
    Code("E020", "error", "`conclude` is not a mapping of names to values",
         "`then: conclude:` maps each conclusion's name to its value: `conclude: {big_model: true}`.",
         _rule("", then="      conclude: big_model\n"),
         "Write `conclude: {name: value}`; the value is true/false, a number or a word.", schema=True),
    Code("E021", "error", "a conclusion's value is not a plain value",
         "A conclusion holds one plain value: true/false, a finite number or a word. Lists, mappings, "
         "nothing (`~`) and .inf/.nan cannot be compared in a condition or shown in an answer.",
         _rule("", then="      conclude: {big_model: [405, 671]}\n"),
         "Conclude one value per name; to say more, conclude more names.", schema=True),
    Code("E022", "error", "a conclusion's name is not snake_case",
         "A conclusion is read by other rules' conditions, where a name is lower-case words joined by "
         "underscores (`fp8_weights_fit`).",
         _rule("", then="      conclude: {BigModel: true}\n"),
         "Rename the conclusion in snake_case, and the conditions that read it.", schema=True),
    Code("E023", "error", "a conclusion takes a name that already means something",
         "A conclusion may not be named like a fact, a figure, a parameter, a recommendation field, a "
         "warning key (`warned_...`) or a property the engine uses itself: concluding a recommendation "
         "field breaks every answer, a parameter makes the trace lie, a warning key hides the warning.",
         _rule("", then="      conclude: {params_b: 405}\n"),
         "Give the conclusion a name of its own (`past_the_cliff`).", ),
    Code("E024", "error", "`recommend` is not a mapping",
         "`then: recommend:` is a mapping with `kind` and, as needed, `precision`, `nodes`, `replicas`, "
         "`tp`, `pp`, `dp`, `interconnect`, `gpu` and `gpus_per_node`.",
         _rule("", then="      recommend: multi-node-ib\n"),
         "Write `recommend: {kind: multi-node-ib, precision: fp8, nodes: 2}`.", schema=True),
    Code("E025", "error", "`recommend.kind` is not a kind of recommendation",
         f"The kind of a recommendation is one of {', '.join(KINDS)} (the message lists them and offers the "
         "closest).",
         _rule("", then="      recommend: {kind: two-nodes}\n"),
         "Use one of the listed kinds; the number of nodes goes in `nodes`.", schema=True),
    Code("E026", "error", "`recommend.precision` is not a precision",
         f"A recommended precision is one of {', '.join(PRECISIONS[:-1])} or {PRECISIONS[-1]} (the message "
         "offers the closest).",
         _rule("", then="      recommend: {kind: single-node, precision: fp16}\n"),
         f"Use {', '.join(PRECISIONS[:-1])} or {PRECISIONS[-1]}.", schema=True),
    Code("E027", "error", "a recommend field is not a number it can be, or an expression",
         "`nodes`, `replicas`, `tp`, `pp`, `dp`, `gpus_per_node` (and the other recommend fields) take a "
         "finite number or an expression of the rule language. true/false, nothing, .inf and .nan are none "
         "of these: no count and no JSON answer can hold them. A count given as a constant (or an "
         "expression that is one once parameters are folded in) is a whole number of at least 1, at most "
         "the figures' bound 1e24 (16 for `gpus_per_node`, the input contract's): `nodes: -1` would "
         "print a plan of -1 nodes and `nodes: 1.5` be cut to 1.",
         _rule("", then="      recommend: {kind: multi-node-ib, nodes: true}\n"),
         "Give a number (`nodes: 2`) or an expression (`nodes: \"max(min_multi_nodes, training_nodes)\"`).",
         schema=True),
    Code("E028", "error", "a recommend expression holds a constant that is not finite once parameters are "
         "folded in",
         "Parameters are folded into a recommend expression before it runs, and constant arithmetic is "
         "computed then: a product that passes the largest double cannot be given to the engine nor "
         "turned into a count.",
         _rule("", then="      recommend: {kind: multi-node-ib, nodes: \"hyperscale_qps * 1e308 * params_b\"}\n"),
         "Keep the constants of the expression within ordinary sizes (a count of nodes is small).", ),
    Code("E029", "error", "`warn` is not a mapping with `code` and `message`",
         "`then: warn:` gives a warning in the answer: a mapping with its kebab-case `code` and its "
         "`message` (a template).",
         _rule("", then="      warn: the model is past the cliff\n"),
         "Write `warn: {code: past-the-cliff, message: \"...\"}`.", schema=True),
    Code("E030", "error", "a warning code is not kebab-case",
         "A warning code is how a chat bot or a log query recognises the warning: lower-case words joined "
         "by hyphens, the same from release to release.",
         _rule("", then="      warn: {code: Past_The_Cliff, message: The model is past the cliff.}\n"),
         "Rename the code in kebab-case (`past-the-cliff`).", schema=True),
)

POLICY = (
    Code("E031", "error", "a parameter's value is not a finite number",
         "Every parameter of `parameters.yaml` is a finite number, given alone (`name: 0.70`) or as "
         "`value:` with its unit, heuristics and description. Text, true/false or nothing is not a number "
         "(YAML 1.2 reads `1e5` and `.5` as numbers, `1_000` and `yes` as text); `.nan`, `.inf` and an "
         "integer beyond a double (over 309 digits) are no finite one. The checks of the rules fold the "
         "parameters' values in, and the sizing computes with them. A text that holds a number written "
         "with separators or as a percentage (`100,000`, `100_000`, `70%`) gets that number as the "
         "suggestion (`100000`, `0.7`).",
         "parameters:\n  max_nodes_shown:\n    value: eight\n    unit: nodes\n",
         "Write the number: `value: 8`.", file="rules/parameters.yaml", schema=True, root=True),
    Code("E032", "error", "a parameter the sizing reads is missing",
         "The sizing reads a few parameters itself (`weights_fraction_max`, `workload_fraction_max`, "
         "`training_fraction_max`, `min_multi_nodes`, `max_ib_cluster_nodes`: "
         "kentino_expert/domain/figure_specs.py, SIZING_PARAMETERS). Deleting one from `parameters.yaml` would "
         "break every answer. The diagnostic stands at the first parameter of the file, where the list to put "
         "it back in starts.",
         "parameters:\n  # workload_fraction_max: deleted\n  weights_fraction_max: 0.70\n",
         "Put the parameter back; change its value rather than delete it.", file="rules/parameters.yaml",
         without="workload_fraction_max", root=True),
    Code("E033", "error", "a fact of `facts.yaml` is not a mapping",
         "Each entry of `facts.yaml` says what an input fact means: a mapping with `description`, `ask` "
         "(the question to ask for it) and optional `default`, `tasks` and `answered_by`.",
         "facts:\n  batch_size: 8\n",
         "Write the fact's mapping; a default value goes under `default:` as `- value: 8`.",
         file="rules/facts.yaml", schema=True),
    Code("E034", "error", "a fact's `default` is not a list of {when, value, why}",
         "`default` is a list: each item has the `value` to assume, an optional `when` condition and "
         "`why` (shown in the answer's assumptions). The first item whose `when` holds is taken.",
         "facts:\n  batch_size:\n    description: Sequences per step.\n    ask: How many sequences per "
         "step?\n    default: 8\n",
         "Write `default:` followed by `- value: 8` and `why: ...` on the next lines.",
         file="rules/facts.yaml", schema=True),
    Code("E035", "error", "a value of `selection.yaml` is not one the build search knows",
         "`rules/selection.yaml` is the build search's policy: `order` lists criteria out of named-build, "
         "buildable, flow-precision, task-precision, lighter-kind, fewer-gpus, fewer-nodes, card-preference, "
         "cheapest and cheapest-to-run (these two need rules/prices.yaml); `kinds` the "
         "kinds (and dp-replicas-of-units); `cards` the cards of knowledge/gpus.yaml; `precisions` maps tasks "
         "to precisions; `works` is a list of {id, heuristics, when, figure, says}. A value outside these, one "
         "listed twice, an empty `order`, `kinds` or `cards` (an empty order would rank nothing, not even "
         "`buildable`), or a part of the wrong shape cannot be ordered or tried.",
         "selection:\n  order: [buildable, fastest]\n  kinds: [single-node]\n  cards: [rtx-pro-6000]\n",
         "Use the names the message lists (`rules check --explain E035`); list each once.",
         file="rules/selection.yaml", schema=True),
    Code("E036", "error", "a parameter the sizing reads is outside the values it can take",
         "The sizing reads a few parameters itself (kentino_expert/domain/figure_specs.py, "
         "SIZING_PARAMETER_RANGES), and each has the kind of value the mechanism can work with: a node "
         "count (`min_multi_nodes`, `max_ib_cluster_nodes`) is a whole number up to the largest build the "
         "input contract accepts, `full_node_gpus` a whole number up to the largest node, a fraction of "
         "memory (`weights_fraction_max`, `workload_fraction_max`, `training_fraction_max`) above 0 and "
         "at most 1. Outside that, the sizing means nothing or cannot finish: it tries a unit of every "
         "node count up to `max_ib_cluster_nodes`, so a million hangs every command that loads the rules. "
         "The rule set is refused when it is loaded, by every command.",
         "parameters:\n  max_ib_cluster_nodes:\n    value: 1000000\n    unit: nodes\n",
         "Give a value in the range the message names (`value: 4`); 2.5 nodes or a fraction of 1.5 is "
         "a typo.", file="rules/parameters.yaml", replacing="max_ib_cluster_nodes", root=True),
    Code("E037", "error", "a fact's `tasks` or `default` names a value the input contract refuses",
         "`tasks` lists the tasks a fact is asked for: a misspelt task matches none, so the fact is silently "
         "never asked for. A `default` is assumed as if the caller had given it, so it must be a value a "
         "caller could give (`gpus_per_node: 0` would be sized as a node of no GPUs; the input contract, "
         "`kentino-expert schema facts`, says what each fact takes).",
         "facts:\n  warmup_steps:\n    description: Steps of learning-rate warm-up.\n    ask: How many warm-up "
         "steps?\n    tasks: [pretrainig]\n",
         "Write the task as the message lists it (`pretraining`); give a default the fact accepts.",
         file="rules/facts.yaml", schema=True),
)

BOUNDS = (
    Code("E038", "error", f"an id or a name is longer than {MAX_ID_CHARS} characters",
         f"A rule id, a warning code, a heuristic id and every key of a rule file (a conclusion, parameter or fact "
         f"name) is at most {MAX_ID_CHARS} characters (kentino_expert/lang/limits.py): ids name rules in every "
         "trace, decision-log row and rule page, and a megabyte id made every answer a megabyte. A key past "
         "the bound stops the reading of its file as a text past E040's bound does.",
         _RULE.replace("big-model", "big-model\u2026") + _THEN + "      conclude: {big_model: true}\n" + _BECAUSE,
         "Name the rule, warning or value in a few words (`fits-one-node-at-fp8`); the description says the "
         "rest.", repeat="-and-more", times=12),
    Code("E039", "error", f"a literal is longer than {MAX_LITERAL_CHARS} characters",
         f"A literal (a quoted text of a condition or a recommend expression, a conclusion's or a default's text "
         f"value) is at most {MAX_LITERAL_CHARS} characters (kentino_expert/lang/limits.py), as long as a fact's "
         "text may be: a longer one could never equal a fact, and a conclusion's value is in the trace of every "
         "answer that fires the rule (a 5 MB literal made every answer 5 MB). The column is the literal's.",
         _rule("", then="      conclude: {market_segment: 'one-node\u2026'}\n"),
         "Conclude a short word (`one-node`), and say the rest in `because` or the rule's `description`.",
         repeat="-or-replicas", times=20),
    Code("E040", "error", f"a text of a rule file is longer than {MAX_TEXT_CHARS:,} characters",
         f"No text of a rule file (a condition, a description) is longer than {MAX_TEXT_CHARS:,} characters "
         "(kentino_expert/lang/limits.py): the engine's own limits keep a condition to a few thousand, and a "
         "megabyte of text is refused before anything reads it: nothing else of its file is read, so no "
         "message quotes the text.",
         _rule("    description: The model is past the single-node cliff.\u2026\n"),
         "Say it in a few sentences; put the background in knowledge/heuristics.yaml or the source document.",
         repeat=" Far past it.", times=1_600, root=True),
)

READING_CODES = FILES + RULE_SHAPE + THEN + POLICY + BOUNDS
