"""How large a decision is, measured on real answers, never written by hand: the rule set's own rule examples
decided (nothing logged), for the texts that tell a bot what a full answer and its compact view cost (the served
schema of `view`, docs/chat-bots.md) and an operator what a decision takes of the log (docs/operations.md)."""
from __future__ import annotations

import logging
import statistics
import weakref
from dataclasses import dataclass

from .. import fastjson
from ..errors import KentinoError
from .compact import compact
from .decide import evaluate_decision

SERVED_SAMPLE = 12  # examples the service measures for its schema (a few ms each; the docs measure every one)
PLACEHOLDER_ID = "0" * 32  # a decision id has 32 hex digits
_served: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_quiet = logging.getLogger("kentino_expert.answer_size")  # an example that fails is the sandbox's to report


@dataclass(frozen=True)
class Sizes:
    """Bytes of JSON over the answers measured: each as (smallest, median, largest)."""
    answers: int  # how many answers were measured
    full: tuple[int, int, int]  # the response of POST /v1/recommend (the MCP tool's result)
    compact: tuple[int, int, int]  # its compact view
    logged: tuple[int, int, int]  # what the log stores of a decision: its facts and its answer


def _spread(values: list[int]) -> tuple[int, int, int]:
    return min(values), int(statistics.median(values)), max(values)


def _examples(expert, limit: int | None) -> list[dict]:
    """The rules' examples in rule order, every one or `limit` of them spread evenly over the rules."""
    examples = [rule.source.example for rule in expert.ruleset.rules if rule.source.example]
    if limit is None or len(examples) <= limit:
        return examples
    return [examples[i * len(examples) // limit] for i in range(limit)]


def measure(expert, limit: int | None = None, directories: tuple[str, str] | None = None) -> Sizes | None:
    """The sizes of the decisions on the rule set's examples (None when it has none); `directories` (rules,
    knowledge) stand in the answers for the real ones, so that a page's figures do not depend on where the clone
    is."""
    full, short, logged = [], [], []
    for facts in _examples(expert, limit):
        try:
            evaluation = evaluate_decision(expert, facts, _quiet)
        except KentinoError:  # an example the rules cannot answer (the sandbox refuses such a set): not measured
            continue
        body, answer = {"decision_id": PLACEHOLDER_ID, **evaluation.body}, evaluation.logged
        if directories is not None:
            ruleset = {**body["ruleset"], "directory": directories[0], "knowledge_directory": directories[1]}
            body, answer = {**body, "ruleset": ruleset}, {**answer, "ruleset": ruleset}
        full.append(len(fastjson.dumps_bytes(body)))
        short.append(len(fastjson.dumps_bytes(compact(body))))
        logged.append(len(fastjson.dumps_bytes(evaluation.facts)) + len(fastjson.dumps_bytes(answer)))
    if not full:
        return None
    return Sizes(len(full), _spread(full), _spread(short), _spread(logged))


def served_sizes(expert) -> Sizes | None:
    """The sizes the service states, measured once per expert on SERVED_SAMPLE of its examples."""
    if expert not in _served:
        _served[expert] = measure(expert, SERVED_SAMPLE)
    return _served[expert]


def kb(size: int) -> str:
    """Bytes as KB with one decimal (1 KB = 1,000 bytes, as `wc -c` counts them)."""
    return f"{size / 1000:.1f} KB"


def kb_range(spread: tuple[int, int, int]) -> str:
    """'11.5-24.8 KB' (or one figure when all are alike)."""
    low, _, high = spread
    return kb(low) if kb(low) == kb(high) else f"{low / 1000:.1f}-{kb(high)}"


def chat_bot_sizes(sizes: Sizes, tool_definition_bytes: int) -> str:
    """The sizes a chat-bot developer plans for (docs/chat-bots.md's generated block)."""
    return (f"Measured on the answers to the rule set's {sizes.answers} rule examples: a full response is "
            f"{kb_range(sizes.full)} ({kb(sizes.full[1])} the median), several thousand tokens each time a model "
            f"reads it; its compact view is {kb_range(sizes.compact)}, and the tool definition "
            f"{kb(tool_definition_bytes)}.")


def log_row_sizes(sizes: Sizes) -> str:
    """What a decision takes of the log (docs/operations.md's generated block)."""
    return (f"A decision takes {kb_range(sizes.logged)} of the log ({kb(sizes.logged[1])} the median, over the "
            f"answers to the rule set's {sizes.answers} rule examples): its stored answer, with its alternatives, "
            f"and its facts.")
