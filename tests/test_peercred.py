"""`wardian.peercred`: the kernel's word on who is at the other end of a Unix socket, read the same way by the app
(which drops a client of another uid) and the client (which refuses a listener of another uid)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.squatter import AS_ROOT, Listener
from wardian import peercred

pytestmark = pytest.mark.fast


def test_the_peer_of_a_socketpair_is_this_process_uid() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        assert peercred.peer_uid(a) == peercred.peer_uid(b) == os.geteuid()


@AS_ROOT
def test_the_peer_of_a_connection_is_the_uid_that_called_listen(tmp_path: Path) -> None:
    """The uid, not the gid or the pid beside it in the kernel's record, and the listener's own, not the uid of
    whoever bound the socket (this root process)."""
    path = tmp_path / "s"
    listener = Listener(path, 23456, gid=34567)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(path))
            assert peercred.peer_uid(client) == 23456
    finally:
        listener.kill()
