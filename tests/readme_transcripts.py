"""Reading the README's shell transcripts and replaying them in one bash session, as a person would type them."""
from __future__ import annotations

import contextlib
import functools
import os
import queue
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# Where the README's outputs show this checkout: commands name the directories they read, and the
# checkout's absolute path depends on where it was cloned.
README_CHECKOUT = "/home/you/kentino-expert"
_CHECKOUT_PATH = re.compile(re.escape(str(ROOT)) + r"(?![\w.-])")
# An HTML comment before a block, invisible on the rendered page: leave the block out, or write it to a file.
MARKER = re.compile(r"<!-- transcript: (skip|save (\S+)) -->")
DECISION_ID = re.compile(r"\b[0-9a-f]{32}\b")
# What differs on every run or checkout and says nothing about the behaviour shown: file times, clock
# times, pids, where the repository was cloned.
VOLATILE = [(re.compile(r"^((?:---|\+\+\+) \S+)\t.*$", re.M), r"\1"),
            (re.compile(r'("directory": ")[^"]*(")'), r"\1<path>\2"),
            (re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?"), "<time>"),
            (re.compile(r'("worker_pid": )\d+'), r"\1<pid>")]


@dataclass
class Block:
    """One fenced block: where it starts, its info string, its lines and the marker before it."""
    line: int
    info: str
    lines: list = field(default_factory=list)
    marker: str | None = None
    save_to: str | None = None

    @property
    def body(self) -> str:
        return "\n".join(line for _, line in self.lines)


@dataclass(frozen=True)
class Command:
    """One `$ ` command of a transcript block and the output shown under it."""
    line: int
    text: str
    expected: str


@functools.lru_cache(maxsize=1)
def _readme_text() -> str:
    return README.read_text(encoding="utf-8")


def section(heading: str) -> tuple[str, int]:
    """The text of one `## ` section of the README and the line it starts on (a `## ` line inside a fenced
    block, such as a Markdown report shown, does not end it)."""
    text = _readme_text()
    start = text.index(f"\n{heading}\n") + 1
    end, fenced = len(text), False
    offset = start + len(heading) + 1
    for line in text[offset:].splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("## ") and not fenced:
            end = offset
            break
        offset += len(line)
    return text[start:end], text.count("\n", 0, start) + 1


def fenced_blocks(text: str, first_line: int) -> list[Block]:
    blocks, current, last_text = [], None, ""
    for number, line in enumerate(text.splitlines(), first_line):
        if current is None and line.startswith("```"):
            marker = MARKER.fullmatch(last_text.strip())
            current = Block(number, line[3:].strip(), marker=marker.group(1).split()[0] if marker else None,
                            save_to=marker.group(2) if marker else None)
        elif current is not None and line.startswith("```"):
            blocks.append(current)
            current = None
        elif current is not None:
            current.lines.append((number, line))
        if line.strip():
            last_text = line
    return blocks


def _complete(command: str) -> bool:
    try:
        shlex.split(command)
    except ValueError:  # an open quote: the command goes on on the next line
        return False
    return not command.endswith("\\")


def commands_of(block: Block) -> list[Command]:
    """The block's `$ ` commands (a command runs on while its quotes are open) with their output."""
    commands, current = [], None
    for number, line in block.lines:
        if line.startswith("$ ") and (current is None or current[3]):
            if current:
                commands.append(current)
            current = [number, line[2:], [], _complete(line[2:])]
        elif current is not None and not current[3]:
            current[1] += "\n" + line
            current[3] = _complete(current[1])
        elif current is not None:
            current[2].append(line)
    if current:
        commands.append(current)
    return [Command(number, text, "\n".join(output)) for number, text, output, _ in commands]


def transcript_commands(text: str, first_line: int) -> list[Command]:
    return [c for block in fenced_blocks(text, first_line) if block.info == "" for c in commands_of(block)]


def environment(scratch: Path) -> dict:
    """The caller's environment with `kentino-expert` meaning this interpreter's package, and no KENTINO_DB,
    KENTINO_RULES or KENTINO_KNOWLEDGE (each would change what the commands read)."""
    shim = scratch / "bin" / "kentino-expert"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m kentino_expert \"$@\"\n")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name in ("KENTINO_DB", "KENTINO_RULES", "KENTINO_KNOWLEDGE"):
        env.pop(name, None)
    return env


def without_broken_pipe(printed: str) -> str:
    # a `| head` closes the pipe early; that is the README's own truncation, not a failure
    return re.sub(r"\n?(BrokenPipeError|Exception ignored).*\Z", "", printed.rstrip("\n"), flags=re.S)


def as_shown(printed: str) -> str:
    """What a command printed, with this checkout's path written as the README shows it."""
    return _CHECKOUT_PATH.sub(README_CHECKOUT, printed)


def normalised(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def missing_tool(command: str) -> str | None:
    """Why a command cannot run here (a tool or a git revision it needs is absent), or None."""
    for tool in ("jq", "curl"):
        if re.search(rf"\b{tool}\b", command) and shutil.which(tool) is None:
            return f"{tool} is not installed"
    revision = re.search(r"--base ([0-9a-f]{7,40}[~^0-9]*)", command)
    if revision and not _has_revision(revision.group(1)):
        return f"{revision.group(1)} is not in this checkout's history (a shallow clone, or no git)"
    return None


def _has_revision(revision: str) -> bool:
    try:
        found = subprocess.run(["git", "rev-parse", "--verify", "-q", f"{revision}^{{commit}}"], cwd=ROOT,
                               capture_output=True, timeout=30)
    except OSError:
        return False
    return found.returncode == 0


class ShellSession:
    """One bash process fed command after command: `cd`, `export`, `$?` and background jobs carry over."""

    def __init__(self, scratch: Path, timeout: float = 300):
        self.timeout = timeout
        self._process = subprocess.Popen(["bash"], cwd=ROOT, env=environment(scratch), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                         start_new_session=True)
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.run("__rc=0")

    def _pump(self):
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def run(self, script: str) -> str:
        """Run a script; its stdout and stderr in order, as a terminal shows them."""
        token = uuid.uuid4().hex
        self._process.stdin.write(f"(exit $__rc); {{ {script}\n}} 2>&1 </dev/null; __rc=$?; echo; echo {token}\n")
        self._process.stdin.flush()
        out = []
        while True:
            line = self._lines.get(timeout=self.timeout)
            if line is None or line.rstrip("\n") == token:
                break
            out.append(line)
        return without_broken_pipe("".join(out))

    def close(self):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGTERM)  # the session's background jobs (a server) too
        self._process.wait(timeout=30)


class DecisionIds:
    """Decision ids of the README matched to the ids of the replay, in the order they appear."""

    def __init__(self):
        self.actual_of: dict[str, str] = {}
        self.readme_of: dict[str, str] = {}

    def in_command(self, text: str) -> str:
        return DECISION_ID.sub(lambda m: self.actual_of.get(m.group(0), m.group(0)), text)

    def as_in_readme(self, expected: str, printed: str) -> str:
        shown, got = DECISION_ID.findall(expected), DECISION_ID.findall(printed)
        if len(shown) == len(got):
            for readme, actual in zip(shown, got, strict=True):
                if readme not in self.actual_of and actual not in self.readme_of:
                    self.actual_of[readme], self.readme_of[actual] = actual, readme
        return DECISION_ID.sub(lambda m: self.readme_of.get(m.group(0), m.group(0)), printed)


@dataclass(frozen=True)
class Mismatch:
    """A command whose output is no longer what the README shows, with the output in the README's terms."""
    command: Command
    printed: str

    def __str__(self) -> str:
        return f"README.md:{self.command.line}: `{self.command.text}` now prints:\n{self.printed}"


def replay(sections: list[tuple[str, int]], scratch: Path, substitutions: dict | None = None) -> tuple[list, int]:
    """Run sections' blocks in order in one shell; (the mismatches, the number of commands compared).

    `/tmp` in the README is the user's scratch space: here it is `scratch`. `substitutions` maps
    more literal text (a port) to what the replay uses. Mismatches are reported with both mapped
    back, so that they read (and can be written back) as the README has them.
    """
    mapping = {"/tmp": str(scratch), **(substitutions or {})}
    session, ids, mismatches, compared = ShellSession(scratch), DecisionIds(), [], 0
    try:
        for text, first_line in sections:
            text = re.sub(r"(?<![\w.])/tmp(?=/|\s|$)", str(scratch), text, flags=re.M)
            for old, new in (substitutions or {}).items():
                text = text.replace(old, new)
            for block in fenced_blocks(text, first_line):
                found, count = _run_block(session, ids, block)
                mismatches += [_in_readme_terms(m, mapping) for m in found]
                compared += count
    finally:
        session.close()
    return mismatches, compared


def _in_readme_terms(mismatch: Mismatch, mapping: dict) -> Mismatch:
    def back(text: str) -> str:
        for readme, replay_text in mapping.items():
            text = text.replace(replay_text, readme)
        return text
    command = Command(mismatch.command.line, back(mismatch.command.text), back(mismatch.command.expected))
    return Mismatch(command, back(mismatch.printed))


def _run_block(session: ShellSession, ids: DecisionIds, block: Block) -> tuple[list, int]:
    if block.marker == "skip":
        return [], 0
    if block.marker == "save":
        Path(block.save_to).write_text(block.body + "\n", encoding="utf-8")
    elif block.info == "sh":
        session.run(block.body)
    mismatches, compared = [], 0
    for command in commands_of(block) if block.info == "" else ():
        if missing_tool(command.text):
            continue
        printed = ids.as_in_readme(command.expected, as_shown(session.run(ids.in_command(command.text))))
        compared += 1
        if normalised(printed) != normalised(command.expected):
            mismatches.append(Mismatch(command, printed))
    return mismatches, compared


def run_standalone(commands: list[Command], scratch: Path) -> list:
    """Commands that need no earlier step, each in a fresh shell in the repository."""
    mismatches = []
    for command in commands:
        session = ShellSession(scratch)
        try:
            printed = as_shown(session.run(command.text))
        finally:
            session.close()
        if normalised(printed) != normalised(command.expected):
            mismatches.append(Mismatch(command, printed))
    return mismatches


def write_back(mismatches: list) -> int:
    """Replace each mismatching output in README.md by what the command printed; the number replaced."""
    lines = README.read_text(encoding="utf-8").split("\n")
    for mismatch in sorted(mismatches, key=lambda m: m.command.line, reverse=True):
        first = mismatch.command.line - 1 + mismatch.command.text.count("\n") + 1
        shown = len(mismatch.command.expected.split("\n")) if mismatch.command.expected else 0
        lines[first:first + shown] = mismatch.printed.split("\n") if mismatch.printed else []
    README.write_text("\n".join(lines), encoding="utf-8")
    return len(mismatches)


def free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


QUICK_START = section("## Quick start")
TRACE_FORMAT = section("## The trace format")
PRODUCT_MANAGERS = section("## For product managers")
RULE_LANGUAGE = section("## The rule language (for product managers)")
CHAT_BOTS = section("## For chat bots")
AUDITORS = section("## For auditors")
# commands that need no earlier step: each runs on its own in the repository
STANDALONE = [c for text, line in (QUICK_START, TRACE_FORMAT) for c in transcript_commands(text, line)]


def all_mismatches(scratch: Path) -> list:
    """Every transcript of the README, replayed: the standalone commands and the three sessions."""
    port = free_port()
    found = run_standalone(STANDALONE, scratch / "standalone")
    for name, sections, extra in (("pm", [PRODUCT_MANAGERS], {}), ("rules", [RULE_LANGUAGE], {}),
                                  ("served", [CHAT_BOTS, AUDITORS],
                                   {"localhost:8765": f"localhost:{port}", "--port 8765": f"--port {port}"})):
        found += replay(sections, scratch / name, extra)[0]
    return found


if __name__ == "__main__":
    # After a change that moves the answers: `python3 tests/readme_transcripts.py` writes what every
    # README command prints now in place of what it shows; review the result with `git diff README.md`.
    import tempfile
    with tempfile.TemporaryDirectory() as scratch:
        for name in ("standalone", "pm", "rules", "served"):
            (Path(scratch) / name).mkdir()
        mismatches = all_mismatches(Path(scratch))
    for mismatch in mismatches:
        print(f"README.md:{mismatch.command.line}: {mismatch.command.text.splitlines()[0]}")
    print(f"{write_back(mismatches)} output(s) rewritten in README.md")
