"""The test servers' port picker stays out of the range outgoing connections take their ports from."""
from __future__ import annotations

import socket

from ports import LOWEST, _ephemeral_low, free_port


def test_ports_lie_below_the_ephemeral_range_and_bind():
    """Each port is below the kernel's ephemeral range (no outgoing connection can take it) and can be bound."""
    for _ in range(20):
        port = free_port()
        assert LOWEST <= port < _ephemeral_low()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_is_handed_out_once():
    """Two servers of one test never get the same port, even before either has bound it."""
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)


def test_a_listening_port_is_never_handed_out(monkeypatch):
    """A port some process listens on is skipped: the probe bind fails there and another is tried."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", free_port()))
        busy.listen(1)
        taken = busy.getsockname()[1]
        choices = iter([taken, taken + 1 if taken + 1 < _ephemeral_low() else taken - 1])
        monkeypatch.setattr("ports.random.randrange", lambda low, high: next(choices))
        monkeypatch.setattr("ports._handed_out", set())
        assert free_port() != taken
