"""The README's transcripts are what the commands print today (quick start, trace format, sessions)."""
from __future__ import annotations

import pytest

from readme_transcripts import (
    AUDITORS,
    CHAT_BOTS,
    PRODUCT_MANAGERS,
    RULE_LANGUAGE,
    STANDALONE,
    Command,
    ShellSession,
    commands_of,
    fenced_blocks,
    free_port,
    missing_tool,
    normalised,
    replay,
    run_standalone,
    transcript_commands,
)


class TestTranscriptReader:
    """The reader finds commands, their output, multi-line commands and markers."""

    def test_multi_line_command_and_markers(self):
        """A quoted command spanning lines is one command; a marker applies to the next block only."""
        text = ("<!-- transcript: save /tmp/pm-x.yaml -->\n\n```yaml\na: 1\n```\n\n```\n"
                "$ python3 -c '\nprint(1)'\n1\n$ echo hi \\\n  there\nhi there\n```\n")
        saved, shown = fenced_blocks(text, 1)
        assert (saved.marker, saved.save_to, shown.marker) == ("save", "/tmp/pm-x.yaml", None)
        assert commands_of(shown) == [Command(8, "python3 -c '\nprint(1)'", "1"),
                                      Command(11, "echo hi \\\n  there", "hi there")]

    def test_volatile_parts_are_normalised(self):
        """Clock times, pids and diff file times are masked; everything else must match."""
        assert normalised('"worker_pid": 7806, at 2026-12-03T07:50:14.152171+00:00') == '"worker_pid": <pid>, at <time>'
        assert normalised("--- rules/a.yaml\t2026-12-03 07:35:55.6 +0000") == "--- rules/a.yaml"
        assert normalised('"directory": "/home/x/kentino/rules"') == normalised('"directory": "/work/main/rules"')
        assert normalised("3 passed") != normalised("4 passed")

    def test_the_shell_session_keeps_state(self, tmp_path):
        """`cd`, variables and the exit code of the previous command carry over, as in a terminal."""
        session = ShellSession(tmp_path, timeout=30)
        try:
            session.run("cd /tmp && X=1")
            session.run("false")
            assert session.run('echo "$? $X $PWD"') == "1 1 /tmp"
            assert session.run("echo out; echo err >&2") == "out\nerr"
        finally:
            session.close()

    def test_the_sections_hold_transcripts(self):
        """Each replayed section holds the commands the README promises."""
        shown = [c.text for c in STANDALONE]
        assert any(c.startswith("kentino-expert recommend examples/") for c in shown) and len(shown) >= 5
        pm = [c.text for c in transcript_commands(*PRODUCT_MANAGERS)]
        assert any("rules check" in c for c in pm) and any("rules diff" in c for c in pm) and len(pm) >= 15
        served = [c.text for text, line in (CHAT_BOTS, AUDITORS) for c in transcript_commands(text, line)]
        assert any("curl" in c for c in served) and any("decisions replay" in c for c in served)


@pytest.mark.parametrize("command", STANDALONE, ids=[f"README.md:{c.line}" for c in STANDALONE])
def test_standalone_command_prints_what_the_readme_shows(tmp_path, command):
    """Each quick-start and trace-format command, run in the repository, prints exactly the lines shown under it."""
    assert not run_standalone([command], tmp_path), "\n".join(map(str, run_standalone([command], tmp_path)))


def _assert_replays(sections, tmp_path, at_least: int, **substitutions):
    mismatches, compared = replay(sections, tmp_path, substitutions)
    assert compared >= at_least, f"only {compared} commands were compared"
    assert not mismatches, "\n\n".join(map(str, mismatches)) + "\n\n(to accept: python3 tests/readme_transcripts.py)"


def test_product_manager_session_replays(tmp_path):
    """The worked session (edit a copy, check, test, diff, regenerate), replayed in order on scratch copies."""
    _assert_replays([PRODUCT_MANAGERS], tmp_path, 15)


def test_new_rule_worked_example_replays(tmp_path):
    """The rule language's worked example (a new warning written only in YAML) prints what the README shows."""
    _assert_replays([RULE_LANGUAGE], tmp_path, 6)


def test_chat_bot_and_auditor_sessions_replay(tmp_path):
    """The service session (curl, MCP, Python) then the auditor's (list, show, replay, explain), on a free port."""
    for tool in ("curl", "jq"):
        if missing_tool(tool):
            pytest.skip(f"the transcripts need {tool}, which is not installed")
    port = free_port()
    _assert_replays([CHAT_BOTS, AUDITORS], tmp_path, 25, **{"localhost:8765": f"localhost:{port}",
                                                           "--port 8765": f"--port {port}"})
