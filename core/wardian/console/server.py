"""The web console inside the app: an HTTP server on the app's own event loop, in the app's task group (why: see
docs/decisions/0018-console-inside-the-app.md).

`Console` binds its loopback socket when the app starts (before readiness, so a taken port is a startup error), serves
the Starlette application of `wardian.console.web` with uvicorn's HTTP protocol, and stops before the app's store
writer closes: it ends its live streams, stops accepting, and gives requests in progress a bounded grace period.

Why uvicorn's `Server.startup`/`shutdown` and not `serve`: `serve` installs its own SIGINT/SIGTERM handlers (the app
owns those) and runs a 0.1 s tick loop for its Date header; the console needs neither. Why no sse-starlette: its
shutdown watcher is a loop task outside any task group that polls every 0.5 s, and it patches uvicorn's
`Server.handle_exit` on import; the console's streams end on the app's own stop event instead.
"""

from __future__ import annotations

import errno
import logging
import socket

import anyio
import anyio.abc
import uvicorn

from wardian import errors
from wardian.app.service import AppService
from wardian.app.signals import ChangeFeed
from wardian.console.address import ConsoleAddress
from wardian.console.auth import ConsoleAuth
from wardian.console.web import ConsoleWeb

log = logging.getLogger("wardian.console")

SHUTDOWN_GRACE_S = 5.0


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
            await server.startup(sockets=[self._sock])
            log.info("web console on %s (log in with `wardian console`)", self._base)
            task_status.started()
            await self._stop.wait()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_GRACE_S + 1):
                self.web.close()  # live streams end, so shutdown is not held up by them
                if getattr(server, "servers", None):
                    await server.shutdown(sockets=[self._sock])
            self._sock.close()
            self._stopped.set()

    async def stop(self) -> None:
        """Stop serving and return once the server has shut down (bounded)."""
        self._stop.set()
        self.web.close()
        with anyio.move_on_after(SHUTDOWN_GRACE_S + 2):
            await self._stopped.wait()


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
