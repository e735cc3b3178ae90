"""A rule set is read only from regular files inside its directories: a FIFO, a device, a link leading out or an
oversized file is refused before it is opened, by `rules check`, the catalog, the sandbox's digest, `rules publish`
and a reload, which never hangs on it and never holds the serving lock while it builds."""
from __future__ import annotations

import os
import shutil
import threading
import time

import pytest
from click.testing import CliRunner

from kentino_expert.cli.main import main
from kentino_expert.decisions import published
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.errors import KentinoError, KnowledgeError, RuleFileError
from kentino_expert.expert import Expert
from kentino_expert.paths import bundled
from kentino_expert.sandbox import content_digest, vet
from kentino_expert.service.holder import ExpertHolder
from kentino_expert.sourcefiles import SourceFileError, read_source

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are a POSIX thing")


@pytest.fixture()
def dirs(tmp_path):
    """Copies of the bundled rules and knowledge."""
    rules, knowledge = tmp_path / "rules", tmp_path / "knowledge"
    shutil.copytree(bundled("rules"), rules)
    shutil.copytree(bundled("knowledge"), knowledge)
    return rules, knowledge


def _fifo(path):
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _bounded(call, seconds=10.0):
    """call()'s result or exception, failing the test when it does not return within `seconds` (a hang)."""
    box = {}

    def run():
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"did not return within {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_read_source_refuses_what_is_not_a_regular_file_inside(tmp_path):
    """A FIFO, /dev/zero, a link out and a directory are refused with what they are; a link inside is read."""
    root = tmp_path / "rules"
    root.mkdir()
    (root / "real.yaml").write_text("a: 1\n")
    os.mkfifo(root / "pipe.yaml")
    (root / "zero.yaml").symlink_to("/dev/zero")
    (tmp_path / "outside.yaml").write_text("secret: 1\n")
    (root / "out.yaml").symlink_to(tmp_path / "outside.yaml")
    (root / "inside.yaml").symlink_to(root / "real.yaml")
    (root / "dir.yaml").mkdir()
    assert read_source(root / "inside.yaml", root) == b"a: 1\n"
    for name, words in [("pipe.yaml", "a FIFO"), ("zero.yaml", "a link leading out .*dev.zero"),
                        ("out.yaml", "a link leading out"), ("dir.yaml", "a directory")]:
        with pytest.raises(SourceFileError, match=words):
            _bounded(lambda name=name: read_source(root / name, root))


def test_an_oversized_file_is_refused_without_reading_it_whole(tmp_path):
    """A file over the limit is refused at the limit (a growing file cannot fill the memory)."""
    (tmp_path / "big.yaml").write_bytes(b"#" * 5000)
    with pytest.raises(SourceFileError, match="larger than"):
        read_source(tmp_path / "big.yaml", tmp_path, limit=4096)


def test_a_directory_that_is_itself_a_link_is_read(dirs, tmp_path):
    """Deploys switch a link to a release directory: the files inside the link's target are inside."""
    rules, knowledge = dirs
    link = tmp_path / "current-rules"
    link.symlink_to(rules)
    assert Expert(link, knowledge).ruleset.rules


@pytest.mark.parametrize("name", ["advice.yaml", "parameters.yaml"])
def test_rules_check_says_e001_at_a_fifo_and_returns(dirs, name):
    """`rules check` on a directory with a FIFO for a rule file: E001 at the file, exit 2, no hang."""
    rules, knowledge = dirs
    _fifo(rules / name)
    result = _bounded(lambda: CliRunner().invoke(main, ["rules", "check", "--rules", str(rules), "--knowledge",
                                                        str(knowledge)]))
    assert result.exit_code == 2
    assert f"rules/{name}: E001: refused: a FIFO (named pipe)" in result.output
    assert "missing" not in result.output  # the file is there: refused once, not also "missing"


def test_the_catalog_refuses_a_dev_zero_link_at_the_file(dirs):
    """A knowledge file linked to /dev/zero is a KnowledgeError at the file, read no further than a check."""
    _, knowledge = dirs
    (knowledge / "models.yaml").unlink()
    (knowledge / "models.yaml").symlink_to("/dev/zero")
    with pytest.raises(KnowledgeError, match="models.yaml: E001: refused: a link leading out .*dev.zero"):
        _bounded(lambda: load_knowledge(knowledge))


def test_the_digest_refuses_a_fifo_so_a_vetted_set_is_not_reused(dirs):
    """The content digest reads what the loaders read: a FIFO is an E001 there, before any trial, even when the
    same directory passed a trial before (the vetted set's cache must not answer for it)."""
    rules, knowledge = dirs
    vet(rules, knowledge)
    before = content_digest(rules, knowledge)
    _fifo(rules / "advice.yaml")
    with pytest.raises(RuleFileError, match="advice.yaml: E001: refused: a FIFO"):
        _bounded(lambda: vet(rules, knowledge))
    (rules / "advice.yaml").unlink()
    shutil.copy(bundled("rules") / "advice.yaml", rules / "advice.yaml")
    assert content_digest(rules, knowledge) == before


def test_publish_reads_no_fifo(dirs):
    """`rules publish` reads the files through the same check: a knowledge link leading out is refused."""
    rules, knowledge = dirs
    (knowledge / "links.yaml").unlink()
    (knowledge / "links.yaml").symlink_to("/etc/hostname" if os.path.exists("/etc/hostname") else "/etc/passwd")
    with pytest.raises(KentinoError, match="links.yaml: cannot read: refused: a link leading out"):
        published.read_files(rules, knowledge)


def test_a_reload_into_a_fifo_is_refused_at_once_and_the_next_one_works(dirs):
    """The attack of 2026-12-05: a FIFO in the served directory made the reload hang for good, and every later
    reload with it. Now it is refused promptly, the old rules serve on, and once removed a reload succeeds."""
    rules, knowledge = dirs
    holder = ExpertHolder(lambda: _vetted(rules, knowledge))
    old = holder.expert.ruleset.digest
    _fifo(rules / "advice.yaml")
    with pytest.raises(RuleFileError, match="FIFO"):
        _bounded(holder.reload)
    assert holder.expert.ruleset.digest == old and "FIFO" in holder.serving.last_error
    (rules / "advice.yaml").unlink()
    shutil.copy(bundled("rules") / "advice.yaml", rules / "advice.yaml")
    (rules / "parameters.yaml").write_text((rules / "parameters.yaml").read_text() + "\n# edited\n")
    result = _bounded(holder.reload)
    assert result["reloaded"] and holder.serving.last_error is None


def _vetted(rules, knowledge):
    vet(rules, knowledge)
    return Expert(rules, knowledge)


def test_a_stuck_build_is_given_up_and_does_not_block_the_next(monkeypatch, dirs):
    """A build that never finishes is given up after KENTINO_RELOAD_SECONDS (an E207 in /readyz's last error), the
    swap lock stays free meanwhile, and the next reload builds anew."""
    rules, knowledge = dirs
    monkeypatch.setenv("KENTINO_RELOAD_SECONDS", "1")
    release = threading.Event()
    calls = []

    def factory():
        calls.append(1)
        if len(calls) == 2:  # the first reload hangs until the test ends
            release.wait(30)
        return Expert(rules, knowledge)
    holder = ExpertHolder(factory)
    start = time.monotonic()
    with pytest.raises(RuleFileError, match="reload given up after 1 s"):
        _bounded(holder.reload)
    assert time.monotonic() - start < 5
    assert "given up" in holder.serving.last_error
    assert holder._lock.acquire(timeout=0.1)  # the swap lock is not held by the stuck build
    holder._lock.release()
    # the next build is a real one: room for a loaded machine (two test workers on two cores took over 1 s); the
    # holder read KENTINO_RELOAD_SECONDS when it was made, so its own bound is the one to widen
    holder.build_seconds = 60.0
    assert _bounded(holder.reload, 70.0)["reloaded"]
    release.set()
