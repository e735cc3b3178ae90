"""Reading the shell transcripts of the README and the guides (docs/*.md) and replaying them, one bash per session,
as a person would type them."""
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

from ports import free_port

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# Every document whose transcripts are replayed: the README and each guide in docs/.
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
# Where the README's outputs show this checkout: commands name the directories they read, and the
# checkout's absolute path depends on where it was cloned.
README_CHECKOUT = "/home/you/kentino-expert"
_CHECKOUT_PATH = re.compile(re.escape(str(ROOT)) + r"(?![\w.-])")
# An HTML comment before a block, invisible on the rendered page: leave the block out, or write it to a file.
MARKER = re.compile(r"<!-- transcript: (skip|save (\S+)) -->")
DECISION_ID = re.compile(r"\b[0-9a-f]{32}\b")
# What differs on every run or checkout and says nothing about the behaviour shown: file times, clock
# times, pids, instance labels (host names, ports), where the repository was cloned.
VOLATILE = [(re.compile(r"^((?:---|\+\+\+) \S+)\t.*$", re.M), r"\1"),
            (re.compile(r'("directory": ")[^"]*(")'), r"\1<path>\2"),
            (re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?"), "<time>"),
            (re.compile(r'("worker_pid": )\d+'), r"\1<pid>"),
            (re.compile(r'("instance": ")[^"]*(")'), r"\1<host:port>\2")]  # serve's default: HOSTNAME:PORT


@dataclass
class Block:
    """One fenced block: where it starts, its info string, its lines and the marker before it."""
    line: int
    info: str
    lines: list = field(default_factory=list)
    marker: str | None = None
    save_to: str | None = None
    document: str = "README.md"

    @property
    def body(self) -> str:
        return "\n".join(line for _, line in self.lines)


@dataclass(frozen=True)
class Command:
    """One `$ ` command of a transcript block and the output shown under it, and where it is shown."""
    line: int
    text: str
    expected: str
    document: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"


@functools.cache
def _text_of(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def relative(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


def section(heading: str, path: Path = README) -> tuple[str, int]:
    """The text of one `## ` section of a document and the line it starts on (a `## ` line inside a fenced
    block, such as a Markdown report shown, does not end it)."""
    text = _text_of(path)
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


@dataclass(frozen=True)
class Part:
    """Text of a document to replay: the whole document, or one section of it."""
    document: str
    text: str
    first_line: int = 1


def whole(path: Path) -> Part:
    return Part(relative(path), _text_of(path))


def fenced_blocks(text: str, first_line: int, document: str = "README.md") -> list[Block]:
    blocks, current, last_text = [], None, ""
    for number, line in enumerate(text.splitlines(), first_line):
        if current is None and line.startswith("```"):
            marker = MARKER.fullmatch(last_text.strip())
            current = Block(number, line[3:].strip(), marker=marker.group(1).split()[0] if marker else None,
                            save_to=marker.group(2) if marker else None, document=document)
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
    return [Command(number, text, "\n".join(output), block.document) for number, text, output, _ in commands]


def transcript_commands(part: Part) -> list[Command]:
    return [c for block in fenced_blocks(part.text, part.first_line, part.document) if block.info == ""
            for c in commands_of(block)]


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
    """A command and what it prints now, in the document's terms (a mismatch when that is not what is shown)."""
    command: Command
    printed: str

    @property
    def stale(self) -> bool:
        return normalised(self.printed) != normalised(self.command.expected)

    def __str__(self) -> str:
        return f"{self.command.where}: `{self.command.text}` now prints:\n{self.printed}"


def replay(parts: list[Part], scratch: Path, substitutions: dict | None = None,
           every: bool = False) -> tuple[list, int]:
    """Run the parts' blocks in order in one shell; (the mismatches, the number of commands compared).

    `/tmp` in a document is the user's scratch space: here it is `scratch`. `substitutions` maps
    more literal text (a port) to what the replay uses. Mismatches are reported with both mapped
    back, so that they read (and can be written back) as the document has them. With `every`, every
    command's output is returned, stale or not.
    """
    mapping = {"/tmp": str(scratch), **(substitutions or {})}
    session, ids, mismatches, compared = ShellSession(scratch), DecisionIds(), [], 0
    try:
        for part in parts:
            text = re.sub(r"(?<![\w.])/tmp(?=/|\s|$)", str(scratch), part.text, flags=re.M)
            for old, new in (substitutions or {}).items():
                text = text.replace(old, new)
            for block in fenced_blocks(text, part.first_line, part.document):
                found, count = _run_block(session, ids, block)
                mismatches += [_in_readme_terms(m, mapping) for m in found if every or m.stale]
                compared += count
    finally:
        session.close()
    return mismatches, compared


def _in_readme_terms(mismatch: Mismatch, mapping: dict) -> Mismatch:
    def back(text: str) -> str:
        for readme, replay_text in mapping.items():
            text = text.replace(replay_text, readme)
        return text
    command = Command(mismatch.command.line, back(mismatch.command.text), back(mismatch.command.expected),
                      mismatch.command.document)
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
        mismatches.append(Mismatch(command, printed))  # the caller keeps the stale ones
    return mismatches, compared


def run_standalone(commands: list[Command], scratch: Path, every: bool = False) -> list:
    """Commands that need no earlier step, each in a fresh shell in the repository; the mismatches."""
    found = []
    for command in commands:
        if missing_tool(command.text):
            continue
        session = ShellSession(scratch)
        try:
            printed = as_shown(session.run(command.text))
        finally:
            session.close()
        result = Mismatch(command, printed)
        if every or result.stale:
            found.append(result)
    return found


def write_back(mismatches: list) -> int:
    """Replace each mismatching output in its document by what the command printed; the number replaced."""
    for document in sorted({m.command.document for m in mismatches}):
        path = ROOT / document
        lines = path.read_text(encoding="utf-8").split("\n")
        mine = [m for m in mismatches if m.command.document == document]
        for mismatch in sorted(mine, key=lambda m: m.command.line, reverse=True):
            first = mismatch.command.line - 1 + mismatch.command.text.count("\n") + 1
            shown = len(mismatch.command.expected.split("\n")) if mismatch.command.expected else 0
            lines[first:first + shown] = mismatch.printed.split("\n") if mismatch.printed else []
        path.write_text("\n".join(lines), encoding="utf-8")
    return len(mismatches)


@dataclass(frozen=True)
class Session:
    """Documents replayed in order in one bash: later commands rely on what earlier ones did. `port`, when
    set, is the port the documents show for a server, replaced by a free one in the replay."""
    name: str
    documents: tuple[str, ...]
    port: int | None = None

    def parts(self) -> list[Part]:
        return [whole(ROOT / document) for document in self.documents]

    def substitutions(self, port: int) -> dict:
        if self.port is None:
            return {}
        return {f"localhost:{self.port}": f"localhost:{port}", f"--port {self.port}": f"--port {port}"}


# The worked sessions; every other document's commands need no earlier step and each runs on its own.
SESSIONS = (Session("pm", ("docs/product-managers.md",)),
            Session("rules", ("docs/rule-language.md",)),
            Session("served", ("docs/chat-bots.md", "docs/auditors.md", "docs/operations.md"), port=8765))
IN_SESSIONS = {document for session in SESSIONS for document in session.documents}
STANDALONE_DOCUMENTS = [path for path in DOCUMENTS if relative(path) not in IN_SESSIONS]
STANDALONE = [c for path in STANDALONE_DOCUMENTS for c in transcript_commands(whole(path))]


def all_mismatches(scratch: Path, every: bool = False) -> list:
    """Every transcript of every document, replayed: the standalone commands and each session."""
    (scratch / "standalone").mkdir(exist_ok=True)
    found = run_standalone(STANDALONE, scratch / "standalone", every)
    for session in SESSIONS:
        (scratch / session.name).mkdir(exist_ok=True)
        found += replay(session.parts(), scratch / session.name, session.substitutions(free_port()), every)[0]
    return found


if __name__ == "__main__":
    # After a change that moves the answers: `python3 tests/readme_transcripts.py` writes what every
    # command prints now in place of what a document shows; review the result with `git diff`.
    # `--all` rewrites every output, stale or not, so that the times, pids and digests shown all come
    # from one run and agree with each other.
    import tempfile
    every = "--all" in sys.argv[1:]
    with tempfile.TemporaryDirectory() as scratch:
        mismatches = all_mismatches(Path(scratch), every)
    for mismatch in mismatches:
        print(f"{mismatch.command.where}: {mismatch.command.text.splitlines()[0]}")
    documents = len({m.command.document for m in mismatches})
    print(f"{write_back(mismatches)} output(s) rewritten in {documents} document(s)")
