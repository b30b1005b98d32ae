"""How long the app waits for a shared store that went silent, on each of its three connections.

A dead network (a cable pulled, a partition, a firewall or NAT that forgot the flow) drops packets without a word: no
reset, no error. Left to the kernel, a connection with a statement in flight waits until TCP's retransmissions give up
(`net.ipv4.tcp_retries2` = 15: about 15 minutes on Linux), holding the app's one writer and every operation queued
behind it, and an idle connection notices nothing until it sends. So every connection the app opens carries libpq's
own liveness settings (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-KEEPALIVES), `TCP_LIVENESS`:

- `tcp_user_timeout` (`TCP_USER_TIMEOUT_MS`): data sent and not acknowledged for that long ends the connection;
- `keepalives` on, `keepalives_idle` (`KEEPALIVES_IDLE_S`), `keepalives_interval`, `keepalives_count`: a connection
  that received nothing for 4 s is probed every 2 s; with `tcp_user_timeout` set, Linux ends it at the first probe
  10 s after the last packet it received (tcp(7)), and where that option is missing, 3 unanswered probes end it at
  the same 10 s.

So a dead network is noticed about `DEAD_LINK_S` after the first packet that goes unanswered, whether a statement was
in flight or the connection was idle. The probes also keep a firewall's or NAT's idea of the flow alive. A URL that
names any of these keeps its own value (`with_liveness`); libpq ignores them all on a Unix socket (no network there).

Keepalives and acknowledgements come from the server's kernel, so no TCP setting sees a server process that is stopped
or stuck while its machine runs, nor a COMMIT waiting for a synchronous standby that is gone (the server bounds that
wait by nothing). For the writer, `Watchdog` bounds each call instead (`STALL_LIMIT_S`); the wait reader bounds its
look itself (`wardian.store.postgres.wait_reader`). Both end the connection the same way, `shutdown()` of its socket:
libpq then reads end-of-file, the call fails at once, and the connection is replaced; a COMMIT ended that way is
`uncertain`, never a receipt (`connection.commit_lost`). Nothing is sent to the server to cancel anything: the network
that would carry it may be the dead one.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Generator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

log = logging.getLogger("wardian.store.postgres")

TCP_USER_TIMEOUT_MS = 10_000
KEEPALIVES_IDLE_S = 4
KEEPALIVES_INTERVAL_S = 2
KEEPALIVES_COUNT = 3
DEAD_LINK_S = 10  # what the settings above add up to (see the module docstring)
TCP_LIVENESS: dict[str, str] = {
    "keepalives": "1",
    "keepalives_idle": str(KEEPALIVES_IDLE_S),
    "keepalives_interval": str(KEEPALIVES_INTERVAL_S),
    "keepalives_count": str(KEEPALIVES_COUNT),
    "tcp_user_timeout": str(TCP_USER_TIMEOUT_MS),
}

# The longest one call of the writer (a batch, its COMMIT, one transaction) may wait for the server before its
# connection is ended: above the 30 s `lock_timeout` (`connection.LOCK_TIMEOUT_MS`), the longest wait the server itself
# ends with an error, so a lock wait is never cut short, only a server that does not answer at all.
STALL_LIMIT_S = 45.0


def with_liveness(url: str) -> str:
    """`url` as a libpq connection string with the settings of `TCP_LIVENESS` it does not name itself.

    Raises: psycopg.ProgrammingError (a URL libpq cannot read)."""
    named = conninfo_to_dict(url)
    return make_conninfo(url, **{key: value for key, value in TCP_LIVENESS.items() if key not in named})


def shut(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """End `conn`'s socket now, from the loop that runs `conn` (while a statement waits on it): no round trip, and the
    descriptor stays libpq's to close. Nothing happens to a connection that is closed already."""
    with suppress(psycopg.Error, OSError), socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
        sock.shutdown(socket.SHUT_RDWR)


class Watchdog:
    """Ends the writer's connection when one call into it (`watch`) has waited longer than `limit_s` (default
    `STALL_LIMIT_S`); the engine then reports that call's failure and replaces the connection (`tripped`).

    The writer's calls run on a worker thread and block in libpq, so this runs on a thread of its own, started at the
    first call and stopped by `close`. It holds its own duplicate of the connection's socket: shutting that down
    reaches the connection even while libpq uses it, and can never hit a descriptor libpq closed and the process
    reused meanwhile."""

    def __init__(self, limit_s: float | None = None) -> None:
        self.limit_s = STALL_LIMIT_S if limit_s is None else limit_s
        self.tripped = False  # the connection followed now was ended here
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._since: float | None = None  # when the running call began (None: no call runs)
        self._depth = 0  # calls nested in the running one (an operation's transaction inside a batch)
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def follow(self, conn: psycopg.Connection[Any]) -> None:
        """Watch `conn` from now on (a connection the engine just opened)."""
        sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
        with self._lock:
            old, self._sock = self._sock, sock
            self.tripped = False
        if old is not None:
            old.close()

    @contextmanager
    def watch(self) -> Generator[None]:
        """One call into the connection; nested calls count as part of the outermost one."""
        self._depth += 1
        if self._depth == 1:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="wardian-store-watchdog", daemon=True)
                self._thread.start()
            self._since = time.monotonic()
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                with self._lock:  # once this returns, the call can no longer be cut
                    self._since = None

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def _run(self) -> None:
        while not self._closed.wait(min(1.0, self.limit_s / 4)):
            with self._lock:
                since = self._since
                if since is None or self._sock is None or self.tripped or time.monotonic() - since < self.limit_s:
                    continue
                log.warning("the shared store has not answered for %g s; its connection is dropped", self.limit_s)
                with suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)
                self.tripped = True
