"""What a diagnostic code is: its id, severity, summary, explanation, a minimal bad example and the fix."""
from __future__ import annotations

import re
from dataclasses import dataclass

CODE_PATTERN = re.compile(r"^[EW][0-9]{3}$")


@dataclass(frozen=True)
class DiagnosticCode:
    """One code `rules check` gives, documented (docs/diagnostics.md and `rules check --explain CODE`).

    `example` is a minimal bad YAML text as written in `file`, a path in a copy of the project: a new
    rule file (`rules/example.yaml`), or an existing file whose top-level mapping the example's entries
    join (`rules/parameters.yaml`, `rules/facts.yaml`, `knowledge/heuristics.yaml`); or, with `without`,
    the entry of `file` whose absence the example shows, or with `replacing`, the entry of `file` the
    example's entries take the place of; `environment` (`NAME=value`) is set while the
    example is checked (authoring/diagnostic_examples.py makes each example in a copy of the project
    and checks it). An example past a size bound is too long to show: its `…` stands for `repeat` written
    `times` times (`{n}` in it counting from 1), as `expanded` makes it. `trial` says the code is found by
    answering the examples in the sandbox; `schema` that the editor schema (docs/schema/rules.schema.json)
    refuses the example too; `root` that the code is a root cause: the checks that would blame other files or
    rules for it do not run.
    """

    id: str
    severity: str  # "error" fails `rules check`; "warning" only with --strict
    summary: str
    explanation: str
    example: str
    fix: str
    file: str = "rules/example.yaml"
    without: str = ""
    replacing: str = ""
    environment: str = ""
    trial: bool = False
    schema: bool = False
    root: bool = False
    repeat: str = ""
    times: int = 0

    @property
    def expanded(self) -> str:
        """The example as it is checked: its `…` replaced by `repeat` written `times` times."""
        if not self.repeat:
            return self.example
        return self.example.replace("\u2026", "".join(self.repeat.replace("{n}", str(n))
                                                     for n in range(1, self.times + 1)), 1)

    @property
    def setup(self) -> str:
        """In words, what the example is besides its text ('' when it is its text alone)."""
        if self.environment:
            return f"`rules check` run with `{self.environment}`"
        if self.repeat:
            counting = ", `{n}` counting from 1" if "{n}" in self.repeat else ""
            return f"`…` standing for `{self.repeat.rstrip()}` written {self.times:,} times{counting}"
        if self.replacing:
            return f"{self.file} with its `{self.replacing}` entry as shown"
        return f"{self.file} without its `{self.without}` entry" if self.without else ""

    @property
    def explanation_in_full(self) -> str:
        """The explanation, and what a root cause means for the other checks."""
        root = (" It is a root cause: `rules check` lists it first, and the checks that would blame other "
                "files or rules for it wait until it is fixed." if self.root else "")
        return self.explanation + root

    def __post_init__(self):
        if not CODE_PATTERN.match(self.id) or self.severity != ("error" if self.id[0] == "E" else "warning"):
            raise ValueError(f"diagnostic code {self.id!r}: an id like E123 (error) or W123 (warning)")
        if bool(self.repeat) != (self.example.count("\u2026") == 1) or bool(self.repeat) != (self.times > 0):
            raise ValueError(f"diagnostic code {self.id!r}: `repeat` and `times` go with one `…` in the example")
