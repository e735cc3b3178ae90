"""Rule directories for the hostile-rules tests: the bundled rules plus one file of rules written to
break the engine (issue 9), with the line:column each attack should be reported at."""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from kentino_expert.paths import bundled

FILE = "zz-hostile.yaml"
RULE = """  - id: {id}
    heuristics: [H-OPS-TAX]
    description: A rule written to break the engine.
    priority: {priority}
    when: "{when}"
    then:
{then}
    because: hostile
"""
WARN = "      warn: {{code: {id}, message: hostile}}"
RECOMMEND = "      recommend: {{kind: single-node, precision: fp8, nodes: \"{nodes}\", tp: 1}}"

# the attacks of issue 9, item 2
OR_CHAIN = " or ".join(f"params_b == {i}" for i in range(500))          # hung recommend, reload, serve
ALWAYS_TRUE_55 = " or ".join(f"params_b > -{i + 1}" for i in range(55))  # error 303 on every request
ALWAYS_TRUE_65 = " or ".join(f"params_b > -{i + 1}" for i in range(65))
OVERFLOW = "params_b * 1e308 * 1e308"                                   # OverflowError on every answer


@dataclass(frozen=True)
class Hostile:
    """A rule directory holding hostile rules, and where to find things in its hostile file."""

    directory: Path
    text: str

    @property
    def display(self) -> str:
        return f"{self.directory.name}/{FILE}"

    def at(self, needle: str, offset: int = 0) -> str:
        """`file:line:col` of the first occurrence of `needle` in the hostile file, plus `offset` columns."""
        index = self.text.index(needle)
        line = self.text.count("\n", 0, index) + 1
        column = index - (self.text.rfind("\n", 0, index) + 1) + 1 + offset
        return f"{self.display}:{line}:{column}"


def rule_text(rule_id: str, when: str, priority: float = 900, nodes: str | None = None,
              example: str | None = None) -> str:
    then = RECOMMEND.format(nodes=nodes) if nodes else WARN.format(id=rule_id)
    text = RULE.format(id=rule_id, priority=priority, when=when, then=then)
    return text + (f"    example: {example}\n" if example else "")


def hostile_dir(root: Path, name: str, rules: list[str]) -> Hostile:
    """`root/name`: the bundled rules plus FILE holding `rules` (texts from `rule_text`)."""
    directory = Path(root) / name
    if directory.exists():
        shutil.rmtree(directory)
    shutil.copytree(bundled("rules"), directory)
    text = "rules:\n" + "".join(rules)
    (directory / FILE).write_text(text, encoding="utf-8")
    return Hostile(directory, text)


def or_chain(root: Path) -> Hostile:
    return hostile_dir(root, "or-chain", [rule_text("long-or-chain", OR_CHAIN)])


def always_true(root: Path, terms: int) -> Hostile:
    chain = ALWAYS_TRUE_55 if terms == 55 else ALWAYS_TRUE_65 if terms == 65 else \
        " or ".join(f"params_b > -{i + 1}" for i in range(terms))
    return hostile_dir(root, f"always-true-{terms}", [rule_text("always-true-or", chain)])


def overflow(root: Path) -> Hostile:
    return hostile_dir(root, "overflow", [rule_text("overflowing-nodes", "concurrency == 12345", 1, OVERFLOW,
                                                    "{task: inference, model: llama-3.1-70b, concurrency: 12345}")])


@dataclass(frozen=True)
class BadParameter:
    """A copy of the bundled rules (`root/name/rules`) with one parameter's value replaced, and where that
    value stands (`rules/parameters.yaml:line:col`)."""

    directory: Path
    where: str


def bad_parameter(root: Path, name: str, value: str) -> BadParameter:
    """The bundled rules with parameter `name`'s `value:` replaced by the YAML text `value`."""
    directory = Path(root) / f"p-{name}-{abs(hash(value))}" / "rules"
    if directory.exists():
        shutil.rmtree(directory)
    shutil.copytree(bundled("rules"), directory)
    path = directory / "parameters.yaml"
    text = path.read_text(encoding="utf-8")
    start = text.index("value: ", text.index(f"\n  {name}:")) + len("value: ")
    text = text[:start] + value + text[text.index("\n", start):]
    path.write_text(text, encoding="utf-8")
    line = text.count("\n", 0, start) + 1
    column = start - text.rfind("\n", 0, start)
    return BadParameter(directory, f"rules/parameters.yaml:{line}:{column}")
