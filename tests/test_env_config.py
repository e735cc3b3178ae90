"""Configuration from the environment: every `serve` and `mcp` option has a KENTINO_* variable, a flag wins over its
variable, the operations guide lists every variable, and a server configured by variables alone (rules, port,
workers, log, instance) serves what they say, with one worker and with two."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import click
import pytest

from kentino_expert.cli.service import mcp, serve
from kentino_expert.expert import Expert
from ports import free_port
from replica_harness import BATCH_70B, ROOT, rules_with_cliff, wait_until

COMMANDS = {"serve": serve, "mcp": mcp}
OPTIONS = [(name, param) for name, command in COMMANDS.items() for param in command.params
           if isinstance(param, click.Option) and param.name != "help"]


def _ids(item) -> str:
    return f"{item[0]} {item[1].opts[0]}"


def _variable(param: click.Option) -> str:
    """KENTINO_ and the long option's name (plural for a repeatable option): --max-header-bytes ->
    KENTINO_MAX_HEADER_BYTES, --allowed-host -> KENTINO_ALLOWED_HOSTS."""
    long = next(opt for opt in param.opts if opt.startswith("--"))
    return "KENTINO_" + long[2:].upper().replace("-", "_") + ("S" if param.multiple else "")


@pytest.mark.parametrize("item", OPTIONS, ids=_ids)
def test_every_option_has_its_variable(item):
    """Each option of serve and mcp reads KENTINO_<ITS NAME> when the flag is not given."""
    _, param = item
    assert param.envvar == _variable(param)


def _samples(param: click.Option) -> tuple[str, str]:
    """Two valid values of an option, as text: one for the variable, another for the flag."""
    kind = param.type
    if isinstance(kind, click.Choice):
        return kind.choices[0], kind.choices[-1]
    if isinstance(kind, click.IntRange):
        low = max(kind.min or 0, 1)
        return str(low + 1), str(low + 2)
    if isinstance(kind, click.FloatRange):
        return str(kind.min + 1.5), str(kind.min + 2.5)
    return f"env-{param.name}", f"flag-{param.name}"


def _parsed(command: click.Command, args: list[str]) -> dict:
    with command.make_context(command.name, args) as ctx:
        return ctx.params


@pytest.mark.parametrize("item", OPTIONS, ids=_ids)
def test_a_flag_wins_over_its_variable(item, monkeypatch):
    """With only the variable set the option takes its value; with the flag given too, the flag's."""
    name, param = item
    command = COMMANDS[name]
    from_env, from_flag = _samples(param)
    monkeypatch.setenv(param.envvar, from_env)
    by_env = _parsed(command, [])[param.name]
    by_flag = _parsed(command, [param.opts[0], from_flag])[param.name]
    if param.multiple:
        assert (by_env, by_flag) == ((from_env,), (from_flag,))
    else:
        assert str(by_env).endswith(from_env) and str(by_flag).endswith(from_flag), (by_env, by_flag)


def test_allowed_hosts_variable_takes_several_names(monkeypatch):
    """KENTINO_ALLOWED_HOSTS holds several names, separated by commas or spaces."""
    monkeypatch.setenv("KENTINO_ALLOWED_HOSTS", "api.example.com, localhost  10.0.0.5:8001")
    assert _parsed(serve, [])["allowed_hosts"] == ("api.example.com", "localhost", "10.0.0.5:8001")


def test_a_bad_instance_label_is_a_usage_error(monkeypatch):
    """An instance label with a line break is refused (exit 2) naming the option, from the flag or the variable."""
    from click.testing import CliRunner

    from kentino_expert.cli.main import main
    monkeypatch.setenv("KENTINO_INSTANCE", "two\nlines")
    result = CliRunner().invoke(main, ["serve"])
    assert result.exit_code == 2 and "--instance" in result.output and "control characters" in result.output


def test_the_operations_guide_lists_every_variable_in_one_table():
    """docs/operations.md has one generated table of the service's options: a row per variable, naming the
    commands (serve, mcp) that read it."""
    guide = (ROOT / "docs" / "operations.md").read_text()
    block = guide.split("<!-- generated: service-options -->", 1)[1].split("<!-- end generated -->", 1)[0]
    rows = {cells[1].strip(): cells[3] for line in block.splitlines() if (cells := line.split("|"))[1:2]
            and cells[1].strip().startswith("`KENTINO_")}
    missing = [(name, param.envvar) for name, param in OPTIONS if f"`{name}`" not in rows.get(f"`{param.envvar}`", "")]
    assert rows and not missing, missing


@pytest.mark.parametrize("workers", [1, 2])
def test_serve_configured_by_variables_alone(tmp_path, workers):
    """`kentino-expert serve` with no flags: KENTINO_PORT, KENTINO_WORKERS, KENTINO_RULES (an edited copy),
    KENTINO_DB and KENTINO_INSTANCE decide where it listens and what every worker serves and records."""
    pytest.importorskip("uvicorn", reason="serve needs uvicorn")
    httpx = pytest.importorskip("httpx", reason="the server is driven with httpx")
    rules = rules_with_cliff(tmp_path, 60)
    expected = Expert(rules).ruleset.digest
    port = free_port()
    env = {**os.environ, "KENTINO_PORT": str(port), "KENTINO_WORKERS": str(workers), "KENTINO_RULES": str(rules),
           "KENTINO_DB": str(tmp_path / "log.db"), "KENTINO_INSTANCE": "from-env", "KENTINO_LOG_LEVEL": "warning"}
    process = subprocess.Popen([sys.executable, "-m", "kentino_expert", "serve"], cwd=str(tmp_path), env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        def ready():
            assert process.poll() is None, process.stderr.read().decode(errors="replace")[-2000:]
            try:
                return httpx.get(f"{base}/readyz", timeout=2).json()
            except (httpx.HTTPError, ValueError):
                return None
        wait_until(ready, 60, "serve ready")
        seen, deadline = [], time.monotonic() + 60
        # a new connection each time: with two workers both answer, once the second has loaded its rules (the
        # kernel hands a connection to either; the first ready worker alone may take a dozen in a row)
        while len(seen) < 12 or (len({row[0] for row in seen}) < workers and time.monotonic() < deadline):
            with httpx.Client(base_url=base, timeout=30) as client:
                ready_body = client.get("/readyz").json()
                answer = client.post("/v1/recommend", json=BATCH_70B).json()
                seen.append((ready_body["worker_pid"], ready_body["digest"], ready_body["instance"],
                             answer["ruleset"]["digest"], answer["recommendation"]["kind"]))
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert {row[1:] for row in seen} == {(expected, "from-env", expected, "single-node-int4")}, seen
    assert len({row[0] for row in seen}) == workers
