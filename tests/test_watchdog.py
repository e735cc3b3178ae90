"""The decision log's watchdog on a plain socket pair: a connection still armed past its deadline has its socket
shut down (the blocked read wakes with an end of file), one disarmed in time is left alone."""
from __future__ import annotations

import socket
import time
from types import SimpleNamespace

import pytest

from kentino_expert.decisions.watchdog import Watchdog


@pytest.fixture
def watchdog():
    dog = Watchdog()
    yield dog
    dog.close()


def _connection(sock: socket.socket):
    """What the watchdog reads of a psycopg connection: its libpq socket's descriptor."""
    return SimpleNamespace(pgconn=SimpleNamespace(socket=sock.fileno()))


def test_a_read_past_its_deadline_wakes_with_an_end_of_file(watchdog):
    """A read blocked on a silent peer returns b"" once the deadline passes, and disarm says it was severed."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        token = watchdog.arm(_connection(ours), 0.2)
        ours.settimeout(30)  # a hang fails the test, not the run
        started = time.monotonic()
        assert ours.recv(1) == b""
        assert time.monotonic() - started < 20
        assert watchdog.disarm(token) is True


def test_a_connection_disarmed_in_time_is_left_alone(watchdog):
    """Disarmed before its deadline, a connection keeps working after the deadline would have passed."""
    ours, theirs = socket.socketpair()
    with ours, theirs, socket.socket() as spare:
        token = watchdog.arm(_connection(ours), 0.2)
        assert watchdog.disarm(token) is False
        later = watchdog.arm(_connection(spare), 0.3)  # the thread wakes past the first deadline
        time.sleep(0.5)
        watchdog.disarm(later)
        theirs.sendall(b"x")
        assert ours.recv(1) == b"x"


def test_an_earlier_deadline_armed_later_is_met(watchdog):
    """A deadline earlier than every armed one wakes the thread: it is not kept waiting for the later one."""
    far_ours, far_theirs = socket.socketpair()
    near_ours, near_theirs = socket.socketpair()
    with far_ours, far_theirs, near_ours, near_theirs:
        far = watchdog.arm(_connection(far_ours), 60)
        near = watchdog.arm(_connection(near_ours), 0.2)
        near_ours.settimeout(30)
        assert near_ours.recv(1) == b""
        assert watchdog.disarm(near) is True and watchdog.disarm(far) is False
