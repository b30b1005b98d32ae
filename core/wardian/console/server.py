"""The web console inside the app: an HTTP server on the app's own event loop, in the app's task group (why: see
docs/decisions/0018-console-inside-the-app.md).

`Console` binds its loopback socket when the app starts (before readiness, so a taken port is a startup error), serves
the Starlette application of `wardian.console.web` with uvicorn's HTTP protocol, and stops before the app's store
writer closes: it ends its live streams, stops accepting, and gives requests in progress a bounded grace period.

Why uvicorn's `Server.startup`/`shutdown` and not `serve`: `serve` installs its own SIGINT/SIGTERM handlers (the app
owns those) and runs a 0.1 s tick loop for its Date header; the console needs neither. Why no sse-starlette: its
shutdown watcher is a loop task outside any task group that polls every 0.5 s, and it patches uvicorn's
`Server.handle_exit` on import; the console's streams end on the app's own stop event instead.

Why the console accepts its connections itself (`wardian.app.listen`, the control socket's accept loop) and hands each
to uvicorn's protocol, rather than letting uvicorn's asyncio server accept them: any local user can reach the port, and
uvicorn has nothing against a client that connects and never sends a request. Its keep-alive timeout starts only after a
first response and stops at any byte, and `limit_concurrency` still accepts every connection (it answers requests beyond
the limit with 503), so silent connections would hold descriptors until none were left; asyncio's own accept survives
EMFILE but logs each failed accept with a traceback, and retries a second later. Here a connection counts against
`MAX_CONSOLE_CONNECTIONS` from its accept, is closed once it has been silent for `CONSOLE_IDLE_S` with no request in
flight (a live view's event stream is a request in flight, never cut), and the longest idle one makes room for a new one
at the cap.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time
from typing import Any

import anyio
import anyio.abc
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from wardian import errors
from wardian.app.listen import CONSOLE_IDLE_S, MAX_CONSOLE_CONNECTIONS, Connections, accept_forever, connection_cap
from wardian.app.service import AppService
from wardian.app.signals import ChangeFeed
from wardian.console.address import ConsoleAddress
from wardian.console.auth import ConsoleAuth
from wardian.console.web import ConsoleWeb

log = logging.getLogger("wardian.console")

SHUTDOWN_GRACE_S = 5.0
_BUSY_TEXT = b"the console serves as many connections as it allows, each with a request in flight; try again shortly\n"
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
         b"retry-after: 1\r\ncontent-length: %d\r\n\r\n%s" % (len(_BUSY_TEXT), _BUSY_TEXT))


class Console:
    """The console of one app: its socket, logins and web application."""

    def __init__(self, service: AppService, feed: ChangeFeed, address: ConsoleAddress) -> None:
        self.auth = ConsoleAuth()
        self.feed = feed
        self._sock = _bind(address)
        self.port = int(self._sock.getsockname()[1])
        self._base = address.url(self.port)
        self.web = ConsoleWeb(service, self.auth, feed, port=self.port)
        self._stop = anyio.Event()
        self._stopped = anyio.Event()
        self.connections: Connections[_Http] = Connections(
            connection_cap(MAX_CONSOLE_CONNECTIONS), CONSOLE_IDLE_S, "the web console")

    @property
    def address(self) -> str:
        return self._base

    def mint_login(self) -> tuple[str, int]:
        token, expires = self.auth.mint_login()
        return f"{self._base}/login?token={token}", expires

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until `stop`; reports started once the socket accepts connections."""
        _route_uvicorn_logs()
        config = uvicorn.Config(self.web.app, http="h11", ws="none", lifespan="off", interface="asgi3",
                                access_log=False, log_config=None, server_header=False, date_header=False,
                                proxy_headers=False, timeout_graceful_shutdown=int(SHUTDOWN_GRACE_S))
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        try:
            await server.startup(sockets=[])  # no listener of uvicorn's own: `_admit` hands it each connection
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.connections.sweep)
                tg.start_soon(accept_forever, self._sock, lambda sock: self._admit(server, sock, tg),
                              self.connections.make_room, "the web console")
                log.info("web console on %s (log in with `wardian console`)", self._base)
                task_status.started()
                await self._stop.wait()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_GRACE_S + 1):
                self.web.close()  # live streams end, so shutdown is not held up by them
                if server.started:
                    await server.shutdown(sockets=[self._sock])
            self._sock.close()
            self._stopped.set()

    async def _admit(self, server: uvicorn.Server, sock: socket.socket, tg: anyio.abc.TaskGroup) -> None:
        """Serve an accepted connection with uvicorn's HTTP protocol, or refuse it with a 503 at the cap."""
        conn = _Http(server.config, server.server_state, server.lifespan.state, self.connections)
        if not self.connections.admit(conn):
            tg.start_soon(self.connections.refuse, sock, _BUSY)
            return
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: conn, sock)
        except OSError:
            self.connections.discard(conn)
            sock.close()

    async def stop(self) -> None:
        """Stop serving and return once the server has shut down (bounded)."""
        self._stop.set()
        self.web.close()
        with anyio.move_on_after(SHUTDOWN_GRACE_S + 2):
            await self._stopped.wait()


class _Http(H11Protocol):
    """uvicorn's HTTP/1.1 protocol for one connection, counted in the console's `Connections` (`listen.Tracked`)."""

    def __init__(self, config: uvicorn.Config, server_state: Any, app_state: dict[str, Any],
                 connections: Connections[_Http]) -> None:
        super().__init__(config=config, server_state=server_state, app_state=app_state)
        self._connections = connections
        self._since = time.monotonic()

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self)
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        self._since = time.monotonic()
        super().on_response_complete()

    def idle_since(self) -> float | None:
        """Since its opening or its last response; None while a request is in flight (a live stream is one)."""
        cycle = self.cycle
        return None if cycle is not None and not cycle.response_complete else self._since

    def close_idle(self) -> bool:
        if self.transport is None or self.idle_since() is None:
            return False  # not connected yet, or serving a request
        self.transport.close()
        return True


def _bind(address: ConsoleAddress) -> socket.socket:
    """The listening socket, bound now so that a taken port fails the app's start with a clear error.

    Raises:
        AddressInUse: another program listens there.
        InvalidArguments: the address cannot be bound otherwise (e.g. not an address of this machine).
    """
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: uvicorn writes a response's head and body apart, and with Nagle on, a
        # kept-alive browser's delayed ACK held each body back ~40 ms (measured with scripts/bench.py --only console).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((address.host, address.port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise errors.AddressInUse(
                f"the console cannot listen on {address.url()}: the address is in use (by another program, or "
                "another wardian app); choose another port with --console 127.0.0.1:PORT, or --console "
                "127.0.0.1:0 for any free one", field="console", address=address.url(),
                allowed="a free loopback port") from None
        raise errors.InvalidArguments(
            f"the console cannot listen on {address.url()}: {exc.strerror}; choose another port with "
            "--console 127.0.0.1:PORT", field="console", allowed="a free loopback port") from None
    return sock


def _route_uvicorn_logs() -> None:
    """uvicorn's own warnings and errors go to the app log; its access log is off (a login URL holds a secret)."""
    ours = logging.getLogger("wardian")
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers = list(ours.handlers)
        logger.setLevel(logging.WARNING)
        logger.propagate = False
    logging.getLogger("uvicorn.access").disabled = True
