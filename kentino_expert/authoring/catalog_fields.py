"""The fields a card, a model and a link of knowledge/ need, as table rows generated from their pydantic specs."""
from __future__ import annotations

import inspect
import re

from ..domain.catalog import GpuSpec, LinkSpec, ModelSpec

# What a field means, where its spec says nothing of it (a `Field(description=...)` or a comment on its line in
# domain/catalog.py says it otherwise, and wins for a field added later): the table lists every field of the
# spec either way, with its type and whether it is required, so it follows the spec.
MEANINGS = {
    "id": "The id the facts take (`gpu`, `model`, `interconnect`): lowercase, unique among the ids and aliases "
          "of its file.",
    "name": "The full name, as its maker writes it.",
    "aliases": "Other names a buyer may use (lowercase); each reaches this entry.",
    "source": "Where the figures come from: the data sheet or config.json, with its address.",
    "memory_gb": "Memory on the card, GB.",
    "memory_bandwidth_gbs": "Memory bandwidth, GB/s: decode speed is sized from it.",
    "bf16_dense_tflops": "Dense BF16 tensor throughput, TFLOPS (without sparsity).",
    "fp8_dense_tflops": "Dense FP8 tensor throughput, TFLOPS (without sparsity).",
    "pcie_gen": "The PCIe generation of its slot.",
    "nvlink": "Whether its GPUs talk over NVLink.",
    "p2p": "Whether two cards of one node copy peer to peer over PCIe (GeForce drivers: no).",
    "form_factor": "`sxm` parts need HGX boards, which Kentino does not make.",
    "intra_node_link": "The link of links.yaml (an `intra-node` one) two cards of one box talk over.",
    "kentino_ships": "Whether Kentino sells it: the build search sizes every card it ships; list it in "
                     "rules/selection.yaml `cards` too (W310 otherwise).",
    "node_shapes": "The GPUs per node Kentino sells it in, each 1 to 16; needed when it ships.",
    "params_b": "Parameters, billions.",
    "active_params_b": "Parameters active per token (mixture of experts), billions; none: all of them.",
    "layers": "Transformer layers.",
    "hidden": "Hidden size.",
    "attention_heads": "Attention (query) heads.",
    "kv_heads": "Key/value heads: as many as `attention_heads` (MHA), fewer (GQA), 1 (MQA).",
    "head_dim": "Width of one head.",
    "vocab_size": "Vocabulary size.",
    "tie_word_embeddings": "Whether the input and output embeddings share their weights.",
    "intermediate_size": "Width of a dense MLP.",
    "max_context": "The longest context it takes, tokens.",
    "mla": "Multi-head latent attention: its latent replaces K and V in the KV cache (fields below).",
    "mla.kv_lora_rank": "Rank of the latent that replaces K and V.",
    "mla.qk_rope_head_dim": "Width of the rotary part of a query and key head.",
    "mla.qk_nope_head_dim": "Width of the part of a query and key head without rotary embedding.",
    "mla.v_head_dim": "Width of a value head.",
    "mla.q_lora_rank": "Rank of the query's low-rank pair; none: the query is one projection.",
    "moe": "Mixture-of-experts layout (fields below).",
    "moe.experts": "Routed experts per MoE layer.",
    "moe.experts_per_token": "Experts each token is routed to.",
    "moe.expert_intermediate_size": "Width of one expert's MLP.",
    "moe.moe_layers": "Layers with experts; the others have a dense MLP of `intermediate_size`.",
    "moe.shared_experts": "Experts every token passes through.",
    "local_attention": "Layers that keep the KV cache of a window of tokens only (fields below).",
    "local_attention.kind": "`sliding` (the last `window` tokens) or `chunked` (the current chunk).",
    "local_attention.window": "Tokens in the window.",
    "local_attention.layers": "How many layers attend locally.",
    "native_precision": "What the released checkpoint stores when it is not BF16 (fields below).",
    "native_precision.format": "The stored format.",
    "native_precision.scope": "The weights stored in it.",
    "sources": "Where particular fields were read: `field, field` to its source.",
    "estimated": "True for a model known by its size alone: its architecture is estimated.",
    "scope": "`inter-node` links are the values of `interconnect`; `intra-node` ones join the cards of a box.",
    "bandwidth_gbs": "Bandwidth per GPU per direction, GB/s.",
    "latency_us": "One hop's latency, microseconds.",
}


def _comments(spec) -> dict[str, str]:
    """field -> the comment on its line in the spec's source (a field added with one is described by it)."""
    try:
        source = inspect.getsource(spec)
    except (OSError, TypeError):
        return {}
    found = re.findall(r"^    (\w+): [^#\n]*#\s*(.+)$", source, re.M)
    return {name: text.strip()[:1].upper() + text.strip()[1:].rstrip(".") + "." for name, text in found}


def _number_words(option: dict) -> str:
    whole = option.get("type") == "integer"
    low = option.get("exclusiveMinimum")
    if low is not None:
        return f"whole number >= {int(low) + 1}" if whole else f"number > {low:g}"
    if "minimum" in option:
        return f"{'whole number' if whole else 'number'} >= {option['minimum']:g}"
    return "whole number" if whole else "number"


def _type_words(prop: dict) -> str:
    """A property of the spec's JSON Schema in words: `pcie` or `sxm`, number > 0, list of texts, ..."""
    options = [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"]
    if len(options) != 1:
        return " or ".join(_type_words(o) for o in options)
    option = options[0]
    if "$ref" in option:
        return "mapping (fields below)"
    if "enum" in option:
        return " or ".join(f"`{value}`" for value in option["enum"])
    kind = option.get("type")
    if kind in ("number", "integer"):
        return _number_words(option)
    if kind == "array":
        return f"list of {_type_words(option.get('items', {})).replace('number', 'numbers').replace('text', 'texts')}"
    if kind == "object":
        return f"mapping of text to {_type_words(option.get('additionalProperties') or {})}"
    return {"boolean": "true/false", "string": "text"}.get(kind, kind or "any value")


def _default(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    return "empty" if value in ([], {}, ()) else f"{value}"


def _rows(schema: dict, defs: dict, meanings: dict, defaults: dict, prefix: str = "", parent: str = "") -> list:
    rows, required = [], set(schema.get("required", ()))
    for name, prop in schema["properties"].items():
        path = f"{prefix}{name}"
        default = _default(defaults[name] if name in defaults else prop.get("default"))
        needed = ("yes" if not parent else f"yes, in `{parent}`") if name in required else f"no ({default})"
        rows.append((f"`{path}`", needed, _type_words(prop), meanings.get(path) or meanings.get(name) or "-"))
        ref = next((o["$ref"] for o in prop.get("anyOf", [prop]) if "$ref" in o), None)
        if ref:
            nested = defs[ref.rsplit("/", 1)[1]]
            rows += _rows(nested, defs, meanings, {}, f"{path}.", path)
    return rows


HEADER = ("field", "required", "type", "meaning")
SPECS = {"card": GpuSpec, "model": ModelSpec, "link": LinkSpec}  # knowledge/gpus.yaml, models.yaml, links.yaml


def field_rows(spec) -> list[tuple]:
    """Every field of `spec` (nested parts as `part.field`): whether it is required (else its default), its
    type and its meaning."""
    schema = spec.model_json_schema()
    meanings = {**_comments(spec), **MEANINGS}
    meanings.update({name: prop["description"] for name, prop in schema["properties"].items()
                     if "description" in prop})
    defaults = {name: field.get_default(call_default_factory=True) for name, field in spec.model_fields.items()
                if not field.is_required()}  # a default_factory's value too, which the JSON Schema leaves out
    return _rows(schema, schema.get("$defs", {}), meanings, defaults)
