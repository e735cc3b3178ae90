"""Helpers of the chart tests: read an SVG chart back into numbers (from its geometry), the policy and the
document's points straight from the YAML files, and answers shaped as the build search (issue 11) makes them."""
from __future__ import annotations

import copy
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
        found = [bar for bar in self.bars if text in bar.label]
        assert len(found) == 1, f"{text!r} is in {len(found)} bar labels: {[bar.label for bar in self.bars]}"
        return found[0]


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
            value = next(text.text for text in group.iter(f"{SVG}text") if text.get("class") == "value")
            label = next(group.iter(f"{SVG}text")).text
            bars.append(DrawnBar(group.get("data-label"), group.get("data-status"),
                                 group.get("data-highlighted") == "true", segments, value or label))
        elif group.get("class") == "reference":
            line = next(group.iter(f"{SVG}line"))
            lines[group.get("data-role")] = (float(line.get("x1")) - x0) * scale
    return Drawn(x0, scale, bars, lines)


def value(answer: dict, name: str) -> float:
    return float(answer["figures"][name]["value"])


def _figure(value_: float, unit: str, description: str) -> dict:
    return {"value": value_, "unit": unit, "description": description}


def card_switch(answer: dict) -> dict:
    """A 70B full fine-tune the buyer asked on RTX 5090s, moved by the build search to the Pro 6000 cluster:
    the alternatives and per-GPU figures as issue 11's answer model carries them."""
    out = copy.deepcopy(answer)
    out["facts"]["gpu"] = "rtx-pro-6000"
    out["figures"].update(
        plan_gpu_memory_gb=_figure(79.5, "GB", "memory of the plan's busiest GPU"),
        plan_gpu_memory_fraction=_figure(79.5 / 96, "of card memory", "plan_gpu_memory_gb / the card's memory"),
        plan_gpu_states_gb=_figure(68.0, "GB", "weights, gradients and optimizer states per GPU"),
        plan_gpu_gathered_gb=_figure(1.8, "GB", "the largest module gathered"),
        plan_gpu_activations_gb=_figure(7.1, "GB", "activations per GPU"))
    out["alternatives"] = [
        {"gpu": "rtx-5090", "gpus_per_node": 8, "kind": "frontier", "nodes": 6, "precision": "bf16", "works": False,
         "figure": {"name": "recommended_nodes", "value": 6, "unit": "nodes"},
         "why": "Frontier work at 6 nodes, beyond the 4-node IB cluster Kentino builds."},
        {"gpu": "l40", "gpus_per_node": 8, "kind": "multi-node-ib", "nodes": 4, "precision": "bf16", "works": True,
         "figure": {"name": "training_state_fraction", "value": 0.71, "unit": "of node VRAM"},
         "why": "<b>buildable</b>, but rules/selection.yaml ranks another build first."},
        {"gpu": "l4", "gpus_per_node": 8, "kind": "frontier", "nodes": None, "precision": "bf16", "works": False,
         "figure": None, "why": "Frontier work, beyond the IB cluster Kentino builds."},
    ]
    return out


def missed_deadline(answer: dict) -> dict:
    """A pretraining job whose plan takes longer than its deadline, with the slower one-node plan beside it."""
    out = copy.deepcopy(answer)
    out["facts"]["deadline_days"] = 30
    out["figures"]["time_to_result_days"] = _figure(41.25, "days", "time to result on the recommended plan")
    out["alternatives"] = [
        {"gpu": "rtx-pro-6000", "gpus_per_node": 8, "kind": "single-node", "nodes": 1, "precision": "bf16",
         "works": False, "figure": {"name": "time_to_result_days", "value": 349.4, "unit": "days"},
         "why": "Takes 349.4 days, past the 30-day deadline."},
        {"gpu": "l40", "gpus_per_node": 8, "kind": "frontier", "nodes": 12, "precision": "bf16", "works": False,
         "figure": {"name": "recommended_nodes", "value": 12, "unit": "nodes"},
         "why": "Frontier work at 12 nodes, beyond the 4-node IB cluster Kentino builds."},
    ]
    return out
