"""The knowledge catalog: models, cards, links and sizing constants read from knowledge/*.yaml."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..errors import CatalogError, KnowledgeError, Location, did_you_mean
from ..sourcefiles import SourceFileError, read_source
from ..yamlsrc import YamlSourceError, decode_utf8, load_yaml, location_at, location_of
from ..yamlsrc import to_plain as _plain
from .heuristics import read_heuristics
from .latency_table import check_latency as _check_latency
from .loose_names import loose_name
from .measurements import MEASUREMENTS_FILE, MeasurementSpec, read_measurements
from .parts import PARTS_FILE, Parts, read_parts
from .probetable import PROBES_FILE, check_probes
from .sizing_schema import check_sizing, check_sizing_names
from .spec_model import Spec
from .workload import fact_problem


class LocalAttention(Spec):
    """Local attention on some layers: those keep the KV cache of the last `window` tokens only (sliding), or of
    the current `window`-token chunk (chunked); either way at most min(context, window) tokens."""

    kind: Literal["sliding", "chunked"]
    window: PositiveInt
    layers: PositiveInt  # how many of the model's layers attend locally


class Mla(Spec):
    """Multi-head latent attention: the per-token latent that replaces K and V, and the projections' ranks."""

    kv_lora_rank: PositiveInt
    qk_rope_head_dim: PositiveInt
    qk_nope_head_dim: PositiveInt
    v_head_dim: PositiveInt
    q_lora_rank: PositiveInt | None = None  # None: the query is one projection, not a low-rank pair


class Moe(Spec):
    """Mixture-of-experts layout: routed experts, experts per token, shared experts and the experts' width."""

    experts: PositiveInt
    experts_per_token: PositiveInt
    expert_intermediate_size: PositiveInt
    moe_layers: PositiveInt  # the other layers have a dense MLP of intermediate_size
    shared_experts: NonNegativeInt = 0

    @model_validator(mode="after")
    def _routes_to_experts_it_has(self):
        if self.experts_per_token > self.experts:  # swapped figures: the active parameters would be overcounted
            raise ValueError(f"experts_per_token ({self.experts_per_token}) is more than experts ({self.experts})")
        return self


class NativePrecision(Spec):
    """What the released checkpoint stores when it is not BF16: a format on a part of the weights."""

    format: Literal["fp8", "mxfp4"]
    scope: Literal["linear-layers", "routed-experts"]


class ModelSpec(Spec):
    """One model's architecture, as its config.json states it."""

    id: str
    name: str
    params_b: PositiveFloat
    active_params_b: PositiveFloat | None = None
    layers: PositiveInt
    hidden: PositiveInt
    attention_heads: PositiveInt
    kv_heads: PositiveInt
    head_dim: PositiveInt
    vocab_size: PositiveInt
    tie_word_embeddings: bool = False
    intermediate_size: PositiveInt
    max_context: PositiveInt
    mla: Mla | None = None
    moe: Moe | None = None
    local_attention: LocalAttention | None = None
    native_precision: NativePrecision | None = None
    aliases: tuple[str, ...] = ()
    source: str
    sources: dict[str, str] = Field(default_factory=dict)  # "field, field" -> where those were read
    estimated: bool = False

    @field_validator("kv_heads")
    @classmethod
    def _no_more_kv_heads_than_heads(cls, kv_heads: int, info: ValidationInfo) -> int:
        """Each KV head serves one or more query heads (MHA, GQA, MQA): swapped head counts would size the KV
        cache several times too big, and move answers without a word. (Not "divides": the estimate of a model
        known by its size alone rounds its heads, and the sizing needs no whole groups.)"""
        heads = info.data.get("attention_heads")
        if heads is not None and kv_heads > heads:
            raise ValueError(f"{kv_heads} KV heads is more than the {heads} attention_heads (each KV head serves "
                             "one or more query heads)")
        return kv_heads

    @model_validator(mode="after")
    def _consistent(self):
        if self.moe is not None and self.moe.moe_layers > self.layers:
            raise ValueError(f"moe.moe_layers ({self.moe.moe_layers}) is more than layers ({self.layers})")
        if self.local_attention is not None and self.local_attention.layers > self.layers:
            raise ValueError(f"local_attention.layers ({self.local_attention.layers}) is more than layers")
        if self.active_params_b is not None and self.active_params_b > self.params_b:
            raise ValueError("active_params_b is more than params_b")
        for key in self.sources:
            unknown = [name.strip() for name in key.split(",") if name.strip() not in type(self).model_fields]
            if unknown:
                raise ValueError(f"sources: '{unknown[0]}' is not a field of a model")
        return self

    @property
    def active_b(self) -> float:
        return self.active_params_b or self.params_b

    @property
    def dense_layers(self) -> int:
        """Layers with a dense MLP (all of them unless mixture-of-experts)."""
        return self.layers - (self.moe.moe_layers if self.moe else 0)


class GpuSpec(Spec):
    """One card, as its vendor data sheet states it."""

    id: str
    name: str
    memory_gb: PositiveFloat
    memory_bandwidth_gbs: PositiveFloat
    bf16_dense_tflops: PositiveFloat
    fp8_dense_tflops: PositiveFloat
    fp4_dense_tflops: PositiveFloat | None = None  # FP4 tensor cores (Blackwell: NVFP4 / MXFP4); None: none
    board_power_w: PositiveFloat | None = None  # the data sheet's maximum board power
    pcie_gen: PositiveInt
    nvlink: bool
    p2p: bool
    form_factor: Literal["pcie", "sxm"]
    intra_node_link: str
    kentino_ships: bool
    node_shapes: tuple[PositiveInt, ...] = ()  # GPUs per node Kentino sells it in (the build search's shapes)
    aliases: tuple[str, ...] = ()
    source: str

    @model_validator(mode="after")
    def _shapes_a_buyer_can_name(self):
        for shape in self.node_shapes:  # else the build search would drop the card without a word
            problem = fact_problem("gpus_per_node", shape)
            if problem:
                raise ValueError(f"node_shapes: {shape} GPUs per node is not a gpus_per_node a buyer can give "
                                 f"({problem})")
        return self


class LinkSpec(Spec):
    """One GPU-to-GPU link: bandwidth per GPU per direction and one hop's latency."""

    id: str
    name: str
    scope: Literal["intra-node", "inter-node"]
    bandwidth_gbs: PositiveFloat
    latency_us: PositiveFloat
    aliases: tuple[str, ...] = ()
    source: str


class Knowledge(BaseModel):
    """Everything under knowledge/, validated, with a digest of the files read."""

    model_config = ConfigDict(frozen=True)
    models: dict[str, ModelSpec]
    gpus: dict[str, GpuSpec]
    links: dict[str, LinkSpec]
    sizing: dict = Field(default_factory=dict)
    latency: dict = Field(default_factory=dict)  # knowledge/latency.yaml: per-user decode targets by latency class
    heuristics: dict[str, dict] = Field(default_factory=dict)  # id -> {section, text}
    heuristic_locations: dict[str, Location] = Field(default_factory=dict)  # id -> its entry in heuristics.yaml
    files: dict[str, str] = Field(default_factory=dict)  # relative name -> sha256
    directory: str = ""  # where the files were read (answers name it)
    probes: dict[str, tuple] = Field(default_factory=dict)  # probes.yaml: fact -> the values a what-if tries
    measurements: tuple[MeasurementSpec, ...] = ()  # measurements.yaml: published serving measurements
    parts: Parts = Field(default_factory=Parts)  # parts.yaml: chassis and fabric parts a quote lists

    def model(self, name: str) -> ModelSpec:
        return _lookup(self.models, name, "model")

    def gpu(self, name: str, field: str = "gpu") -> GpuSpec:
        return _lookup(self.gpus, name, field)

    def link(self, name: str, field: str = "interconnect") -> LinkSpec:
        return _lookup(self.links, name, field)

    def latency_target(self, latency: str) -> float | None:
        """Tokens/s each user must see in a latency class (None: the class sets no per-user target)."""
        targets = self.latency.get("per_user_tokens_per_s")
        if not isinstance(targets, dict):
            raise KnowledgeError("knowledge/latency.yaml: missing 'per_user_tokens_per_s'")
        return targets.get(latency)

    def ttft_target_s(self, latency: str, prompt_tokens: float) -> float | None:
        """Seconds to the first token a latency class allows a prompt of `prompt_tokens` (None: no bound): the
        class's MLPerf limit for prompts up to the benchmark's input length, in proportion beyond it."""
        limit = (self.latency.get("time_to_first_token_s") or {}).get(latency)
        if limit is None:
            return None
        return limit * max(1.0, prompt_tokens / self.latency["ttft_reference_prompt_tokens"])

    def constant(self, *path: str):
        """A sizing constant by its path in sizing.yaml; a missing one is a KnowledgeError."""
        node = self.sizing
        for part in path:
            if not isinstance(node, dict) or part not in node:
                raise KnowledgeError(f"knowledge/sizing.yaml: missing constant '{'.'.join(path)}'")
            node = node[part]
        return node


# the facts that hold an id of the catalog, and the table each names
CATALOG_FACTS = {"model": "models", "gpu": "gpus", "proposed_gpu": "gpus", "interconnect": "links"}


def catalog_of(knowledge: Knowledge) -> dict:
    """fact -> (ids, {alias: id}) for the facts that hold a catalog id."""
    out = {}
    for fact, table in CATALOG_FACTS.items():
        specs = getattr(knowledge, table)
        out[fact] = (frozenset(specs), {alias: spec.id for spec in specs.values() for alias in spec.aliases})
    return out


def _lookup(table: dict, name: str, field: str):
    key = str(name).strip().lower()
    if key in table:
        return table[key]
    for spec in table.values():
        if key in spec.aliases:
            return spec
    # as people write names: "Llama 3.1 70B", "meta-llama/Meta-Llama-3.1-70B-Instruct", "qwen3 235b"; only
    # when exactly one entry answers to the loose form (an ambiguous name is unknown, with a suggestion)
    loose = loose_name(key)
    found = {spec.id for spec in table.values() if loose in {loose_name(n) for n in (spec.id, *spec.aliases)}}
    if len(found) == 1:
        return table[found.pop()]
    names = list(table) + [a for spec in table.values() for a in spec.aliases]
    what = field.rsplit(".", 1)[-1]
    raise CatalogError(f"unknown {what} '{name}'", field=field, name=str(name),
                       suggestion=did_you_mean(key, names))


_SECTIONS = {"models.yaml": ("models", ModelSpec), "gpus.yaml": ("gpus", GpuSpec), "links.yaml": ("links", LinkSpec)}


def _read(path: Path):
    try:
        data = read_source(path, path.parent)  # a regular file inside the directory (sourcefiles.py)
    except SourceFileError as exc:
        raise KnowledgeError(str(exc), location=Location(str(path))) from None
    except OSError as exc:
        raise KnowledgeError(f"cannot read {path}: {exc.strerror}", location=Location(str(path))) from None
    try:
        text = decode_utf8(data, str(path))
        return text, load_yaml(text, str(path))
    except YamlSourceError as exc:
        raise KnowledgeError(exc.message, location=exc.location) from None


def _entries(path: Path, data, section: str, spec_type) -> dict:
    if not isinstance(data, dict) or not isinstance(data.get(section), list):
        raise KnowledgeError(f"expected a top-level '{section}:' list", location=Location(str(path), 1, 1))
    out, owner = {}, {}  # owner: every id and alias -> the id it names
    for index, raw in enumerate(data[section]):
        where = location_of(data[section], index, str(path))
        try:
            spec = spec_type.model_validate(dict(raw) if isinstance(raw, dict) else raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = "".join(f".{p}" for p in err["loc"])
            message = err["msg"].removeprefix("Value error, ")
            # at the field's own line: an entry is a dozen lines, and its first one is seldom the one to fix
            raise KnowledgeError(f"{section}[{index}]{field}: {message}",
                                 location=location_at(raw, err["loc"], str(path), where)) from None
        if spec.id in out:
            raise KnowledgeError(f"duplicate id '{spec.id}'", location=where)
        _check_names(spec, owner, f"{section}[{index}]", where)
        out[spec.id] = spec
    return out


def _check_names(spec, owner: dict, entry: str, where: Location) -> None:
    """An entry's id and aliases are names a caller can reach: lowercase and trimmed (a lookup lowercases the
    name it is given, so 'Llama-3-8B' would never be found), and no other entry's name (the first would win)."""
    for name in (spec.id, *spec.aliases):
        if name != name.strip().lower() or not name.strip():
            raise KnowledgeError(f"{entry}: '{name}' is not a name a caller can reach: ids and aliases are "
                                 f"lowercase, without surrounding spaces (write '{name.strip().lower()}')",
                                 location=where)
        if owner.get(name, spec.id) != spec.id:
            raise KnowledgeError(f"{entry}: '{name}' already names '{owner[name]}'", location=where)
        owner[name] = spec.id


def _digested(root: Path, filename: str, files: dict):
    """A knowledge file's YAML; its sha256 goes into `files` (the rule set's version covers it)."""
    text, data = _read(root / filename)
    files[filename] = hashlib.sha256(text.encode()).hexdigest()
    return data


def load_knowledge(directory: str | Path) -> Knowledge:
    """Read and validate knowledge/*.yaml; every problem is a KnowledgeError with file:line."""
    root = Path(directory)
    if not root.is_dir():
        raise KnowledgeError(f"knowledge directory not found: {root}")
    tables, files, raw = {}, {}, {}
    for filename, (section, spec_type) in _SECTIONS.items():
        raw[section] = _digested(root, filename, files)
        tables[section] = _entries(root / filename, raw[section], section, spec_type)
    sizing = _digested(root, "sizing.yaml", files)
    if not isinstance(sizing, dict):
        raise KnowledgeError("expected a mapping", location=Location(str(root / "sizing.yaml"), 1, 1))
    check_sizing(sizing, str(root / "sizing.yaml"))
    latency = _digested(root, "latency.yaml", files)
    _check_latency(latency, root / "latency.yaml")
    where: dict = {}
    heuristics = read_heuristics(_digested(root, "heuristics.yaml", files), root / "heuristics.yaml", where)
    where = {hid: Location(f"{root.name}/heuristics.yaml", at.line, at.column)  # shown as rules/ files are (W304)
             for hid, at in where.items()}
    _check_cards(tables["gpus"], tables["links"], raw["gpus"]["gpus"], str(root / "gpus.yaml"))
    check_sizing_names(sizing, str(root / "sizing.yaml"), lambda table, name: _lookup(tables[table], name, table[:-1]))
    knowledge = Knowledge(models=tables["models"], gpus=tables["gpus"], links=tables["links"],
                          sizing=_plain(sizing), latency=_plain(latency), heuristics=heuristics, files=files,
                          directory=str(root), heuristic_locations=where)
    knowledge = _with_probes(knowledge, root / PROBES_FILE)
    knowledge = _with_table(knowledge, root / MEASUREMENTS_FILE, "measurements",
                            lambda data, path: read_measurements(data, path, knowledge.models, knowledge.gpus))
    return _with_table(knowledge, root / PARTS_FILE, "parts",
                       lambda data, path: read_parts(data, path, tables["links"]))


def _with_table(knowledge: Knowledge, path: Path, field: str, read) -> Knowledge:
    """The knowledge with an optional file's table (no file: none; measurements.yaml: the serving model then says
    so; parts.yaml: no answer carries a quote)."""
    if not os.path.lexists(path):
        return knowledge
    files = dict(knowledge.files)
    table = read(_digested(path.parent, path.name, files), str(path))
    return knowledge.model_copy(update={field: table, "files": files})


def _check_cards(gpus: dict, links: dict, entries: list, path: str) -> None:
    """What a card says of the rest of the catalog, at the line of the field that says it: a card Kentino ships
    has node shapes, and its intra_node_link is a link inside one box (an inter-node one would size the box's
    own traffic at a network's speed, and move answers without a word)."""
    for index, (gpu, entry) in enumerate(zip(gpus.values(), entries, strict=True)):
        if gpu.kentino_ships and not gpu.node_shapes:  # at `node_shapes: []`, else at `kentino_ships: true`
            shapes = location_at(entry, ("node_shapes",), path, location_of(entry, "kentino_ships", path))
            raise KnowledgeError(f"gpus[{index}].node_shapes: '{gpu.id}' is a card Kentino ships (kentino_ships: "
                                 "true): list the GPUs per node it is sold in", location=shapes)
        link = links.get(gpu.intra_node_link)
        where = location_of(entry, "intra_node_link", path)
        if link is None:
            raise KnowledgeError(f"gpus[{index}].intra_node_link: unknown link '{gpu.intra_node_link}'",
                                 location=where, suggestion=did_you_mean(gpu.intra_node_link, links))
        if link.scope != "intra-node":
            inside = ", ".join(name for name, other in links.items() if other.scope == "intra-node")
            raise KnowledgeError(f"gpus[{index}].intra_node_link: '{link.id}' is an {link.scope} link; a card's "
                                 f"in-box link is one of {inside}", location=where)


def _with_probes(knowledge: Knowledge, path: Path) -> Knowledge:
    """The knowledge with probes.yaml's table, checked against the facts and this catalog (no file: no table;
    then only enumerated facts and the catalog's own picks are probed)."""
    if not os.path.lexists(path):  # a probes.yaml that is there but cannot be read is refused, not skipped
        return knowledge
    files = dict(knowledge.files)
    data = _digested(path.parent, path.name, files)

    def resolve(fact: str, value) -> None:
        table = CATALOG_FACTS.get(fact)
        if table is not None:
            _lookup(getattr(knowledge, table), value, fact)

    probes = check_probes(data, path, resolve)
    return knowledge.model_copy(update={"probes": probes, "files": files})
