"""Generated rule sets and scenario corpora for the benchmark and the scaling tests."""
from __future__ import annotations

import random
import shutil
from pathlib import Path

import yaml

from kentino_expert.domain.vocabulary import INFERENCE_TASKS, TASKS
from kentino_expert.paths import bundled

_TASKS = list(TASKS)
_MODELS = ["llama-3.1-8b", "qwen2.5-14b", "qwen2.5-32b", "llama-3.1-70b", "mixtral-8x7b", "llama-3.1-405b",
           "deepseek-v3"]
_CARDS = ["rtx-pro-6000", "rtx-5090", "l40", "l4"]


def generated_rules_dir(target: Path, count: int, seed: int = 7) -> Path:
    """The bundled rules plus `count` generated advisory rules (conclusions over sizing figures)."""
    target = Path(target)
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(bundled("rules"), target)
    rng = random.Random(seed)
    figures = ["weights_fraction_fp8", "weights_fraction_int4", "node_vram_gb", "params_b", "training_state_fraction"]
    rules = []
    for index in range(count):
        figure = rng.choice(figures)
        threshold = round(rng.uniform(0.01, 2.0) if "fraction" in figure else rng.uniform(1, 800), 3)
        rules.append({
            "id": f"generated-{index}", "heuristics": ["H-FIT-CAPACITY"], "priority": 900 + index / 10,
            "when": [f"{figure} > {threshold}", f"task in {rng.sample(_TASKS, 3)!r}"],
            "then": {"conclude": {f"generated_{index % 40}": True}},
            "because": f"{figure} is above {threshold}",
        })
    (target / "zz-generated.yaml").write_text(yaml.safe_dump({"rules": rules}, sort_keys=False), encoding="utf-8")
    return target


def generated_scenarios(count: int, seed: int = 11) -> list[dict]:
    """`count` workloads spread over tasks, models, cards and concurrency."""
    rng = random.Random(seed)
    out = []
    for index in range(count):
        facts = {"task": rng.choice(_TASKS), "model": rng.choice(_MODELS), "gpu": rng.choice(_CARDS)}
        if facts["task"] in INFERENCE_TASKS:
            facts["concurrency"] = rng.choice([4, 16, 64, 256])
            facts["context_tokens"] = rng.choice([2048, 8192, 32768])
        out.append({"name": f"generated {index}", "facts": facts, "expect": {}})
    return out
