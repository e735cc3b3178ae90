"""The input contract: workload facts as chat bots and scenario files send them, validated."""
from __future__ import annotations

import json
import math
import re
import sys
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema, field_validator

from ..errors import InputError, Location, clipped, did_you_mean, printable
from ..yamlsrc import YamlSourceError, load_yaml
from .vocabulary import TASKS, Latency, Precision, Task, Tenancy

_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
MAX_TOKEN_TEXT = 40  # '15T' needs 3 characters; the cap comes before any pattern sees the text
# ASCII only ([0-9] and ' ', never \d or \s, which take '٣' and '\x1f') and unambiguous: each
# run of spaces is followed by something no space can be, so matching is linear, not quadratic.
_COUNT = re.compile(r" *([0-9]+(?:\.[0-9]+)?)(?: *([kmbgtKMBGT]))? *")
MAX_TOKENS = 1e16  # ten thousand trillion: beyond any corpus; larger is a typo
# a thousand parameters: a smaller model is a typo, and at about 1e-18 the sizing's figures leave their
# declared ranges (prefill overflows, a corpus' rate divides by zero)
MIN_PARAMS_B = 1e-6
MAX_FACTS_BYTES = 1_000_000  # a file or body of facts: "input larger than 1 MB" past it
MAX_KEY_ECHO = 40  # of an unknown or duplicate key, this much is quoted in the error
_COUNT_HINT = "a token count such as 300B or 15T"
MAX_NODES = 4096  # nodes of a proposed build: larger is a typo (the sizing's node-count parameters share it)
MAX_GPUS_PER_NODE = 16  # the largest box anyone builds; also the bound of full_node_gpus and of an in-node TP


def parse_token_count(value):
    """'15T' -> 1.5e13, '300B' -> 3e11, 5e9 -> 5e9; anything else is a ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"expected {_COUNT_HINT}")
    if isinstance(value, (int, float)):
        number = _finite(value)
    elif isinstance(value, str):
        number = _count_from_text(value)
    else:
        raise ValueError(f"expected {_COUNT_HINT}")
    if not math.isfinite(number) or number <= 0 or number > MAX_TOKENS:
        raise ValueError(f"must be a positive token count up to {MAX_TOKENS:.0e}")
    return number


def _finite(value) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer beyond any float: inf, refused by the bound like 1e400
        return math.inf


def _count_from_text(text: str) -> float:
    if len(text) > MAX_TOKEN_TEXT:
        raise ValueError(f"longer than {MAX_TOKEN_TEXT} characters: expected {_COUNT_HINT}")
    match = _COUNT.fullmatch(text)
    if not match:
        raise ValueError(f"'{text}' is not {_COUNT_HINT} (ASCII digits, an optional k/M/B/T)")
    return float(match.group(1)) * _SUFFIX[(match.group(2) or "").lower()]


TOKEN_COUNT_SCHEMA = {
    "anyOf": [{"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TOKENS},
              {"type": "string", "pattern": f"^{_COUNT.pattern}$", "maxLength": MAX_TOKEN_TEXT}],
    "description": "A token count: a number, or a string with a k/M/B/T suffix such as 300B or 15T.",
}
TokenCount = Annotated[float, BeforeValidator(parse_token_count), WithJsonSchema(TOKEN_COUNT_SCHEMA)]


_BINARY = {"k": 1024, "m": 1024 ** 2}  # a context of "8k" or "128k" is 8,192 or 131,072 tokens, as models count


def _whole_token_count(value):
    """'8k' -> 8192, '128k' -> 131072, 32768 -> 32768: a request's length as the ask texts and model cards write
    it (k and M binary, as context windows are counted), as a whole number; a fraction of a token is refused."""
    if isinstance(value, str) and len(value) <= MAX_TOKEN_TEXT:
        match = _COUNT.fullmatch(value)
        if match and (match.group(2) or "").lower() in _BINARY:
            value = float(match.group(1)) * _BINARY[match.group(2).lower()]
    number = parse_token_count(value)
    if number != int(number):
        raise ValueError(f"expected a whole number of tokens, not {number:g}")
    return int(number)


def _token_length_schema(maximum: int) -> dict:
    return {"anyOf": [{"type": "integer", "minimum": 1, "maximum": maximum},
                      {"type": "string", "pattern": f"^{_COUNT.pattern}$", "maxLength": MAX_TOKEN_TEXT}],
            "description": "A number of tokens: an integer, or a string with a k or M suffix such as 8k (8,192) or "
                           "128k (131,072)."}


MAX_CONTEXT_TOKENS = 100_000_000
TokenLength = Annotated[int, BeforeValidator(_whole_token_count), Field(ge=1, le=MAX_CONTEXT_TOKENS),
                        WithJsonSchema(_token_length_schema(MAX_CONTEXT_TOKENS))]


def _not_a_flag(value):
    """A number fact refuses true/false, which pydantic would take as 1/0 (`params_b: true` is not a 1B model)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, not {str(value).lower()}")
    return value


_STRICT = ConfigDict(frozen=True, extra="forbid", str_max_length=200, allow_inf_nan=False)


class ProposedBuild(BaseModel):
    """What the customer intends to buy."""

    model_config = _STRICT
    nodes: int = Field(ge=1, le=MAX_NODES)
    gpus_per_node: int = Field(ge=1, le=MAX_GPUS_PER_NODE)
    gpu: str | None = Field(default=None, max_length=200)
    precision: Precision | None = None  # the weights' precision the buyer has in mind (fp4: Blackwell cards only)

    _numbers = field_validator("nodes", "gpus_per_node", mode="before")(_not_a_flag)


class Workload(BaseModel):
    """The facts known about a workload; only `task` is required."""

    model_config = _STRICT
    task: Task
    model: str | None = Field(default=None, max_length=200)
    params_b: float | None = Field(default=None, ge=MIN_PARAMS_B, le=100_000)
    precision: Precision | None = None
    gpu: str | None = Field(default=None, max_length=200)
    gpus_per_node: int | None = Field(default=None, ge=1, le=MAX_GPUS_PER_NODE)
    concurrency: int | None = Field(default=None, ge=1, le=10_000_000)
    context_tokens: TokenLength | None = None
    prompt_tokens: TokenLength | None = None  # of a request's prompt, the tokens the model must compute (prefill)
    output_tokens: TokenLength | None = None  # tokens a request generates on average
    kv_cache_precision: Literal["bf16", "fp8"] | None = None  # the KV cache's precision (FP8 halves it)
    qps: float | None = Field(default=None, gt=0, le=1e12)
    tokens_per_s: float | None = Field(default=None, gt=0, le=1e15)
    latency: Latency | None = None
    tenancy: Tenancy | None = None
    training_tokens: TokenCount | None = None
    sequence_tokens: TokenLength | None = None  # tokens of one training sequence (each GPU's micro-batch)
    corpus_tokens: TokenCount | None = None
    generated_share: float | None = Field(default=None, ge=0, le=1)  # of the corpus: generated, the rest prompt
    deadline_days: float | None = Field(default=None, ge=0.001, le=36_500)  # from about 1.5 minutes to 100 years
    proposed_build: ProposedBuild | None = None
    interconnect: str | None = Field(default=None, max_length=200)

    _numbers = field_validator("params_b", "gpus_per_node", "concurrency", "qps", "tokens_per_s",
                               "generated_share", "deadline_days", mode="before")(_not_a_flag)

    def known(self) -> dict:
        """The facts the caller actually gave (no defaults), as plain values."""
        return self.model_dump(exclude_none=True)


def fact_problem(fact: str, value) -> str | None:
    """Why a caller could not give `value` for `fact` (the input contract's own message), or None: what a
    knowledge file that supplies a fact's value (a probe, a card's node shape) is checked against."""
    try:
        Workload.model_validate({"task": TASKS[0], fact: value})
    except ValidationError as exc:
        return _message_of(exc.errors()[0])
    return None


def _field_of(error: dict) -> str:
    parts = [str(p) for p in error["loc"] if not str(p).startswith("function-")]
    return ".".join(parts) or "facts"


def _message_of(error: dict) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown fact"
    if error["type"] == "missing":
        return "is required"
    message = error["msg"]
    return message.removeprefix("Value error, ")


def validate_facts(data) -> Workload:
    """Validate a mapping of facts; raise InputError naming the first bad field."""
    if not isinstance(data, dict):
        kind = "nothing" if data is None else "a list" if isinstance(data, list) else type(data).__name__
        raise InputError(f"expected a mapping of facts, got {kind}", field="facts")
    try:
        return Workload.model_validate(dict(data))
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        field = clipped(_field_of(first), MAX_KEY_ECHO)
        suggestion = None
        if first["type"] == "extra_forbidden":
            suggestion = did_you_mean(field.split(".")[-1], Workload.model_fields)
        raise InputError(_message_of(first), field=field, name=field, suggestion=suggestion) from None


def read_facts(text: str, source: str = "<stdin>") -> Workload:
    """Parse YAML or JSON text into validated facts; every failure is an InputError."""
    if len(text) > MAX_FACTS_BYTES:
        raise InputError("input larger than 1 MB", field="facts")
    if not text.strip():
        raise InputError(f"{source}: empty input, expected a mapping of facts", field="facts")
    as_json = text.lstrip().startswith(("{", "["))
    return validate_facts(_json_facts(text, source) if as_json else _yaml_facts(text, source))


def _yaml_facts(text: str, source: str):
    try:
        return load_yaml(text, source)
    except YamlSourceError as exc:
        raise InputError(exc.message, location=exc.location) from None




def _reject_constant(token: str):
    raise ValueError(f"{token} is not a number")


def _no_duplicate_keys(pairs):
    out = {}
    for key, value in pairs:
        if key in out:  # the message reaches HTTP clients as it is: no raw control characters
            raise ValueError(f"duplicate key '{printable(key[:MAX_KEY_ECHO])}'")
        out[key] = value
    return out


def strict_json_loads(text: str):
    """json.loads that refuses duplicate keys and NaN/Infinity (ValueError; RecursionError when too deep)."""
    return json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant)


def json_value_problem(exc: ValueError) -> str:
    """What a ValueError of strict_json_loads says, in the user's words: Python's own message for an integer too
    long to read names a limit and a setting, not the number."""
    if "integer string conversion" in str(exc):
        return f"a number has more than {sys.get_int_max_str_digits()} digits"
    return str(exc)


def _json_facts(text: str, source: str):
    try:
        return strict_json_loads(text)
    except RecursionError:
        raise InputError(f"{source}: JSON nests too deeply", field="facts") from None
    except json.JSONDecodeError as exc:
        syntax = exc  # not JSON at all: it may be a YAML flow mapping such as {task: lora}
    except ValueError as exc:  # JSON, but a duplicate key, NaN/Infinity or an integer too long for Python
        raise InputError(f"{source}: invalid JSON: {json_value_problem(exc)}", field="facts") from None
    try:
        return load_yaml(text, source)
    except YamlSourceError as exc:
        yaml_problem = exc.message.removeprefix("YAML syntax error: ")
        where = f"at {exc.location.line}:{exc.location.column}: " if exc.location.line else ""
        raise InputError(f"neither valid JSON ({syntax.msg}) nor valid YAML ({where}{yaml_problem})",
                         field="facts", location=Location(source, syntax.lineno, syntax.colno)) from None
