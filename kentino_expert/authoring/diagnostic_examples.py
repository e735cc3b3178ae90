"""Each diagnostic code's example, made in a copy of the bundled rules and knowledge and checked: what
`rules check` says about it (the generated diagnostics page shows it; the tests hold every code to it)."""
from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from ..paths import bundled
from ..rulecheck import check_directory
from ..ruleset.diagnostic_code import DiagnosticCode
from ..ruleset.diagnostics import Diagnostic
from ..sandbox import Limits, check_in_sandbox


def _without_entry(text: str, name: str) -> str:
    """The text less the entry `name:` of its top-level mapping (its line and the lines indented under it)."""
    lines, out, skipping = text.splitlines(keepends=True), [], False
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        if re.match(rf"^ {{1,2}}{re.escape(name)}:", line):
            skipping = True
            continue
        if skipping and (not line.strip() or indent > 2):
            continue
        skipping = False
        out.append(line)
    if len(out) == len(lines):
        raise ValueError(f"no entry '{name}' to leave out")
    return "".join(out)


def _joined(text: str, example: str, where: str) -> str:
    """The file's text with the example's entries joining its top-level mapping: the example's first line
    is that mapping's key (`parameters:`), which must be the file's last top-level key."""
    head, _, entries = example.partition("\n")
    keys = re.findall(r"^([A-Za-z_]\w*:)", text, re.M)
    if not keys or keys[-1] != head.strip():
        raise ValueError(f"the example for {where} must start with its last top-level key, not {head!r}")
    return text.rstrip("\n") + "\n" + entries


# files whose top-level mapping an example's entries join; an example for any other file is the whole file
JOINED_FILES = ("parameters.yaml", "facts.yaml", "heuristics.yaml", "prices.yaml")


def write_into(project: Path, file: str, text: str, without: str = "", replacing: str = "") -> None:
    """Put `text` into `project`'s `file`: a new file, or one not in JOINED_FILES (`rules/selection.yaml`),
    as it is; one of JOINED_FILES gains its entries (its first line is the file's top-level key). With
    `without`, that entry is left out of `file` instead; with `replacing`, that entry gives way to `text`'s."""
    target = project / file
    if without:
        target.write_text(_without_entry(target.read_text(encoding="utf-8"), without), encoding="utf-8")
    elif replacing:
        rest = _without_entry(target.read_text(encoding="utf-8"), replacing)
        target.write_text(_joined(rest, text, file), encoding="utf-8")
    elif target.exists() and target.name in JOINED_FILES:
        target.write_text(_joined(target.read_text(encoding="utf-8"), text, file), encoding="utf-8")
    else:
        target.write_text(text, encoding="utf-8")


def copy_project(project: Path) -> Path:
    """A copy of the bundled rules/ and knowledge/ under `project`; its rules/."""
    for name in ("rules", "knowledge"):
        shutil.copytree(bundled(name), project / name)
    return project / "rules"


def make_example(code: DiagnosticCode, project: Path) -> Path:
    """A copy of the bundled rules/ and knowledge/ under `project` with `code`'s example in it; the rules."""
    rules = copy_project(project)
    write_into(project, code.file, code.expanded, code.without, code.replacing)
    return rules


def _limits(environment: str) -> Limits:
    """The sandbox's limits, with the example's `NAME=value` (the defaults otherwise, whatever this
    process's environment says: an example says the same everywhere)."""
    name, _, value = environment.partition("=")
    if name == "KENTINO_SANDBOX_SECONDS":
        return Limits(seconds=float(value))
    if name == "KENTINO_SANDBOX_MEMORY_MB":
        return Limits(memory_bytes=int(float(value) * 2**20))
    if environment:
        raise ValueError(f"an example's environment sets a sandbox limit, not {name!r}")
    return Limits()


def example_diagnostics(code: DiagnosticCode) -> tuple[Diagnostic, ...]:
    """Every diagnostic `rules check` gives on `code`'s example (its sandbox trial too, for a trial code)."""
    with tempfile.TemporaryDirectory(prefix="kentino-example-") as scratch:
        rules = make_example(code, Path(scratch))
        knowledge = rules.parent / "knowledge"
        report = check_in_sandbox(rules, knowledge, _limits(code.environment)) if code.trial else \
            check_directory(rules, knowledge)
    prefix = f"{Path(scratch)}/"  # a place in the copy reads as a place in the project
    return tuple(replace(d, location=replace(d.location, file=d.location.file.removeprefix(prefix)))
                 for d in report.diagnostics)
