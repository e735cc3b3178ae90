"""Several worker processes on one port, each with its own SO_REUSEPORT socket (`serve --workers N`).

uvicorn's own `--workers` shares one listening socket, and with kept-alive connections (what a
chat bot's HTTP client keeps) one worker tends to accept them all: measured here, 16 connections
went 16 to 0 and two workers served no more than one. With a socket per worker the kernel spreads
new connections across the workers. The supervisor forwards SIGHUP (reload the rules) to every
worker, restarts a worker that dies, and stops them all on SIGINT/SIGTERM. Where the platform has
no SO_REUSEPORT, `reuse_port_available()` is False and the caller falls back to uvicorn's workers.
Every worker serves through http_limits' protocol, with the limits the supervisor was given.

A worker builds its app before it opens its socket, so a worker that is (re)starting takes no share of the new
connections until it can answer them (a replacement used to hold those it was given for the second or more its
rules take to build: measured, up to 3.8 s). When a worker dies, the kernel resets the connections it had queued but
not yet accepted, unless net.ipv4.tcp_migrate_req is 1 (Linux 5.14 and later), which moves them to the other
workers' sockets: the supervisor says so when it starts with the setting off (deploy/sysctl.d sets it). The
requests a killed worker was answering are lost whatever is done here: see docs/deployment.md.

A reload through one worker's POST /v1/admin/reload reaches the others through the mtime of a
marker (`reload_marker()`): on Linux an anonymous memfd of the supervisor, named by its
/proc/<pid>/fd path, so that nothing is left on disk however the supervisor ends, SIGKILL included.
(On a PostgreSQL log every worker also follows the published rule set itself: see follower.py.)
The workers' metrics share one directory (`metrics_directory()`, see metrics.py); the supervisor
tells prometheus-client when a worker died, so its live gauges stop counting, and removes the directory
when it stops. A supervisor killed outright cannot: its orphaned workers, on their way out, remove their
files and the last one out the directory.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import uvicorn

from .http_limits import HttpLimits, server_config
from .metrics import leave_directory, worker_exited

DEFAULTS = HttpLimits()

APP = "kentino_expert.service.app:app_from_env"
BACKLOG = 2048
MIGRATE_REQ = Path("/proc/sys/net/ipv4/tcp_migrate_req")  # 1: a closed listener's queue moves to its siblings
MIGRATE_ADVICE = ("kentino-expert: net.ipv4.tcp_migrate_req is 0: the connections queued for a worker that dies are "
                  "reset; set it to 1 (deploy/sysctl.d/60-kentino-expert.conf, docs/deployment.md)")


def queue_migration_off(setting: Path = MIGRATE_REQ) -> bool:
    """The kernel resets a dead worker's queued connections instead of moving them to its siblings (a kernel without
    the setting, or another platform, says nothing here)."""
    try:
        return setting.read_text().strip() == "0"
    except OSError:
        return False


def reuse_port_available() -> bool:
    return hasattr(socket, "SO_REUSEPORT") and sys.platform.startswith("linux")


def _socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def _die_with_parent() -> None:
    """Linux: the kernel sends this worker SIGTERM when the supervisor dies, even by SIGKILL."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@contextmanager
def reload_marker():
    """A path whose mtime tells the workers to reload, gone with the supervisor (see the module docstring)."""
    proc_fds = Path(f"/proc/{os.getpid()}/fd")
    if hasattr(os, "memfd_create") and proc_fds.is_dir():
        fd = os.memfd_create("kentino-reload")
        try:
            yield str(proc_fds / str(fd))
        finally:
            os.close(fd)
        return
    directory = tempfile.mkdtemp(prefix="kentino-reload-")  # elsewhere: removed when the supervisor exits
    try:
        marker = Path(directory) / "marker"
        marker.touch()
        yield str(marker)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def metrics_directory():
    """A new private directory for the workers' metrics (PROMETHEUS_MULTIPROC_DIR), removed afterwards."""
    directory = tempfile.mkdtemp(prefix="kentino-metrics-")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _leave_when_orphaned(parent: int):
    """A SIGTERM handler: an orphaned worker (its supervisor was killed) removes the metrics it leaves behind, then
    ends by SIGTERM as it would have. uvicorn re-raises the SIGTERM it caught once it has shut down, after
    putting back the handler it found: this one."""
    def terminated(signum, frame):
        if os.getppid() != parent:
            leave_directory()
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)
    return terminated


def _worker(host: str, port: int, log_level: str, parent: int, limits: HttpLimits) -> None:
    signal.signal(signal.SIGTERM, _leave_when_orphaned(parent))
    _die_with_parent()
    try:
        if os.getppid() != parent:  # the supervisor died before the line above took effect
            return
        config = server_config(APP, limits, factory=True, log_level=log_level)
        # the app first (rules checked, built and tried, about a second): a socket listening before it would take
        # its share of new connections and hold them unanswered meanwhile (a proxy's health check timed out on one)
        config.load()
        sock = _socket(host, port)
        sock.listen(BACKLOG)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        if os.getppid() != parent:  # orphaned (the supervisor was killed): nobody else removes the metrics
            leave_directory()


class Supervisor:
    """Start `count` workers on (host, port); `run()` blocks until SIGINT/SIGTERM."""

    def __init__(self, host: str, port: int, count: int, log_level: str = "info", limits: HttpLimits = DEFAULTS):
        self.host, self.count, self.log_level, self.limits = host, count, log_level, limits
        # bound, never listening: it fixes the port (port 0 picks one) without taking connections
        self._holder = _socket(host, port)
        self.port = self._holder.getsockname()[1]
        self._context = multiprocessing.get_context("spawn")
        self._workers: list = []
        self._stopping = False

    def _start_one(self):
        process = self._context.Process(target=_worker, daemon=False,
                                        args=(self.host, self.port, self.log_level, os.getpid(), self.limits))
        process.start()
        return process

    def _forward(self, signum):
        for process in self._workers:
            if process.is_alive():
                with suppress(OSError):  # it has just exited
                    os.kill(process.pid, signum)

    def run(self) -> None:
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        signal.signal(signal.SIGHUP, lambda *_: self._forward(signal.SIGHUP))
        signal.signal(signal.SIGINT, lambda *_: self._stop())
        signal.signal(signal.SIGTERM, lambda *_: self._stop())
        try:
            self._workers = [self._start_one() for _ in range(self.count)]
            print(f"kentino-expert: {self.count} workers on http://{self.host}:{self.port} (supervisor pid "
                  f"{os.getpid()}; SIGHUP reloads the rules, Ctrl+C stops)", file=sys.stderr, flush=True)
            if queue_migration_off():
                print(MIGRATE_ADVICE, file=sys.stderr, flush=True)
            while not self._stopping:
                time.sleep(0.2)
                for index, process in enumerate(self._workers):
                    if not process.is_alive() and not self._stopping:
                        print(f"kentino-expert: worker {process.pid} exited ({process.exitcode}); starting another",
                              file=sys.stderr, flush=True)
                        worker_exited(process.pid)
                        time.sleep(0.5)  # a worker that cannot start must not spin
                        self._workers[index] = self._start_one()
        finally:
            self._shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._holder.close()

    def _stop(self):
        self._stopping = True

    def _shutdown(self, grace: float = 15.0):
        self._forward(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in self._workers:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(5)
