"""The parts a build is made of besides its cards (knowledge/parts.yaml): node chassis by the GPUs they hold, and
the adapters, switches and cables of each inter-node fabric, with their power, rack units and ports as data sheets
give them. Prices are policy and live in rules/prices.yaml (domain/quote.py reads both)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat, PositiveInt, ValidationError

from ..errors import KnowledgeError, Location, did_you_mean
from ..yamlsrc import location_at, location_of
from .spec_model import Spec

PARTS_FILE = "parts.yaml"


class ChassisSpec(Spec):
    """A GPU server without its cards: what it holds and what it draws besides them."""

    id: str
    name: str
    gpu_slots: PositiveInt  # double-width PCIe cards it takes
    form_factor: Literal["pcie", "sxm"]  # the cards' form factor it takes (gpus.yaml `form_factor`)
    rack_units: PositiveInt
    base_power_w: PositiveFloat  # CPUs, memory, drives, fans and host NICs at load: the node's power but its cards'
    cpus: str
    memory: str
    storage: str
    power_supplies: str
    source: str
    aliases: tuple[str, ...] = ()


class NetworkPartSpec(Spec):
    """An adapter (one per GPU on a TP/PP fabric), a switch or a cable of one inter-node link of links.yaml."""

    id: str
    name: str
    link: str  # the links.yaml id of the fabric it belongs to
    role: str  # adapter | switch | cable
    power_w: NonNegativeFloat = 0.0
    ports: PositiveInt | None = None  # a switch's ports at the link's speed
    rack_units: int = Field(0, ge=0)
    source: str
    aliases: tuple[str, ...] = ()


ROLES = ("adapter", "switch", "cable")


class Parts(BaseModel):
    """knowledge/parts.yaml, checked against the cards and links of the catalog."""

    model_config = ConfigDict(frozen=True)
    chassis: tuple[ChassisSpec, ...] = ()
    network: tuple[NetworkPartSpec, ...] = ()

    def ids(self) -> tuple[str, ...]:
        return tuple(part.id for part in (*self.chassis, *self.network))

    def chassis_for(self, gpus_per_node: int, form_factor: str) -> ChassisSpec | None:
        """The smallest chassis that holds `gpus_per_node` cards of `form_factor` (None: no chassis does)."""
        fits = [c for c in self.chassis if c.gpu_slots >= gpus_per_node and c.form_factor == form_factor]
        return min(fits, key=lambda c: (c.gpu_slots, c.rack_units)) if fits else None

    def fabric(self, link: str) -> dict[str, NetworkPartSpec]:
        """role -> the part of the fabric of inter-node link `link` (empty: no fabric is listed for it)."""
        return {part.role: part for part in self.network if part.link == link}


def read_parts(data, path: str, links: dict) -> Parts:
    """The parts of a parts.yaml mapping; a problem is a KnowledgeError at its line."""
    if not isinstance(data, dict) or not isinstance(data.get("chassis"), list) \
            or not isinstance(data.get("network", []), list):
        raise KnowledgeError("expected top-level 'chassis:' and 'network:' lists", location=Location(path, 1, 1))
    chassis = _entries(data, "chassis", ChassisSpec, path)
    network = _entries(data, "network", NetworkPartSpec, path)
    seen: dict = {}
    for section, entries in (("chassis", chassis), ("network", network)):
        for index, part in enumerate(entries):
            where = location_of(data[section], index, path)
            if part.id in seen:
                raise KnowledgeError(f"{section}[{index}].id: '{part.id}' is listed twice", location=where)
            seen[part.id] = part
    for index, part in enumerate(network):
        entry, where = data["network"][index], location_of(data["network"], index, path)
        if part.role not in ROLES:
            raise KnowledgeError(f"network[{index}].role: '{part.role}' is not one of {', '.join(ROLES)}",
                                 location=location_at(entry, ("role",), path, where))
        link = links.get(part.link)
        if link is None or link.scope != "inter-node":
            inter = [name for name, spec in links.items() if spec.scope == "inter-node"]
            raise KnowledgeError(f"network[{index}].link: '{part.link}' is not an inter-node link of links.yaml",
                                 location=location_at(entry, ("link",), path, where),
                                 suggestion=did_you_mean(part.link, inter))
        if part.role == "switch" and part.ports is None:
            raise KnowledgeError(f"network[{index}].ports: a switch needs its port count", location=where)
    return Parts(chassis=tuple(chassis), network=tuple(network))


def _entries(data: dict, section: str, spec_type, path: str) -> list:
    out = []
    for index, raw in enumerate(data.get(section) or []):
        where = location_of(data[section], index, path)
        try:
            out.append(spec_type.model_validate(dict(raw) if isinstance(raw, dict) else raw))
        except ValidationError as exc:
            err = exc.errors()[0]
            field = "".join(f".{p}" for p in err["loc"])
            raise KnowledgeError(f"{section}[{index}]{field}: {err['msg'].removeprefix('Value error, ')}",
                                 location=location_at(raw, err["loc"], path, where)) from None
    return out
