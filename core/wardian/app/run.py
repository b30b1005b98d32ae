"""`wardian app run`: own one home, serve its control socket until SIGTERM/SIGINT or `app/stop`.

Startup order: check the console address if one is asked for, a private home (umask 077; an open home refused, or
tightened when an app made it), secure `run/`, take the home lock (one app per home), open and migrate the store,
bind the socket (0600) replacing a stale one and the web console's loopback port (`--console`), then report
readiness. Shutdown: stop accepting, end the console, let in-flight store operations commit, close the store, remove
the socket.

The web console (#16) is imported only when asked for: an app without it never loads Starlette, uvicorn or Jinja2.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from typing import IO, TYPE_CHECKING

import anyio
import anyio.abc

from wardian import errors
from wardian.app.runtime import Runtime
from wardian.app.server import ControlServer
from wardian.app.service import AppService
from wardian.app.signals import ChangeFeed, MailboxSignals
from wardian.app.spawn import READY, report_ready
from wardian.app.writer import StoreWriter
from wardian.home import Home, prepare_home
from wardian.store import SqliteStore, Store

if TYPE_CHECKING:
    from wardian.console.address import ConsoleAddress
    from wardian.console.server import Console

log = logging.getLogger("wardian.app")


class HomeLock:
    """An exclusive flock on `run/app.lock`, held for the app's lifetime; the kernel drops it on death."""

    def __init__(self, home: Home) -> None:
        self._home = home
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self._home.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise errors.StorageUnavailable(
                f"the home {self._home.root} cannot be written ({exc.strerror}); an app needs a writable home",
                field="home") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = ""
            with suppress(OSError):
                pid = self._home.pid_path.read_text(encoding="utf-8").strip()
            raise errors.AlreadyRunning(
                f"an app is already running for {self._home.root}" + (f" (pid {pid})" if pid else ""),
                pid=int(pid) if pid.isdigit() else None) from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def configure_logging(home: Home, stream: IO[str] | None) -> None:
    root = logging.getLogger("wardian")
    root.setLevel(logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler = logging.FileHandler(home.log_dir / "app.log", encoding="utf-8")
    handler.setFormatter(fmt)
    root.addHandler(handler)
    if stream is not None:
        console = logging.StreamHandler(stream)
        console.setFormatter(fmt)
        root.addHandler(console)


def run_app(home: Home, *, on_ready: Callable[[], None] | None = None, log_stream: IO[str] | None = None,
            console: str | None = None) -> None:
    """Run the app in the foreground until it is told to stop; with `console` (an address, "" for the default), serve
    the web console there too.

    Raises:
        HomeError (AlreadyRunning, InsecureRuntimeDir, HomePathTooLong), StorageError, InvalidArguments (the console's
        address is not loopback, or cannot be bound).
    """
    console_address = None
    if console is not None:
        from wardian.console.address import parse_console_address

        console_address = parse_console_address(console)  # refused before anything of the home changes
    # Everything the app creates in the home (the store and its WAL, logs, agents' provider homes) is owner-only,
    # whatever umask the app was started with: the home holds every message, task and reply (#13).
    os.umask(0o077)
    tightened = prepare_home(home)
    lock = HomeLock(home)
    lock.acquire()
    try:
        configure_logging(home, log_stream)
        if tightened:
            log.warning("made these paths of the home private (they were open to other users): %s",
                        ", ".join(str(p) for p in tightened))
        store = SqliteStore.open(home.db_path)
        try:
            anyio.run(_serve, home, store, on_ready, console_address)
        finally:
            store.close()
    finally:
        with suppress(OSError):
            home.pid_path.unlink()
        lock.release()


async def _serve(home: Home, store: Store, on_ready: Callable[[], None] | None,
                 console_address: ConsoleAddress | None = None) -> None:
    writer = StoreWriter(store)
    stopping = anyio.Event()
    signals_ = MailboxSignals()
    runtime = Runtime(home, writer, signals_)
    service = AppService(home, writer, signals_, stopping.set, runtime)
    server = ControlServer(service)
    console: Console | None = None
    if console_address is not None:
        from wardian.console.server import Console

        feed = ChangeFeed()
        writer.on_commit = feed.changed  # only with a console: without one, commits signal nothing
        console = Console(service, feed, console_address)  # binds now: a taken port fails the start
        service.console = console
    # The lock is ours, so a socket file left here belongs to a dead app: replace it.
    with suppress(FileNotFoundError):
        os.unlink(home.socket_path)
    old_umask = os.umask(0o177)
    try:
        listener = await anyio.create_unix_listener(home.socket_path, mode=0o600)
    finally:
        os.umask(old_umask)
    home.pid_path.write_text(f"{os.getpid()}\n", encoding="utf-8")
    # The handlers are installed before readiness is reported, so a SIGTERM right after start is clean.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        await _serve_until_stopped(home, writer, runtime, server, listener, stopping, signals, on_ready, console)


async def _serve_until_stopped(home: Home, writer: StoreWriter, runtime: Runtime, server: ControlServer,
                               listener: anyio.abc.Listener[anyio.abc.SocketStream], stopping: anyio.Event,
                               signals: AsyncIterator[int], on_ready: Callable[[], None] | None,
                               console: Console | None = None) -> None:
    async with anyio.create_task_group() as outer:
        await outer.start(writer.run)
        async with anyio.create_task_group() as providers:
            # Recovery (lost bindings -> uncertain, captured outcomes -> published) runs before readiness.
            await providers.start(runtime.run)
            if console is not None:
                await providers.start(console.run)  # serving before readiness is reported
            await _serve_clients(home, server, listener, stopping, signals, on_ready)
            if console is not None:
                await console.stop()  # its pages read the store: it ends before the writer does
            providers.cancel_scope.cancel()  # owners stop their app-servers in shielded cleanup
        with suppress(OSError):
            await listener.aclose()
        with suppress(FileNotFoundError):
            os.unlink(home.socket_path)
        writer.close()


async def _serve_clients(home: Home, server: ControlServer, listener: anyio.abc.Listener[anyio.abc.SocketStream],
                         stopping: anyio.Event, signals: AsyncIterator[int],
                         on_ready: Callable[[], None] | None) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(_watch_signals, signals, stopping)
        tg.start_soon(listener.serve, server.handle_connection)
        log.info("app ready: home %s, pid %d, socket %s", home.root, os.getpid(), home.socket_path)
        if on_ready is not None:
            on_ready()
        await stopping.wait()
        log.info("app stopping")
        tg.cancel_scope.cancel()


async def _watch_signals(signals: AsyncIterator[int], stopping: anyio.Event) -> None:
    async for _ in signals:
        stopping.set()
        return


def main_run(home: Home, ready_fd: int | None, console: str | None = None) -> int:
    """Entry for `wardian app run`; reports readiness or the startup error on `ready_fd` when given."""
    try:
        run_app(home, on_ready=lambda: report_ready(ready_fd, READY), log_stream=sys.stderr, console=console)
    except errors.WardianError as exc:
        import orjson

        report_ready(ready_fd, orjson.dumps(exc.to_data()).decode("utf-8"))
        raise
    return 0
