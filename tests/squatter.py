"""A squatter for the control socket's tests: a process of another uid (or this one) listening on a socket this
process bound, counting what it is sent (tests/test_client.py, tests/test_peercred.py)."""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                             reason="needs root (to chown to another uid) and setpriv (to listen as another uid)")
NOBODY = 65534
# Another uid cannot read this interpreter's tree (root's pyenv): the listener runs on the system's python3.
LISTENER_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable

# The squatter: listens on the bound socket it inherits as fd argv[1], answers nothing, and closes each connection as
# soon as it is readable (so a client that did send waits for no answer). When its stdin closes it takes what is still
# queued (the test's clients have all finished by then) and prints what it accepted and received.
_LISTENER = r"""
import json, os, select, socket, sys
srv = socket.socket(fileno=int(sys.argv[1]))
srv.listen(16)
print("listening", flush=True)
accepted, received, conns = 0, b"", []
def take(conn):
    global received
    conn.settimeout(10)
    received += conn.recv(1 << 20)
    conn.close()
while True:
    ready, _, _ = select.select([srv, 0, *conns], [], [])
    if 0 in ready and not os.read(0, 1):
        break
    for r in ready:
        if r is srv:
            conns.append(srv.accept()[0]); accepted += 1
        elif r != 0:
            conns.remove(r); take(r)
srv.setblocking(False)
while True:
    try:
        conns.append(srv.accept()[0]); accepted += 1
    except BlockingIOError:
        break
for conn in conns:
    take(conn)
print(json.dumps({"accepted": accepted, "received": received.decode("latin-1")}), flush=True)
"""


class Listener:
    """A process listening on a socket bound by this (root) process, as `uid` and `gid` (default: `uid`)."""

    def __init__(self, path: Path, uid: int | None, gid: int | None = None) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        os.chmod(path, 0o600)  # as the app makes its socket: only the listener's credentials give it away
        as_uid = [] if uid is None else ["setpriv", f"--reuid={uid}", f"--regid={uid if gid is None else gid}",
                                         "--clear-groups"]
        try:
            self.proc = subprocess.Popen([*as_uid, LISTENER_PYTHON, "-c", _LISTENER, str(sock.fileno())],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(sock.fileno(),),
                                         cwd="/")
        finally:
            sock.close()
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        assert ready, "the listener did not start"
        assert self.proc.stdout.readline() == b"listening\n"

    def stop(self) -> dict[str, Any]:
        """What it accepted and received, once it has ended."""
        out, _ = self.proc.communicate(timeout=30)
        return dict(json.loads(out))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
