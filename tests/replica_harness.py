"""Parts for the replica tests: a fresh PostgreSQL database, `serve` replicas, HAProxy on deploy/haproxy.cfg with
its stats socket, and a TCP link between a replica and PostgreSQL that can be cut (replica_load.py is the load).

Everything is driven from outside, as an operator would: the CLI (`python -m kentino_expert serve`), HTTP
through the proxy, HAProxy's admin socket, and SQL on the decision log. Every wait has a deadline.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from ports import free_port
from replica_load import PUBLIC_HOST

ROOT = Path(__file__).resolve().parent.parent
HAPROXY_CFG = ROOT / "deploy" / "haproxy.cfg"
BACKEND = "kentino_replicas"


def haproxy_binary() -> str | None:
    """HAProxy's path: on PATH, or Debian's /usr/sbin (not on a normal user's PATH)."""
    found = shutil.which("haproxy")
    if found:
        return found
    return "/usr/sbin/haproxy" if os.access("/usr/sbin/haproxy", os.X_OK) else None


def wait_until(condition, seconds: float, what: str, interval: float = 0.05):
    """condition()'s first truthy value, polled until `seconds` pass; AssertionError naming `what` after."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {seconds:g} s")
        time.sleep(interval)


def self_signed_pem(directory: Path) -> Path | None:
    """A PEM with a self-signed certificate for PUBLIC_HOST and 127.0.0.1 and its key (None without openssl)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    key, cert, pem = directory / "tls-key.pem", directory / "tls-cert.pem", directory / "tls.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-subj", f"/CN={PUBLIC_HOST}", "-addext", f"subjectAltName=DNS:{PUBLIC_HOST},IP:127.0.0.1",
                    "-days", "1", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=30)
    pem.write_bytes(cert.read_bytes() + key.read_bytes())
    return pem


@contextmanager
def fresh_database(server_url: str):
    """A new, empty database on the server of `server_url` (its URL), dropped afterwards."""
    import psycopg
    name = f"kentino_replicas_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(server_url)
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


BATCH_70B = {"task": "batch-inference", "model": "llama-3.1-70b"}  # single-node, or INT4 below a 70B cliff


def rules_with_cliff(directory: Path, cliff_b: int) -> Path:
    """A copy of the repository's rules/ in `directory` with the single-node cliff moved to `cliff_b` billion
    parameters (at 60, BATCH_70B is answered single-node-int4 instead of single-node)."""
    target = directory / "rules"
    shutil.copytree(ROOT / "rules", target)
    path = target / "parameters.yaml"
    text = path.read_text()
    assert "    value: 405\n" in text, "rules/parameters.yaml no longer has the 405B cliff this copy moves"
    path.write_text(text.replace("    value: 405\n", f"    value: {cliff_b}\n"))
    return target


def logged_decisions(db_url: str) -> list[tuple[str, str, int]]:
    """(decision_id, session_id, turn) of every row of the decision log."""
    import psycopg
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT decision_id, session_id, turn FROM decisions").fetchall()


class Replica:
    """One `kentino-expert serve` process on 127.0.0.1:port, logging to PostgreSQL; restartable."""

    def __init__(self, name: str, port: int, db_url: str, log_dir: Path, tokens: dict[str, str]):
        self.name, self.port, self.db_url, self.log_dir, self.tokens = name, port, db_url, log_dir, tokens
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def command(self) -> list[str]:
        return [sys.executable, "-m", "kentino_expert", "serve", "--host", "127.0.0.1", "--port", str(self.port),
                "--db", self.db_url, "--rules", str(ROOT / "rules"), "--knowledge", str(ROOT / "knowledge"),
                "--allowed-host", PUBLIC_HOST, "--allowed-host", "localhost", "--log-level", "warning"]

    def start(self) -> None:
        self.starts += 1
        with open(self.log_dir / f"{self.name}-{self.starts}.log", "wb") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            cwd=str(self.log_dir),
                                            env={**os.environ, **self.tokens, "PYTHONUNBUFFERED": "1"})

    def log_tail(self) -> str:
        text = (self.log_dir / f"{self.name}-{self.starts}.log").read_text(errors="replace")
        return text[-2000:]

    def readyz(self) -> dict | None:
        """The replica's own /readyz body when it answers 200 (asked directly, Host localhost), else None."""
        if self.process is None or self.process.poll() is not None:
            raise AssertionError(f"{self.name} exited: {self.log_tail()}")
        try:
            response = httpx.get(f"http://127.0.0.1:{self.port}/readyz", headers={"Host": "localhost"}, timeout=2)
        except httpx.HTTPError:
            return None
        return response.json() if response.status_code == 200 else None

    def wait_ready(self, seconds: float = 60) -> dict:
        return wait_until(self.readyz, seconds, f"{self.name} ready on port {self.port}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        os.kill(self.process.pid, sig)

    def wait_exit(self, seconds: float = 30) -> float:
        """The monotonic time the process was seen gone (its sockets closed), waiting at most `seconds`.
        A pidfd wakes the wait at the exit itself; Popen.wait would poll in steps of up to 50 ms."""
        pidfd = os.pidfd_open(self.process.pid) if hasattr(os, "pidfd_open") else None
        try:
            if pidfd is not None:
                select.select([pidfd], [], [], seconds)
            self.process.wait(timeout=seconds)
            return time.monotonic()
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit within 20 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


class HAProxy:
    """HAProxy running deploy/haproxy.cfg in the foreground, its ports and paths from the environment."""

    def __init__(self, binary: str, replicas: list[Replica], work_dir: Path, stats_socket: Path, **extra_env):
        self.binary, self.work_dir, self.stats_socket = binary, work_dir, stats_socket
        self.port = free_port()
        self.env = {**os.environ, "KENTINO_HAPROXY_BIND": f"127.0.0.1:{self.port}",
                    "KENTINO_HAPROXY_STATS_SOCKET": str(stats_socket), "KENTINO_HAPROXY_LOG": "stdout",
                    "KENTINO_CHECK_HOST": "localhost", **extra_env}
        for index, replica in enumerate(replicas, start=1):
            self.env[f"KENTINO_REPLICA{index}"] = f"127.0.0.1:{replica.port}"
        if os.geteuid() != 0:  # chroot and the switch to user haproxy need root; as root they are tested too
            self.env["KENTINO_HAPROXY_UNPRIVILEGED"] = "1"
        self.process: subprocess.Popen | None = None
        self.log_path = work_dir / "haproxy.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tls_url(self) -> str:
        return f"https://{self.env['KENTINO_HAPROXY_TLS_BIND']}"

    def start(self) -> None:
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen([self.binary, "-db", "-f", str(HAPROXY_CFG)], env=self.env,
                                            stdout=log, stderr=subprocess.STDOUT, cwd=str(self.work_dir))

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def command(self, line: str) -> str:
        """One command on the admin socket, its whole answer."""
        if self.process.poll() is not None:
            raise AssertionError(f"haproxy exited ({self.process.returncode}): {self.log_tail()}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(self.stats_socket))
            sock.sendall(line.encode() + b"\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def servers(self) -> dict[str, dict[str, str]]:
        """`show stat` of the backend's servers: name -> {column: value} (status, scur, stot, ...)."""
        if not self.stats_socket.exists():
            return {}
        lines = self.command("show stat").splitlines()
        header = lines[0].lstrip("# ").split(",")
        rows = (dict(zip(header, line.split(","), strict=False)) for line in lines[1:] if line)
        return {row["svname"]: row for row in rows if row["pxname"] == BACKEND and row["svname"] != "BACKEND"}

    def status(self, server: str) -> str:
        return self.servers().get(server, {}).get("status", "")

    def transitions(self, server: str) -> list[str]:
        """HAProxy's log lines saying `server` went UP or DOWN, with the reason, oldest first."""
        marker = f"Server {BACKEND}/{server} is "
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [line[line.index(marker) + len(marker) - 3:] for line in lines
                if marker in line and not line.startswith("[")]  # "[WARNING]" lines repeat the syslog ones

    def wait_status(self, server: str, wanted: str, seconds: float) -> float:
        """The monotonic time at which `server` was first seen with status `wanted` (UP, DOWN, MAINT)."""
        wait_until(lambda: self.status(server) == wanted, seconds, f"haproxy: {server} {wanted}", interval=0.02)
        return time.monotonic()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


class CuttableLink:
    """A TCP forwarder from 127.0.0.1:port to `target` (host, port). cut() drops every connection through it and
    refuses new ones, as a network partition would; mend() accepts again on the same port; freeze() keeps every
    connection open but forwards nothing more, as a frozen server would (its kernel still accepts and acknowledges)."""

    def __init__(self, target: tuple[str, int]):
        self.target, self.port = target, free_port()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listening = threading.Event()
        self._acceptor: threading.Thread | None = None
        self._frozen = threading.Event()

    def freeze(self) -> None:
        self._frozen.set()

    def mend(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.05)  # accept() wakes up to see a cut
        self._listening.set()
        self._acceptor = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._acceptor.start()

    def _accept(self, listener: socket.socket) -> None:
        with listener:
            while self._listening.is_set():
                try:
                    client, _ = listener.accept()
                except (TimeoutError, OSError):
                    continue
                try:
                    upstream = socket.create_connection(self.target, timeout=5)
                except OSError:
                    client.close()
                    continue
                client.settimeout(None)
                upstream.settimeout(None)
                with self._lock:
                    self._sockets += [client, upstream]
                for source, sink in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                while self._frozen.is_set():  # held, never delivered: the far end hears nothing
                    time.sleep(0.05)
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Stop listening (new connections are refused) and close every forwarded connection."""
        self._listening.clear()
        if self._acceptor is not None:
            self._acceptor.join(timeout=5)
        with self._lock:
            ends, self._sockets = self._sockets, []
        for end in ends:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()
        self._frozen.clear()  # a pump holding data wakes, finds its sockets shut and ends, delivering nothing


def url_via(db_url: str, port: int) -> str:
    """`db_url` pointed at 127.0.0.1:port (a CuttableLink) instead of its own server."""
    parts = urlsplit(db_url)
    userinfo = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"))


class Deployment:
    """Two replicas on one database, with read and admin tokens (`self.tokens`), and HAProxy in front. With
    `cuttable`, replica1 reaches PostgreSQL through a CuttableLink (`self.link`); with `tls_pem`, HAProxy also
    terminates TLS with that certificate."""

    def __init__(self, binary: str, db_url: str, work_dir: Path, socket_dir: Path, cuttable: bool = False,
                 tls_pem: Path | None = None):
        self.db_url = db_url
        self.link = None
        urls = [db_url, db_url]
        if cuttable:
            parts = urlsplit(db_url)
            self.link = CuttableLink((parts.hostname or "127.0.0.1", parts.port or 5432))
            urls[0] = url_via(db_url, self.link.port)
        self.tokens = {"KENTINO_READ_TOKEN": secrets.token_urlsafe(24),
                       "KENTINO_ADMIN_TOKEN": secrets.token_urlsafe(24)}
        self.replicas = [Replica(f"replica{i}", free_port(), url, work_dir, self.tokens)
                         for i, url in enumerate(urls, start=1)]
        tls = {}
        if tls_pem is not None:
            tls = {"KENTINO_TLS_CERT": str(tls_pem), "KENTINO_HAPROXY_TLS_BIND": f"127.0.0.1:{free_port()}"}
        self.proxy = HAProxy(binary, self.replicas, work_dir, socket_dir / "haproxy.sock", **tls)

    def start(self) -> None:
        """Start everything and wait until HAProxy has every replica UP."""
        if self.link is not None:
            self.link.mend()
        for replica in self.replicas:
            replica.start()
        for replica in self.replicas:
            replica.wait_ready()
        self.proxy.start()
        for replica in self.replicas:
            self.proxy.wait_status(replica.name, "UP", 20)

    def stop(self) -> None:
        self.proxy.stop()
        for replica in self.replicas:
            replica.stop()
        if self.link is not None:
            self.link.cut()

    def proxied_pids(self, wanted: set[int], attempts: int = 60) -> set[int]:
        """worker_pid of the replicas that answer /readyz through the proxy, until `wanted` are seen."""
        seen: set[int] = set()
        with httpx.Client(base_url=self.proxy.base_url, headers={"Host": PUBLIC_HOST}, timeout=5) as client:
            for _ in range(attempts):
                response = client.get("/readyz")
                if response.status_code == 200:
                    seen.add(response.json()["worker_pid"])
                if wanted <= seen:
                    break
        return seen
