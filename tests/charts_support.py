"""Helpers of the chart tests: read an SVG chart back into numbers (from its geometry), the policy and the
document's points straight from the YAML files, and the facts of the issue's representative answers."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"

SINGLE = {"task": "inference", "model": "llama-3.1-70b", "concurrency": 48, "context_tokens": 8192,
          "latency": "production", "tenancy": "single"}
INT4 = {"task": "inference", "model": "llama-3.1-405b", "concurrency": 8, "context_tokens": 8192,
        "latency": "offline"}
REPLICAS = {"task": "inference", "model": "llama-3.1-70b", "tokens_per_s": 3500, "latency": "production",
            "tenancy": "single", "concurrency": 64, "context_tokens": 8192}
IB_CLUSTER = {"task": "full-finetune", "model": "llama-3.1-70b", "training_tokens": 2e9}
FRONTIER = {"task": "pretraining", "model": "llama-3.1-70b", "training_tokens": 15e12}
# the buyer names the RTX 5090 for a 70B full fine-tune: frontier there, so the build search switches the card
SWITCH = {"task": "full-finetune", "model": "llama-3.1-70b", "gpu": "rtx-5090", "training_tokens": 2e10}
# 8B pretraining in 30 days: one node takes about a year, the deadline sets the node count
MISSED = {"task": "pretraining", "model": "llama-3.1-8b", "training_tokens": 1e12, "deadline_days": 30}
BATCH = {"task": "batch-inference", "model": "llama-3.1-405b", "latency": "offline", "corpus_tokens": 1e10,
         "deadline_days": 30}


def parameter(name: str) -> float:
    """A rule parameter's value, read from rules/parameters.yaml itself."""
    return float(yaml.safe_load((ROOT / "rules" / "parameters.yaml").read_text())["parameters"][name]["value"])


def calibration() -> list[float]:
    """The document's measured efficiency points, read from knowledge/sizing.yaml itself."""
    points = yaml.safe_load((ROOT / "knowledge" / "sizing.yaml").read_text())["scaling"]["calibration"]
    return sorted(float(point["efficiency"]) for point in points.values() if isinstance(point, dict))


@dataclass
class DrawnBar:
    label: str
    status: str
    highlighted: bool
    segments: list  # (role, label, value from the width, left edge value)
    value_text: str

    @property
    def total(self) -> float:
        return sum(segment[2] for segment in self.segments)


@dataclass
class Drawn:
    x0: float
    scale: float  # axis units per SVG unit
    bars: list
    lines: dict  # role -> value from the line's x

    def bar(self, text: str) -> DrawnBar:
        found = [bar for bar in self.bars if text == bar.label] or [bar for bar in self.bars if text in bar.label]
        assert len(found) == 1, f"{text!r} is in {len(found)} bar labels: {[bar.label for bar in self.bars]}"
        return found[0]


def _words(text) -> str:
    """A <text>'s words, its lines (tspans) joined: a label wrapped onto lines reads as one."""
    return " ".join(part.strip() for part in text.itertext() if part.strip())


def drawn(svg: str) -> Drawn:
    """The chart's bars and lines as the geometry draws them: widths and positions turned back into values."""
    root = ET.fromstring(svg)
    x0, width = float(root.get("data-x0")), float(root.get("data-plot-width"))
    scale = float(root.get("data-axis-max")) / width
    bars, lines = [], {}
    for group in root.iter(f"{SVG}g"):
        if group.get("class") == "bar":
            segments = [(rect.get("data-role"), rect.get("data-label"), float(rect.get("width")) * scale,
                         (float(rect.get("x")) - x0) * scale)
                        for rect in group.iter(f"{SVG}rect") if rect.get("class") == "segment"]
            value = next(_words(text) for text in group.iter(f"{SVG}text") if text.get("class") == "value")
            label = _words(next(group.iter(f"{SVG}text")))
            bars.append(DrawnBar(group.get("data-label"), group.get("data-status"),
                                 group.get("data-highlighted") == "true", segments, value or label))
        elif group.get("class") == "reference":
            line = next(group.iter(f"{SVG}line"))
            lines[group.get("data-role")] = (float(line.get("x1")) - x0) * scale
    return Drawn(x0, scale, bars, lines)


def value(answer: dict, name: str) -> float:
    return float(answer["figures"][name]["value"])


def alternative(answer: dict, gpu: str) -> dict:
    """The one alternative on this card."""
    found = [item for item in answer["alternatives"] if gpu == item["gpu"]]
    assert len(found) == 1, f"{gpu!r}: {[item['gpu'] for item in answer['alternatives']]}"
    return found[0]


def label_of(build: dict) -> str:
    """How a chart names a build: '3 nodes x 8 x rtx-pro-6000', or '8 x l40' for one node."""
    card = f"{build['gpus_per_node']} x {build['gpu']}"
    return card if build["nodes"] == 1 else f"{build['nodes']} nodes x {card}"


def card_memory(gpu: str) -> float:
    """A card's memory, read from knowledge/gpus.yaml itself."""
    cards = yaml.safe_load((ROOT / "knowledge" / "gpus.yaml").read_text())
    cards = cards.get("gpus", cards)
    found = cards[gpu] if isinstance(cards, dict) else next(card for card in cards if card["id"] == gpu)
    return float(found["memory_gb"])
