"""Trial load in a child process: a rule set is checked, built on durable-rules and its rules'
examples answered under time and memory limits before `rules check` passes it or a server takes it.

`rules check` refuses every shape it knows the engine cannot run; this is the defence in depth for
what it does not know. The child (`python -m kentino_expert.sandbox`) limits its own address space
and CPU time (setrlimit, before it reads the rules); the parent kills it, and everything it
started, when the wall-clock limit passes. A hang, a crash, a memory blow-up or an example whose
answer fails is an E207 error; only a set whose trial passed is then built in the serving process.
An example that is answered but does not fire its rule is a W306 warning, like the W301/W302 that
say a rule cannot fire (a moved threshold leaves an example behind; the set still runs).

Limits: KENTINO_SANDBOX_SECONDS (default 20) and KENTINO_SANDBOX_MEMORY_MB (default 1024).
"""
from __future__ import annotations

import atexit
import hashlib
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .answer.pipeline import answer_traced
from .domain.workload import validate_facts
from .engine.registry import DEFAULT, backend_class
from .errors import KentinoError, Location, RuleFileError
from .paths import bundled
from .rulecheck import CheckReport, check_directory
from .ruleset.diagnostics import Diagnostic, ordered
from .sourcefiles import SourceFileError, read_source, yaml_files

_PREFIX = "kentino-sandbox "
# what the allocation that failed may have asked for on top: a pymalloc arena (1 MiB), a malloc heap step
NEAR_LIMIT = 4 * 2**20
_PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)


@dataclass(frozen=True)
class Limits:
    """What a trial load may take: wall-clock seconds (enforced by the parent) and address space."""

    seconds: float = 20.0
    memory_bytes: int = 1 << 30

    @classmethod
    def from_env(cls) -> Limits:
        """Limits from KENTINO_SANDBOX_SECONDS and KENTINO_SANDBOX_MEMORY_MB (defaults for what is unset)."""
        seconds = _positive(os.environ.get("KENTINO_SANDBOX_SECONDS"), cls.seconds)
        megabytes = _positive(os.environ.get("KENTINO_SANDBOX_MEMORY_MB"), cls.memory_bytes / 2**20)
        return cls(seconds, int(megabytes * 2**20))


def _positive(text, default: float) -> float:
    try:
        value = float(text) if text else default
    except ValueError:
        return default
    return value if math.isfinite(value) and value > 0 else default


@dataclass(frozen=True)
class Trial:
    """What a trial load found: every diagnostic (those of `rules check` too) and how long it took."""

    diagnostics: tuple[Diagnostic, ...]
    seconds: float

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]


def trial_load(rules_dir, knowledge_dir=None, limits: Limits | None = None) -> Trial:
    """Check, build and answer the examples of a rule set in a child process under `limits`."""
    limits = limits or Limits.from_env()
    rules = str(Path(rules_dir or bundled("rules")))
    knowledge = str(Path(knowledge_dir or bundled("knowledge")))
    command = [sys.executable, "-m", "kentino_expert.sandbox", rules, knowledge, str(limits.memory_bytes),
               str(math.ceil(limits.seconds) + 1)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_PACKAGE_PARENT, os.environ.get("PYTHONPATH")]))}
    start = time.monotonic()
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env, start_new_session=True)
    _LIVE_CHILDREN.add(child)
    try:
        out, err = child.communicate(timeout=limits.seconds)
        timed_out = at_limit = False
    except subprocess.TimeoutExpired:
        # read before the kill: a child stopped at its address-space limit ran out of memory, even if it never
        # said so (CPython 3.11 spins for good when it cannot allocate the int an except clause needs)
        at_limit = (_address_space(child.pid) or 0) >= limits.memory_bytes - NEAR_LIMIT
        _kill_session(child)
        out, err = child.communicate()
        timed_out = True
    finally:
        if child.poll() is None:  # interrupted (Ctrl+C): nothing the trial started outlives it
            _kill_session(child)
            child.wait()
        _LIVE_CHILDREN.discard(child)
    seconds = time.monotonic() - start
    return Trial(_diagnostics(out, err, child.returncode, timed_out, rules, limits, at_limit), seconds)


# trials running in threads a process may exit without waiting for (a reload given up): killed as it exits
_LIVE_CHILDREN: set = set()


@atexit.register
def _kill_live_children() -> None:
    for child in list(_LIVE_CHILDREN):
        if child.poll() is None:
            _kill_session(child)


def check_in_sandbox(rules_dir=None, knowledge_dir=None, limits: Limits | None = None) -> CheckReport:
    """`rules check` with the trial: every diagnostic of the check, the build and the examples (E207, W306)."""
    return CheckReport(tuple(trial_load(rules_dir, knowledge_dir, limits).diagnostics))


def _kill_session(child) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(child.pid, signal.SIGKILL)  # the child leads its own session (start_new_session)
        else:  # pragma: no cover - no process groups (Windows): the child alone
            child.kill()
    except (ProcessLookupError, PermissionError):
        pass


def _address_space(pid: int) -> int | None:
    """A process's address space in bytes (VmSize), or None where /proc does not say (not Linux, gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _diagnostics(out: bytes, err: bytes, code: int, timed_out: bool, rules: str, limits: Limits,
                 at_limit: bool = False):
    messages = [json.loads(line[len(_PREFIX):]) for line in out.decode("utf-8", "replace").splitlines()
                if line.startswith(_PREFIX)]
    result = next((m["result"] for m in messages if "result" in m), None)
    if result is not None and code == 0 and not timed_out:
        return tuple(_diagnostic(item) for item in result)  # in the child's order: root causes first
    step = next((m for m in reversed(messages) if "step" in m), {"step": "starting"})
    where = Location(**step["where"]) if step.get("where") else Location(rules)
    doing = step.get("doing", step["step"])
    if step["step"] == "memory" or (timed_out and at_limit):
        why = f"ran out of memory while {doing}"
    elif timed_out:
        why = f"did not finish within {limits.seconds:g} s and was stopped while {doing}: the engine hangs on it"
    elif code is not None and code < 0:
        why = f"crashed ({_signal_name(-code)}) while {doing}"
    else:
        last = (err.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
        why = f"failed while {doing} (exit status {code}): {last[:300]}"
    return (Diagnostic(where, "E207", f"in a sandbox ({limits.seconds:g} s, {limits.memory_bytes // 2**20} MiB) "
                       f"the rule set {why}", rule=step.get("rule")),)


def _signal_name(number: int) -> str:
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
    hint = {"SIGXCPU": ", out of CPU time", "SIGKILL": ", killed"}.get(name, "")
    return f"{name}{hint}"


def _diagnostic(item: dict) -> Diagnostic:
    return Diagnostic(Location(item["file"], item["line"], item["column"]), item["code"], item["message"],
                      item["severity"], item.get("rule"), item.get("suggestion"))


# -- one trial per content: a reload of the same files is not tried again -----------------------------

_PASSED: set = set()
_PASSED_LOCK = threading.Lock()


def content_digest(rules_dir, knowledge_dir=None) -> str:
    """sha256 of the names and bytes of every file the trial reads (rules/*.yaml, knowledge/*.yaml), each read as the
    loaders read it (sourcefiles.py). A FIFO, a device or a link leading out is a RuleFileError here, before any
    trial: it is what the loaders would refuse, and a digest that skipped it would pass it as the vetted set."""
    sha = hashlib.sha256()
    for root in (Path(rules_dir or bundled("rules")), Path(knowledge_dir or bundled("knowledge"))):
        sha.update(f"{root.resolve()}\n".encode())
        for path in yaml_files(root):
            try:
                data = read_source(path, root)
            except SourceFileError as exc:
                raise RuleFileError([Diagnostic(Location(str(path)), "E001", str(exc))]) from None
            except OSError as exc:  # gone or unreadable: the trial says so at the file
                sha.update(f"{path.name}: unreadable {exc.errno}\n".encode())
                continue
            sha.update(f"{path.name}:{hashlib.sha256(data).hexdigest()}\n".encode())
    return sha.hexdigest()


def vet(rules_dir, knowledge_dir=None, limits: Limits | None = None) -> None:
    """Raise RuleFileError with the trial's errors unless the rule set passes a trial load (once per
    content and limits in this process)."""
    limits = limits or Limits.from_env()
    key = (content_digest(rules_dir, knowledge_dir), limits)
    with _PASSED_LOCK:
        if key in _PASSED:
            return
    trial = trial_load(rules_dir, knowledge_dir, limits)
    if trial.errors:
        raise RuleFileError(trial.errors)
    with _PASSED_LOCK:
        _PASSED.add(key)


def built(factory):
    """factory(), with a failure that is not a KentinoError (a bug, or a rule set that breaks the
    build in a way nothing checks) turned into a RuleFileError: a reload then refuses it (409)."""
    try:
        return factory()
    except KentinoError:
        raise
    except Exception as exc:
        logging.getLogger("kentino_expert.service").exception("building the expert failed")
        where = Location(str(getattr(factory, "rules_dir", None) or "rules"))
        raise RuleFileError([Diagnostic(where, "E207", f"building the rule set failed: {type(exc).__name__}: {exc}")]
                            ) from None


# -- the child --------------------------------------------------------------------------------------

def _memory_line(doing: str) -> bytes:
    return (_PREFIX + json.dumps({"step": "memory", "doing": doing}) + "\n").encode()


_OUT_OF_MEMORY = [_memory_line("starting")]  # what the child says when it runs out of memory, kept ready


def _say(**message) -> None:
    if "doing" in message:
        _OUT_OF_MEMORY[0] = _memory_line(message["doing"])
    sys.stdout.write(_PREFIX + json.dumps(message, default=str) + "\n")
    sys.stdout.flush()


def _limit_self(memory_bytes: int, cpu_seconds: int) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - no rlimits (Windows): the parent's wall-clock limit remains
        return
    for which, soft, hard in ((resource.RLIMIT_AS, memory_bytes, memory_bytes),
                              (resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1), (resource.RLIMIT_CORE, 0, 0)):
        ceiling = resource.getrlimit(which)[1]  # a process may lower its limits, never raise them
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        resource.setrlimit(which, (soft, hard))


def _child(rules: str, knowledge: str) -> list[Diagnostic]:
    """What the child does: `rules check`, then the engine and the examples if the check passed."""
    _say(step="check", doing="checking the rule files")
    ruleset = []
    report = check_directory(rules, knowledge, keep=ruleset)
    if report.errors or not ruleset:
        return list(report.diagnostics)
    silent = {d.rule for d in report.diagnostics if d.code in ("W301", "W302")}  # already said: cannot fire
    return ordered(list(report.diagnostics) + _answer_examples(*ruleset[0], silent))


def _answer_examples(ruleset, knowledge, silent: set) -> list[Diagnostic]:
    """Build the engine, then answer each rule's example on it: E207 when answering fails, W306 when
    the answer does not fire the rule (unless a W301/W302 already says it cannot fire)."""
    _say(step="build", doing="building the engine")
    engine = backend_class(DEFAULT)(ruleset)
    out = []
    for rule in ruleset.rules:
        if not rule.source.example:
            continue
        where = rule.source.locations.get("example", rule.location)
        _say(step="example", doing=f"answering the example of rule '{rule.id}'", rule=rule.id, where=asdict(where))
        failure, fired = _answer(ruleset, knowledge, engine, rule)
        if failure:
            out.append(Diagnostic(where, "E207", f"example: answering it fails: {failure}", rule=rule.id))
        elif rule.id not in fired and rule.id not in silent:
            out.append(Diagnostic(where, "W306", "example: the rule does not fire on its own example (fired: "
                                  f"{', '.join(fired) or 'nothing'})", "warning", rule=rule.id))
    return out


def _answer(ruleset, knowledge, engine, rule) -> tuple[str | None, list[str]]:
    """(why answering the rule's example fails, or None; the rules fired)."""
    try:
        _, firings, _ = answer_traced(validate_facts(rule.source.example), knowledge, ruleset, engine)
    except KentinoError as exc:
        return str(exc), []
    except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}", []
    return None, [f.rule.id for f in firings]


def main(argv: list[str]) -> int:
    rules, knowledge, memory, cpu = argv[0], argv[1], int(argv[2]), int(argv[3])
    _limit_self(memory, cpu)
    try:
        diagnostics = _child(rules, knowledge)
    except MemoryError:
        os.write(sys.stdout.fileno(), _OUT_OF_MEMORY[0])  # made in advance: no memory is left to make it now
        return 3
    except SystemError as exc:
        # A C extension whose allocation failed under the address-space limit can return NULL without
        # setting MemoryError; CPython then raises this exact SystemError. Anything else is a real crash.
        if "without exception set" not in str(exc):
            raise
        os.write(sys.stdout.fileno(), _OUT_OF_MEMORY[0])
        return 3
    _say(result=[d.as_dict() for d in diagnostics])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
