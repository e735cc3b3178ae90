"""A real uvicorn serving the app (app_from_env) on a free loopback port, for tests that need real HTTP."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx

from ports import free_port


def start_server(tmp_path, seconds: float = 30, **env) -> tuple[subprocess.Popen, str]:
    """(process, base URL) of a server on a free port once /readyz answers 200; its stderr in the failure else."""
    port = free_port()
    environment = {**os.environ, "KENTINO_DB": str(tmp_path / "live.db"), **env}
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "kentino_expert.service.app:app_from_env", "--factory", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning"],
        env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=str(tmp_path))
    return wait_ready(process, f"http://127.0.0.1:{port}", seconds)


def start_serve(tmp_path, *options, seconds: float = 60, env=None) -> tuple[subprocess.Popen, int]:
    """(process, port) of `kentino-expert serve --port <free port> *options` once /readyz answers 200."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "kentino_expert", "serve", "--port", str(port), "--log-level", "warning", *options],
        env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=str(tmp_path))
    wait_ready(process, f"http://127.0.0.1:{port}", seconds)
    return process, port


def wait_ready(process, base: str, seconds: float):
    """(process, base URL) once /readyz answers 200; the server's stderr in the failure otherwise."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited: {process.stderr.read().decode(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return process, base
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise AssertionError(f"server did not become ready within {seconds:g} s")


def stop_server(process) -> None:
    """SIGTERM, then SIGKILL if it does not exit."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait(timeout=10)
    if process.stderr:
        process.stderr.close()
