"""The transcripts of the README and of every guide are what the commands print today (commands, sessions)."""
from __future__ import annotations

import pytest

from ports import free_port
from readme_transcripts import (
    DOCUMENTS,
    IN_SESSIONS,
    SESSIONS,
    STANDALONE,
    Command,
    ShellSession,
    commands_of,
    fenced_blocks,
    missing_tool,
    normalised,
    relative,
    replay,
    run_standalone,
    transcript_commands,
    whole,
)


class TestTranscriptReader:
    """The reader finds commands, their output, multi-line commands and markers."""

    def test_multi_line_command_and_markers(self):
        """A quoted command spanning lines is one command; a marker applies to the next block only."""
        text = ("<!-- transcript: save /tmp/pm-x.yaml -->\n\n```yaml\na: 1\n```\n\n```\n"
                "$ python3 -c '\nprint(1)'\n1\n$ echo hi \\\n  there\nhi there\n```\n")
        saved, shown = fenced_blocks(text, 1, "docs/x.md")
        assert (saved.marker, saved.save_to, shown.marker) == ("save", "/tmp/pm-x.yaml", None)
        assert commands_of(shown) == [Command(8, "python3 -c '\nprint(1)'", "1", "docs/x.md"),
                                      Command(11, "echo hi \\\n  there", "hi there", "docs/x.md")]

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


class TestDocumentsReplayed:
    """Every document is replayed, each either standalone or in exactly one session."""

    def test_every_guide_is_a_replayed_document(self):
        """The README and every docs/*.md guide are read for transcripts; each session names only known documents."""
        names = {relative(path) for path in DOCUMENTS}
        assert "README.md" in names and {"docs/product-managers.md", "docs/chat-bots.md", "docs/auditors.md"} <= names
        assert names >= IN_SESSIONS
        assert sum(len(s.documents) for s in SESSIONS) == len(IN_SESSIONS), "a document is in two sessions"

    def test_the_documents_hold_transcripts(self):
        """Each replayed document holds the commands the guides promise."""
        shown = [c.text for c in STANDALONE]
        assert any(c.startswith("kentino-expert recommend examples/") for c in shown) and len(shown) >= 5
        assert {c.document for c in STANDALONE} >= {"README.md", "docs/facts.md", "docs/trace-format.md"}
        by_name = {s.name: [c.text for part in s.parts() for c in transcript_commands(part)] for s in SESSIONS}
        assert any("rules check" in c for c in by_name["pm"]) and any("rules diff" in c for c in by_name["pm"])
        assert len(by_name["pm"]) >= 15 and len(by_name["rules"]) >= 6
        assert any("curl" in c for c in by_name["served"]) and any("decisions replay" in c for c in by_name["served"])

    def test_a_standalone_document_runs_no_setup_block(self):
        """A `sh` block in a standalone document would be shown but never run: only the README's set-up may have one."""
        for path in DOCUMENTS:
            if relative(path) in IN_SESSIONS:
                continue
            blocks = [b for b in fenced_blocks(whole(path).text, 1, relative(path))
                      if b.info == "sh" and b.marker is None]
            assert all(relative(path) == "README.md" and "python3 -m venv" in b.body for b in blocks), relative(path)


@pytest.mark.parametrize("command", STANDALONE, ids=[c.where for c in STANDALONE])
def test_standalone_command_prints_what_the_document_shows(tmp_path, command):
    """Each command outside the sessions, run on its own in the repository, prints exactly the lines shown under it."""
    if missing_tool(command.text):
        pytest.skip(missing_tool(command.text))
    found = run_standalone([command], tmp_path)
    assert not found, "\n".join(map(str, found)) + "\n\n(to accept: python3 tests/readme_transcripts.py)"


def _assert_replays(session, tmp_path, at_least: int):
    mismatches, compared = replay(session.parts(), tmp_path, session.substitutions(free_port()))
    assert compared >= at_least, f"only {compared} commands were compared"
    assert not mismatches, "\n\n".join(map(str, mismatches)) + "\n\n(to accept: python3 tests/readme_transcripts.py)"


SESSION = {session.name: session for session in SESSIONS}


def test_product_manager_session_replays(tmp_path):
    """The worked session (edit a copy, check, test, diff, regenerate), replayed in order on scratch copies."""
    _assert_replays(SESSION["pm"], tmp_path, 15)


def test_new_rule_worked_example_replays(tmp_path):
    """The rule language's worked example (a new warning written only in YAML) prints what the guide shows."""
    _assert_replays(SESSION["rules"], tmp_path, 6)


def test_chat_bot_auditor_and_operator_sessions_replay(tmp_path):
    """The service session (curl, MCP, Python), the auditor's (list, show, replay, explain) and the operator's
    (prune), in one shell against one server on a free port."""
    for tool in ("curl", "jq"):
        if missing_tool(tool):
            pytest.skip(f"the transcripts need {tool}, which is not installed")
    _assert_replays(SESSION["served"], tmp_path, 25)
