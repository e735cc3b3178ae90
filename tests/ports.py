"""A free loopback port for a test's server, chosen where the kernel's outgoing connections never land."""
from __future__ import annotations

import random
import socket
from pathlib import Path

# A port from bind(0) lies in the kernel's ephemeral range, the same range every outgoing connection (a replica to
# PostgreSQL, a test to a replica) takes its local port from; between the probe and the server's own bind one of those
# can take it (CI saw HAProxy fail with "Address already in use"). Ports below that range are only ever bound on
# purpose, so a probe that binds there stays good until the server binds.
LOWEST = 10_000
_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def free_port() -> int:
    """A loopback TCP port nobody listens on, below the ephemeral range, never the same twice in one process."""
    high = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(LOWEST, high) if high > LOWEST + 100 else 0
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            port = sock.getsockname()[1]
        _handed_out.add(port)
        return port
    raise RuntimeError("no free loopback port below the ephemeral range after 200 tries")
