"""Accepting connections without letting clients end the app: the accept loop of the control socket and of the web
console, the caps on their connections, and how long a connection may stay silent (docs/reliability.md, rows R1-R6).

Invariants:
- An accept that fails for want of a resource (EMFILE, ENFILE, ENOBUFS, ENOMEM) never ends the loop: it first asks
  its server to make room (close its longest-idle connection), then backs off (`ACCEPT_BACKOFF_FIRST_S`, doubling up
  to `ACCEPT_BACKOFF_MAX_S`) and tries again; pending clients wait in the listen backlog meanwhile. The shortage is
  logged once per episode (`Episodes`), not once per try.
- Each server holds at most its cap of connections (`connection_cap`): a quarter of the process's descriptor limit,
  at most its ceiling, so that connections alone never exhaust the descriptors the store, the logs and the agents'
  provider processes need. At the cap a new connection makes room by closing the connection that has waited longest
  for a request, never one with a request in flight; only when every connection has one is the new one refused.
- A connection that has not sent a complete request within its idle bound (counted from its opening, and again from
  each answer) is closed, unless a request of it is in flight: a wait or a live stream is never cut.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

import anyio
import anyio.lowlevel

from wardian.limits import CONTROL_IDLE_S as CONTROL_IDLE_S

if sys.platform != "win32":  # Windows limits no process to a number of descriptors: no cap from it there
    import resource

log = logging.getLogger("wardian.app.listen")

# The control socket's idle bound, CONTROL_IDLE_S, is in wardian.limits: a client on Windows reads it too.
MAX_CONTROL_CONNECTIONS = 1024
# A browser sends its request as soon as it connects, and keeps an idle connection only until uvicorn's keep-alive
# timeout (5 s); a live view is a request in flight (its event stream).
CONSOLE_IDLE_S = 10.0
# One person's browser: a few tabs, each with its pages' connections (6 per host at most) and one live stream.
MAX_CONSOLE_CONNECTIONS = 128
# No server is capped below this, whatever the descriptor limit.
MIN_CONNECTIONS = 16

# How often the idle bound is checked: a silent connection is closed between its bound and this much later.
SWEEP_S = 1.0
ACCEPT_BACKOFF_FIRST_S = 0.01
ACCEPT_BACKOFF_MAX_S = 1.0  # asyncio's own accept retry delay (asyncio.constants.ACCEPT_RETRY_DELAY)
# A refused connection is kept this long for the client to read its answer, and so many at most at once.
REFUSE_LINGER_S = 1.0
MAX_LINGERING = 16
# A shortage is logged again only after this long without one.
EPISODE_GAP_S = 60.0

_SHORTAGE = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# The client went away between its connect and our accept (TCP): nothing to serve, nothing to report.
_GONE = frozenset({errno.ECONNABORTED, errno.EPROTO})


def cap_for(limit: int, ceiling: int) -> int:
    """How many connections a server may hold in a process that may open `limit` files: a quarter of them, at most
    `ceiling` and at least `MIN_CONNECTIONS`."""
    return ceiling if limit == resource.RLIM_INFINITY else max(MIN_CONNECTIONS, min(ceiling, limit // 4))


def connection_cap(ceiling: int) -> int:
    """`cap_for` this process's descriptor limit (the soft one, which the kernel enforces), read now; `ceiling` on
    Windows, whose handles have no such limit."""
    if sys.platform == "win32":
        return ceiling
    return cap_for(resource.getrlimit(resource.RLIMIT_NOFILE)[0], ceiling)


class Episodes:
    """Log a condition once per episode: again only after `EPISODE_GAP_S` without it."""

    def __init__(self) -> None:
        self._last = -EPISODE_GAP_S

    def note(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last >= EPISODE_GAP_S:
            log.warning(message, *args)
        self._last = now


async def accept_forever(sock: socket.socket, admit: Callable[[socket.socket], Awaitable[None]],
                         make_room: Callable[[], bool], what: str) -> None:
    """Accept connections on the listening, non-blocking `sock` and hand each to `admit`, until cancelled.

    `make_room()` closes one idle connection of the server, if it has one (whether it did); it is called when the
    process is out of descriptors.

    Raises:
        OSError: accept failed for another reason than a shortage or a client that went away.
    """
    loop = asyncio.get_running_loop()
    shortage = Episodes()
    delay = 0.0
    while True:
        try:
            conn, _ = await loop.sock_accept(sock)
        except OSError as exc:
            if exc.errno in _GONE:
                continue
            if exc.errno not in _SHORTAGE:
                raise
            shortage.note("%s cannot accept a connection: %s (open files limit %s); idle connections are closed and "
                          "new clients wait until some close", what, errno.errorcode.get(exc.errno or 0, exc.errno),
                          resource.getrlimit(resource.RLIMIT_NOFILE)[0])
            if make_room():
                delay = ACCEPT_BACKOFF_FIRST_S  # the descriptor is free once the loop has closed that connection
            else:
                delay = min(ACCEPT_BACKOFF_MAX_S, max(ACCEPT_BACKOFF_FIRST_S, 2 * delay))
            await anyio.sleep(delay)
            continue
        delay = 0.0
        await admit(conn)
        # An accept that finds a client waiting does not yield: let the handlers of a burst start (and count as idle)
        # before the next one.
        await anyio.lowlevel.checkpoint()


class Tracked(Protocol):
    """A connection as its server's `Connections` sees it."""

    def idle_since(self) -> float | None:
        """Since when (`time.monotonic`) it has been waiting for a request; None while one is in flight."""
        ...

    def close_idle(self) -> bool:
        """Close it unless a request has begun to arrive on it; whether it did (or it was closing already)."""
        ...


T = TypeVar("T", bound=Tracked)


class Connections(Generic[T]):
    """The open connections of one server, held to `cap` and to the idle bound `idle_s`.

    Why close the longest-idle connection for a new one rather than refuse the new one: the clients that matter send a
    request at once, so the newest connection is the likeliest to be served and the longest-silent the likeliest to be
    leaked or hostile; an idle client that is closed loses nothing (a pooled connection is opened again on its next
    call). Refusing instead would let anyone who holds `cap` silent connections lock every client out until the idle
    bound passed.
    """

    def __init__(self, cap: int, idle_s: float, what: str) -> None:
        self.cap = cap
        self.idle_s = idle_s
        self.what = what
        self.open: set[T] = set()
        self._full = Episodes()
        self._lingering = 0

    def admit(self, conn: T) -> bool:
        """Count `conn` in, closing the longest-idle connection first when at the cap; False (not counted) when every
        connection has a request in flight."""
        if len(self.open) >= self.cap:
            self._full.note("%s holds its cap of %d connections: the longest idle ones are closed for new ones, and "
                            "new ones are refused while every one has a request in flight", self.what, self.cap)
            if not self.make_room():
                return False
        self.open.add(conn)
        return True

    def make_room(self) -> bool:
        """Close the connection that has waited longest for a request (never one with a request in flight)."""
        idle = sorted((since, id(c), c) for c in self.open if (since := c.idle_since()) is not None)
        for _, _, conn in idle:
            if conn.close_idle():
                self.open.discard(conn)
                return True
        return False

    def discard(self, conn: T) -> None:
        self.open.discard(conn)

    async def refuse(self, sock: socket.socket, answer: bytes) -> None:
        """Answer a connection that is not admitted with `answer` (it fits any socket buffer) and close it.

        Its writing side is shut at once, and it is kept until the client closes it, at most `REFUSE_LINGER_S`: a
        client that connects and then writes its request reads the answer only if the write succeeds, which it does
        not once the connection is closed, and closing a TCP connection with unread data resets it, which can cost
        the client the answer too. At most `MAX_LINGERING` refused connections are kept at once; beyond, they are
        closed at once.
        """
        self._lingering += 1
        try:
            sock.setblocking(False)
            sock.send(answer)
            sock.shutdown(socket.SHUT_WR)
            if self._lingering <= MAX_LINGERING:
                with anyio.move_on_after(REFUSE_LINGER_S):
                    while await asyncio.get_running_loop().sock_recv(sock, 65536):
                        pass  # what the client sent: read, so that closing does not reset the connection
        except OSError:
            pass
        finally:
            self._lingering -= 1
            sock.close()

    async def sweep(self) -> None:
        """Close every connection that has waited `idle_s` for a request, every `SWEEP_S`, until cancelled."""
        while True:
            await anyio.sleep(SWEEP_S)
            now = time.monotonic()
            for conn in list(self.open):
                since = conn.idle_since()
                if since is not None and now - since >= self.idle_s and conn.close_idle():
                    self.open.discard(conn)
