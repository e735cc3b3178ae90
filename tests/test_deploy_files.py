"""The deployment files of deploy/ are valid for the tools that run them: `haproxy -c` for haproxy.cfg,
`systemd-analyze verify` for the units, and the unit's own command lines run as systemd would run them.
CI has no systemd (no PID 1 to start units under), so this is as close to the unit as CI gets."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import replica_harness as harness

DEPLOY = harness.ROOT / "deploy"
UNIT = DEPLOY / "systemd" / "kentino-expert@.service"
DROP_IN = DEPLOY / "systemd" / "haproxy.service.d" / "kentino-expert.conf"
DEBIAN_HAPROXY_UNIT = Path("/lib/systemd/system/haproxy.service")
INSTALLED_SCRIPT = "/opt/kentino-expert/venv/bin/kentino-expert"


def _haproxy_check(binary: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([binary, "-c", "-f", str(harness.HAPROXY_CFG)], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=30)


def test_haproxy_cfg_is_valid_plain_and_with_tls(tmp_path):
    """`haproxy -c` accepts deploy/haproxy.cfg with its defaults and with a TLS certificate, and refuses a
    certificate that is not there (the TLS block is really read)."""
    binary = harness.haproxy_binary()
    if binary is None:
        pytest.skip("haproxy is not installed (apt-get install haproxy; .ci/run does)")
    plain = _haproxy_check(binary, KENTINO_HAPROXY_STATS_SOCKET=str(tmp_path / "s.sock"))
    assert plain.returncode == 0, plain.stdout + plain.stderr
    missing = _haproxy_check(binary, KENTINO_TLS_CERT=str(tmp_path / "absent.pem"))
    assert missing.returncode != 0, "haproxy -c accepted a certificate that does not exist"
    pem = harness.self_signed_pem(tmp_path)
    if pem is None:
        pytest.skip("openssl is not installed: the TLS variant is not checked")
    tls = _haproxy_check(binary, KENTINO_HAPROXY_STATS_SOCKET=str(tmp_path / "s.sock"), KENTINO_TLS_CERT=str(pem))
    assert tls.returncode == 0, tls.stdout + tls.stderr


def _script() -> Path:
    """The kentino-expert script of the environment running the tests (it stands in for the unit's path)."""
    script = Path(sys.executable).parent / "kentino-expert"
    if not script.exists():
        pytest.skip(f"no kentino-expert script beside {sys.executable}: install the package (pip install -e .)")
    return script


def _verify(unit: Path) -> list[str]:
    """The complaints of `systemd-analyze verify` about our files (Debian's own units are not ours to judge)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd): the units are not verified")
    run = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    ours = [line for line in (run.stdout + run.stderr).splitlines() if "kentino-expert" in line]
    return ours + ([f"exit {run.returncode}"] if run.returncode else [])


def test_replica_unit_passes_systemd_verify(tmp_path):
    """systemd-analyze verify finds nothing wrong with an instance of kentino-expert@.service (the script path
    pointed at this environment's), and does report an unknown key, so its silence means something."""
    text = UNIT.read_text().replace(INSTALLED_SCRIPT, str(_script()))
    (tmp_path / UNIT.name).write_text(text)
    assert _verify(tmp_path / "kentino-expert@8001.service") == []
    (tmp_path / UNIT.name).write_text(text.replace("[Service]\n", "[Service]\nRestartt=always\n"))
    assert any("Restartt" in line for line in _verify(tmp_path / "kentino-expert@8001.service"))


def test_haproxy_drop_in_passes_systemd_verify(tmp_path):
    """Debian's haproxy.service with the drop-in of deploy/systemd verifies cleanly."""
    if not DEBIAN_HAPROXY_UNIT.exists():
        pytest.skip(f"no {DEBIAN_HAPROXY_UNIT} (Debian's haproxy package): the drop-in is not verified")
    shutil.copy(DEBIAN_HAPROXY_UNIT, tmp_path / "haproxy.service")
    (tmp_path / "haproxy.service.d").mkdir()
    shutil.copy(DROP_IN, tmp_path / "haproxy.service.d" / DROP_IN.name)
    assert _verify(tmp_path / "haproxy.service") == []


def _unit_command(key: str, **variables: str) -> list[str]:
    """The unit's `key=` command line as systemd runs it: %i and ${NAME} substituted, $$ turned into $."""
    line = next(line for line in UNIT.read_text().splitlines() if line.startswith(f"{key}="))
    command = line.split("=", 1)[1].replace("%i", variables.pop("instance"))
    command = re.sub(r"\$\{(\w+)\}", lambda match: variables[match.group(1)], command)
    return [word.replace("$$", "$") for word in shlex.split(command)]


def test_unit_guard_refuses_a_replica_without_a_shared_log():
    """ExecStartPre stops a replica whose KENTINO_DB is not a postgresql:// URL, saying why."""
    guard = _unit_command("ExecStartPre", instance="8001")
    bare = {key: value for key, value in os.environ.items() if key != "KENTINO_DB"}
    for env in (bare, {**bare, "KENTINO_DB": "/var/lib/kentino/decisions.db"}):
        run = subprocess.run(guard, env=env, capture_output=True, text=True, timeout=10)
        assert run.returncode == 1 and "KENTINO_DB must be the postgresql:// URL" in run.stderr
    shared = subprocess.run(guard, env={**bare, "KENTINO_DB": "postgresql://kx@db/kentino"}, timeout=10)
    assert shared.returncode == 0


def test_unit_exec_start_serves_the_public_name_and_localhost(tmp_path):
    """The unit's ExecStart command line starts a replica that answers /readyz for its public name and for
    localhost (the checks' Host), refuses any other Host, and on SIGTERM (systemctl stop) shuts down gracefully
    and exits with 0 or by SIGTERM itself (uvicorn re-raises it), both a clean stop for systemd."""
    import httpx
    port = harness.free_port()
    command = _unit_command("ExecStart", instance=str(port), KENTINO_PUBLIC_HOST="expert.test")
    command[0] = str(_script())
    env = {**os.environ, "KENTINO_DB": str(tmp_path / "decisions.db"), "KENTINO_RULES": str(harness.ROOT / "rules"),
           "KENTINO_KNOWLEDGE": str(harness.ROOT / "knowledge")}
    with open(tmp_path / "serve.log", "wb") as log:
        process = subprocess.Popen(command, env=env, cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT)
    try:
        def ready():
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", headers={"Host": "localhost"}, timeout=2)
            except httpx.HTTPError:
                return None
        assert harness.wait_until(ready, 60, "the unit's replica ready").status_code == 200
        for host, status in (("expert.test", 200), ("localhost", 200), ("other.example", 400)):
            assert httpx.get(f"http://127.0.0.1:{port}/readyz", headers={"Host": host}, timeout=5).status_code == status
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
    log_text = (tmp_path / "serve.log").read_text()
    assert code in (0, -signal.SIGTERM) and "Application shutdown complete" in log_text, log_text


def test_deployment_doc_names_every_deploy_file():
    """docs/deployment.md names every file under deploy/, so none is shipped without instructions."""
    doc = (harness.ROOT / "docs" / "deployment.md").read_text()
    files = [path.relative_to(harness.ROOT).as_posix() for path in DEPLOY.rglob("*") if path.is_file()]
    assert files and [name for name in files if name not in doc] == []
