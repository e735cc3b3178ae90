"""The README's transcripts (quick start, trace format, the product manager's sessions) are what the commands print today."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# An HTML comment before a block, invisible on the rendered page: leave the block out, or write it to a file.
MARKER = re.compile(r"<!-- transcript: (skip|save (\S+)) -->")
TIMESTAMP = re.compile(r"^((?:---|\+\+\+) \S+)\t.*$", re.M)  # `diff -ru` headers carry file times


@dataclass
class Block:
    """One fenced block: where it starts, its info string, its lines and the marker before it."""
    line: int
    info: str
    lines: list = field(default_factory=list)
    marker: str | None = None
    save_to: str | None = None


@dataclass(frozen=True)
class Command:
    """One `$ ` command of a transcript block and the output shown under it."""
    line: int
    text: str
    expected: str


def section(text: str, heading: str) -> tuple[str, int]:
    """The text of one `## ` section and the README line it starts on."""
    start = text.index(f"\n{heading}\n") + 1
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end != -1 else len(text)], text.count("\n", 0, start) + 1


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


def _shim_dir(where: Path) -> Path:
    """A PATH entry whose `kentino-expert` is this interpreter's package (installed or not)."""
    shim = where / "bin" / "kentino-expert"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m kentino_expert \"$@\"\n")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    return shim.parent


def _environment(scratch: Path) -> dict:
    env = {**os.environ, "PATH": f"{_shim_dir(scratch)}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("KENTINO_DB", None)
    return env


def _without_broken_pipe(printed: str) -> str:
    # a `| head` closes the pipe early; that is the README's own truncation, not a failure
    return re.sub(r"\n?(BrokenPipeError|Exception ignored).*\Z", "", printed.rstrip("\n"), flags=re.S)


def run_shell(script: str, scratch: Path) -> str:
    """Run a script in the repository as a terminal would show it (stderr and stdout in order)."""
    result = subprocess.run(["bash", "-c", f"{{ {script}\n}} 2>&1"], cwd=ROOT, env=_environment(scratch),
                            stdout=subprocess.PIPE, text=True, timeout=300)
    return _without_broken_pipe(result.stdout)


def _missing_tool(command: str) -> str | None:
    if re.search(r"\bjq\b", command) and shutil.which("jq") is None:
        return "jq is not installed"
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


SEPARATOR = "@@kentino-readme-command@@"


def session_script(blocks: list[Block]) -> tuple[str, list[Command]]:
    """One bash script for a whole section, as typed into one terminal (`cd`, `$?` carry over).

    Each compared command's output follows a separator line; `sh` blocks run silently; a `save`
    block is written with a here-document.
    """
    parts, commands = ["__rc=0"], []
    for block in blocks:
        body = "\n".join(line for _, line in block.lines)
        if block.marker == "skip":
            continue
        if block.marker == "save":
            parts.append(f"cat > {shlex.quote(block.save_to)} <<'__KENTINO_README__'\n{body}\n__KENTINO_README__")
        elif block.info == "sh":
            parts.append(f"{{ {body}\n}} >/dev/null 2>&1")
        for command in commands_of(block) if block.info == "" else ():
            if _missing_tool(command.text):
                continue
            parts.append(f"printf '\\n{SEPARATOR}\\n'; (exit $__rc); {{ {command.text}\n}} 2>&1; __rc=$?")
            commands.append(command)
    return "\n".join(parts) + "\n", commands


def replay_session(text: str, first_line: int, scratch: Path) -> tuple[list[str], int]:
    """Run a section's blocks in order; (one message per command whose output differs, commands compared)."""
    # /tmp in the README is the user's scratch space: here it is this test's own directory
    text = re.sub(r"(?<![\w.])/tmp(?=/|\s|$)", str(scratch), text, flags=re.M)
    script, commands = session_script(fenced_blocks(text, first_line))
    result = subprocess.run(["bash", "-c", script], cwd=ROOT, env=_environment(scratch), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=600)
    outputs = result.stdout.split(f"\n{SEPARATOR}\n")[1:]
    mismatches = []
    for index, command in enumerate(commands):
        printed = TIMESTAMP.sub(r"\1", _without_broken_pipe(outputs[index] if index < len(outputs) else ""))
        if printed != TIMESTAMP.sub(r"\1", command.expected):
            mismatches.append(f"README.md:{command.line}: `{command.text}` now prints:\n{printed}")
    return mismatches, len(commands)


QUICK_START, QUICK_START_LINE = section(README.read_text(encoding="utf-8"), "## Quick start")
PM_SESSION, PM_SESSION_LINE = section(README.read_text(encoding="utf-8"), "## For product managers")
RULE_LANGUAGE, RULE_LANGUAGE_LINE = section(README.read_text(encoding="utf-8"), "## The rule language (for product managers)")
TRACE_FORMAT, TRACE_FORMAT_LINE = section(README.read_text(encoding="utf-8"), "## The trace format")
# commands that need no earlier step: each runs on its own in the repository
QUICK_COMMANDS = [c for text, line in ((QUICK_START, QUICK_START_LINE), (TRACE_FORMAT, TRACE_FORMAT_LINE))
                  for b in fenced_blocks(text, line) if b.info == "" for c in commands_of(b)]


class TestTranscriptReader:
    """The reader finds commands, their output, multi-line commands and markers."""

    def test_multi_line_command_and_markers(self):
        """A quoted command spanning lines is one command; a marker applies to the next block only."""
        text = ("<!-- transcript: save /tmp/pm-x.yaml -->\n\n```yaml\na: 1\n```\n\n```\n"
                "$ python3 -c '\nprint(1)'\n1\n$ echo hi\nhi\n```\n")
        saved, shown = fenced_blocks(text, 1)
        assert (saved.marker, saved.save_to, shown.marker) == ("save", "/tmp/pm-x.yaml", None)
        assert commands_of(shown) == [Command(8, "python3 -c '\nprint(1)'", "1"), Command(11, "echo hi", "hi")]

    def test_the_sections_hold_transcripts(self):
        """Both sections hold the commands the README promises."""
        shown = [c.text for c in QUICK_COMMANDS]
        assert any(c.startswith("kentino-expert recommend examples/") for c in shown) and len(shown) >= 5
        pm = [c.text for b in fenced_blocks(PM_SESSION, PM_SESSION_LINE) for c in commands_of(b)]
        assert any("rules check" in c for c in pm) and any("rules diff" in c for c in pm)
        assert any(" test " in c for c in pm) and len(pm) >= 15


@pytest.mark.parametrize("command", QUICK_COMMANDS, ids=[f"README.md:{c.line}" for c in QUICK_COMMANDS])
def test_standalone_command_prints_what_the_readme_shows(tmp_path, command):
    """Each quick-start and trace-format command, run in the repository, prints exactly the lines shown under it."""
    printed = run_shell(command.text, tmp_path)
    assert printed == command.expected, f"README.md:{command.line}: `{command.text}` now prints:\n{printed}"


def test_product_manager_session_replays(tmp_path):
    """The worked session (edit a copy, check, test, diff, regenerate), replayed in order on scratch copies."""
    mismatches, compared = replay_session(PM_SESSION, PM_SESSION_LINE, tmp_path)
    assert compared >= 15, f"only {compared} commands were compared"
    assert not mismatches, "\n\n".join(mismatches)


def test_new_rule_worked_example_replays(tmp_path):
    """The rule language's worked example (a new warning written only in YAML) prints what the README shows."""
    mismatches, compared = replay_session(RULE_LANGUAGE, RULE_LANGUAGE_LINE, tmp_path)
    assert compared >= 6, f"only {compared} commands were compared"
    assert not mismatches, "\n\n".join(mismatches)
