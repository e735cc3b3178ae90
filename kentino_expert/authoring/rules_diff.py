"""Impact of a rule change: evaluate the same workloads under two rule sets and list what changed."""
from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..domain.quote import QUOTE_FIGURES
from ..domain.vocabulary import INFERENCE_TASKS, TASKS
from ..errors import InputError, KentinoError, Location
from .scenarios import Scenario
from .value_changes import change_text

GRID_MODELS = ("llama-3.1-8b", "qwen2.5-32b", "llama-3.1-70b", "llama-3.1-405b", "deepseek-v3")
GRID_CARDS = ("rtx-pro-6000", "rtx-5090", "l40", "l4")
GRID_CONCURRENCY = (8, 64, 256)
# multi-tenant demand for inference (at 64 concurrent requests): a moderate and a hyperscale load,
# so that throughput and hyperscale thresholds move answers on the grid too
GRID_DEMAND = ({"tenancy": "multi", "qps": 150}, {"tenancy": "multi", "qps": 150_000})


@dataclass(frozen=True)
class Change:
    """One workload whose answer differs between the base and the new rule set."""

    name: str
    old: tuple | str
    new: tuple | str
    rules_changed: tuple[str, ...]
    also_changed: tuple[str, ...] = ()  # the rest of the plan, the summary and the warnings (see _details)
    values: tuple[tuple[object, object], ...] = ()  # (old, new) of each of also_changed, in its order

    def as_dict(self) -> dict:
        card = _card(self.old) != _card(self.new)  # the card is shown when the build search moved it
        return {"scenario": self.name, "old": _show(self.old, card), "new": _show(self.new, card),
                "rules_changed": list(self.rules_changed), "also_changed": list(self.also_changed),
                "changed_values": {name: {"old": old, "new": new}
                                   for name, (old, new) in zip(self.also_changed, self.values, strict=True)}}

    def why(self) -> str:
        """The rules whose firing changed, then what else changed, old and new: `rules: a, b; also: tp 2 -> 4`."""
        shown = [change_text(name, old, new) for name, (old, new) in zip(self.also_changed, self.values, strict=True)]
        also = f"; also: {', '.join(shown)}" if shown else ""
        return f"rules: {', '.join(self.rules_changed) or '-'}{also}"


def _card(answer):
    return None if isinstance(answer, str) else answer[3]


def _show(answer, card: bool = False) -> str:
    if isinstance(answer, str):
        return answer
    kind, nodes, precision, gpu = answer
    return f"{kind}/{nodes}/{precision}" + (f" on {gpu}" if card else "")


def grid_scenarios() -> list[Scenario]:
    """Tasks x model sizes x cards, and no card named (the build search's pick) x concurrency (and multi-tenant
    demand for inference): the default workload set of `rules diff`."""
    out = []
    for task in TASKS:
        for model in GRID_MODELS:
            for card in (*GRID_CARDS, None):  # None: no card named, the build search picks one (selection.yaml)
                levels = GRID_CONCURRENCY if task in INFERENCE_TASKS else (None,)
                variants = [{"concurrency": c} if c else {} for c in levels]
                if task == "inference":
                    variants += [{"concurrency": 64, **demand} for demand in GRID_DEMAND]
                for extra in variants:
                    facts = {"task": task, "model": model, **({"gpu": card} if card else {}), **extra}
                    name = " ".join(str(v) for v in (task, model, card or "any-card", *extra.values()))
                    out.append(Scenario(name, facts, {}, Location("<grid>")))
    return out


@contextmanager
def checkout_rules(base: str, rules_dir: Path):
    """A directory holding the base rules: `base` itself, or rules/ at a git revision extracted into
    a temporary directory that is removed when the block ends, however it ends."""
    if not base.strip():  # Path("") is the current directory: an unset variable would compare with ./
        raise InputError("--base is empty: give a directory of rules or a git revision", field="base")
    if Path(base).is_dir():
        yield Path(base)
        return
    repo, relative = _repository_of(rules_dir)
    commit = _commit_of(base, Path(repo))
    # --end-of-options: neither the commit nor the path can be read as an option (--output=...)
    archive = _git_bytes(["--literal-pathspecs", "archive", "--format=tar", "--end-of-options",
                          commit, str(relative)], Path(repo))
    with tempfile.TemporaryDirectory(prefix="kentino-base-") as target:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(target, filter="data")
        yield Path(target) / relative


def _commit_of(base: str, repo: Path) -> str:
    """The commit `base` names in `repo`; a value that looks like an option never reaches git."""
    if base.startswith("-"):
        raise InputError(f"--base '{base}' is neither a directory nor a git revision (a revision cannot start "
                         "with '-')", field="base")
    try:
        return _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{base}^{{commit}}"], repo).strip()
    except InputError:
        raise InputError(f"--base '{base}' is neither a directory nor a git revision in {repo}", field="base") from None


def _repository_of(rules_dir: Path) -> tuple[str, Path]:
    """(repository, rules path in it): the one holding `rules_dir`, else the current directory's rules/.

    The second case is a copy under /tmp compared with a revision of the repository one works in.
    """
    try:
        repo = _git(["rev-parse", "--show-toplevel"], rules_dir).strip()
        return repo, rules_dir.resolve().relative_to(Path(repo).resolve())
    except InputError:
        repo = _git(["rev-parse", "--show-toplevel"], Path.cwd()).strip()
        return repo, Path("rules")


def _git_bytes(args, cwd: Path) -> bytes:
    try:
        result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        detail = (getattr(exc, "stderr", b"") or b"").decode(errors="replace")
        detail = "; ".join(line.strip() for line in detail.splitlines() if line.strip()) or str(exc)
        raise InputError(f"--base is neither a directory nor a git revision here: {detail}", field="base") from None
    return result.stdout


def _git(args, cwd: Path) -> str:
    return _git_bytes(args, cwd).decode()


def _answer(expert, facts):
    try:
        answer = expert.recommend(facts)
    except KentinoError as exc:
        return f"error: {exc}", (), {}
    rec = answer.recommendation
    return (rec.kind, rec.nodes, rec.precision, rec.gpu), tuple(step.rule for step in answer.trace), _details(answer)


def _details(answer) -> dict:
    """What an answer says beyond kind/nodes/precision/card: its status, the plan's other fields, the summary,
    its quote's price, power and price of the work, each default assumed (value and why), each alternative build
    and each warning's message, by the name a changed one is listed under."""
    rec = answer.recommendation
    details = {"status": answer.status, "gpus_per_node": rec.gpus_per_node, "replicas": rec.replicas,
               "interconnect": rec.interconnect, **rec.parallelism.model_dump(), "summary": rec.summary}
    # the quote (rules/prices.yaml): a price changed in the list moves these and nothing else
    details.update((name, answer.figures[name].value) for name in QUOTE_FIGURES if name in answer.figures)
    details.update((f"assumption {a.fact}", {"value": a.value, "why": a.why}) for a in answer.assumptions)
    # each alternative build as listed (not its `why`: the rules' own sentences, compared through the rules; nor
    # its bill of materials: its price figures say what moved)
    details.update((f"alternative {a.gpu} x{a.gpus_per_node}", a.model_dump(exclude={"why", "bill_of_materials"}))
                   for a in answer.alternatives)
    details.update((f"warning {w.code}", {"message": w.message, "rule": w.rule}) for w in answer.warnings)
    return details


def _also_changed(old: dict, new: dict, rules_changed) -> tuple[str, ...]:
    """The details that differ, without what the rules whose firing changed explain: the summary (it quotes the
    deciding rule) and the warnings those rules give or no longer give."""
    def explained(key):
        given_by = {side[key]["rule"] for side in (old, new) if key.startswith("warning ") and key in side}
        return (key == "summary" and rules_changed) or given_by & set(rules_changed)
    return tuple(key for key in {**old, **new} if old.get(key) != new.get(key) and not explained(key))


def diff(old_expert, new_expert, scenarios, progress=None) -> list[Change]:
    """Every scenario whose answer (kind, nodes, precision, card, the rest of the plan, the summary, the
    warnings) or whose firing rules differ."""
    changes = []
    for index, scenario in enumerate(scenarios):
        old, old_rules, old_details = _answer(old_expert, scenario.facts)
        new, new_rules, new_details = _answer(new_expert, scenario.facts)
        changed = tuple(sorted(set(old_rules) ^ set(new_rules)))
        # what else differs is listed when the line's kind/nodes/precision/card look the same (a moved plan
        # changes its other fields, its summary and the figures its warnings quote anyway)
        also = _also_changed(old_details, new_details, changed) if old == new else ()
        if old != new or changed or also:
            values = tuple((old_details.get(key), new_details.get(key)) for key in also)
            changes.append(Change(scenario.name, old, new, changed, also, values))
        if progress:
            progress(index + 1, len(scenarios))
    return changes


def to_markdown(changes, total: int, old_digest: str, new_digest: str) -> str:
    lines = [f"### Rule change impact: {len(changes)} of {total} answers changed", "",
             f"base `{old_digest[:16]}` -> new `{new_digest[:16]}`", ""]
    if changes:
        lines += ["| scenario | old | new | rules whose firing changed |", "|---|---|---|---|"]
        lines += [f"| {row['scenario']} | {row['old']} | {row['new']} | "
                  f"{change.why().removeprefix('rules: ').replace('|', chr(92) + '|')} |"
                  for change, row in ((c, c.as_dict()) for c in changes)]
    return "\n".join(lines) + "\n"


def diff_summary(changes, total: int) -> str:
    """`N of M answers changed (...)`: in kind/nodes/precision/card, else in the rules that decided, else
    (named only when there are some) in the rest of the answer alone (_details: status, plan fields, summary,
    assumptions, warnings)."""
    moved = sum(1 for c in changes if c.old != c.new)
    ruled = sum(1 for c in changes if c.old == c.new and c.rules_changed)
    rest = len(changes) - moved - ruled
    text = (f"{len(changes)} of {total} answers changed ({moved} in kind/nodes/precision/card, "
            f"{ruled} in the rules that decided")
    return text + (f", {rest} only in the rest of the answer)" if rest else ")")
