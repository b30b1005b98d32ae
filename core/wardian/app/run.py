"""`wardian app run`: own one home, serve its control socket until SIGTERM/SIGINT or `app/stop`.

Startup order: check the console address if one is asked for, a private home (umask 077; an open home refused, or
tightened when an app made it), secure `run/`, take the home lock (one app per home), open and migrate the store,
bind the socket (0600) replacing a stale one and the web console's loopback port (`--console`), then report
readiness. Shutdown: stop accepting, end the console, let in-flight store operations commit, close the store, remove
the socket.

The web console is built by the CLI and passed in (`ConsoleSetup`): the app imports none of it, so an app without it
never loads Starlette, uvicorn or Jinja2.
"""

from __future__ import annotations

import functools
import gc
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.abc

from wardian import errors, filelock
from wardian.app.logfile import AppLog
from wardian.app.notify import Notifier
from wardian.app.ports import ConsoleSetup, WebConsole
from wardian.app.runtime import Runtime
from wardian.app.server import ControlServer
from wardian.app.service import AppService
from wardian.app.signals import ChangeFeed, MailboxSignals
from wardian.app.writer import StoreWriter
from wardian.home import Home
from wardian.home_setup import prepare_home
from wardian.store import Store, hosts, open_sqlite
from wardian.store.api import WaitReader
from wardian.store.url import check_store_url, redact_url

if sys.platform == "win32":  # the control channel is a named pipe there (app/_windows.py)
    from wardian import pipes
    from wardian.app import _windows

if TYPE_CHECKING:
    from wardian.store.postgres import Announcements

log = logging.getLogger("wardian.app")

MAX_HOST_NAME = 64
# logs/app.log is rotated at this size, and this many older files are kept: at most 60 MiB of app log in a home.
APP_LOG_MAX_BYTES = 10 * 1024 * 1024
APP_LOG_BACKUPS = 5
# The embedded store's lease never needs renewing: its home lock, not the lease, keeps a second app out.
EMBEDDED_LEASE_MS = 100 * 365 * 24 * 3600 * 1000
# A shared store's host lease: renewed every HEARTBEAT_S; a host whose app stopped renewing shows offline (and may be
# taken over from elsewhere) once HOST_LEASE_MS passed.
HOST_LEASE_MS = 10_000
HEARTBEAT_S = 2.0
# How long the app's stop waits for the wait reader's connection to close (it makes no round trip).
WAIT_READER_CLOSE_S = 2.0


class HomeLock:
    """An exclusive lock on `run/app.lock` (`wardian.filelock`), held for the app's lifetime; the system drops it on
    death."""

    def __init__(self, home: Home) -> None:
        self._home = home
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            # Not inherited by children: O_CLOEXEC on POSIX, O_NOINHERIT on Windows.
            flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOINHERIT", 0)
            fd = os.open(self._home.lock_path, flags, 0o600)
        except OSError as exc:
            raise errors.StorageUnavailable(
                f"the home {self._home.root} cannot be written ({exc.strerror}); an app needs a writable home",
                field="home") from None
        try:
            filelock.lock(fd, wait=False)
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
    """The app's log: `logs/app.log`, rotated at APP_LOG_MAX_BYTES with APP_LOG_BACKUPS older files kept
    (`app.log.1` … newest first), so a long-running or chatty app (a refused connection logs a line) never fills the
    disk; and `stream` (the terminal of `app run`) when given."""
    root = logging.getLogger("wardian")
    root.setLevel(logging.INFO)
    handler = AppLog(home.log_dir / "app.log", APP_LOG_MAX_BYTES, APP_LOG_BACKUPS, stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)


def default_host_name() -> str:
    """The machine's host name, cut to what a host name may be (`--host-name` overrides it)."""
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in socket.gethostname())[:MAX_HOST_NAME]
    return name or "localhost"


def check_host_name(name: str) -> str:
    """Raises: InvalidArguments (not 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit)."""
    if not (
        0 < len(name) <= MAX_HOST_NAME
        and name[0].isalnum()
        and name.isascii()
        and all(c.isalnum() or c in "._-" for c in name)
    ):
        raise errors.InvalidArguments(
            f"--host-name {name[:80]!r} is not a host name",
            field="host_name",
            allowed=f"1-{MAX_HOST_NAME} ASCII letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return name


def migrate_shared_store(url: str) -> tuple[int, int]:
    """`wardian store migrate`: create or upgrade the shared store's schema; (version before, version now).

    Raises: InvalidArguments (a refused URL), StorageUnavailable (no connection, or a schema newer than this wardian).
    """
    from wardian.store.postgres import migrate_store  # psycopg is imported only for a shared store

    return migrate_store(url)


def choose_store(home: Home, store_url: str | None) -> str | None:
    """The shared store's URL this home's app serves, or None for the home's own SQLite file.

    A home that served a shared store remembers it (`store.url`), so a later start needs no --store; a home is never
    switched between stores silently.

    Raises:
        InvalidArguments: a bad URL, another shared store than the home's, or a shared store for a home that holds an
            embedded store (its records would be left behind).
    """
    remembered = None
    with suppress(FileNotFoundError, NotADirectoryError):  # no home yet: its creation reports what is wrong
        remembered = home.store_url_path.read_text(encoding="utf-8").strip() or None
    if store_url is None:
        return remembered
    check_store_url(store_url)
    if remembered is not None and remembered != store_url:
        raise errors.InvalidArguments(
            f"this home serves the shared store {redact_url(remembered)}; give that --store (or none), or use another "
            "home for another store",
            field="store",
            allowed=redact_url(remembered),
        )
    if remembered is None and home.db_path.exists():
        raise errors.InvalidArguments(
            f"this home holds an embedded store ({home.db_path}): a shared store would leave its agents and records "
            "behind; use a new home for the shared store",
            field="store",
        )
    return store_url


def run_app(
    home: Home,
    *,
    on_ready: Callable[[], None] | None = None,
    log_stream: IO[str] | None = None,
    console: ConsoleSetup | None = None,
    host_name: str | None = None,
    store_url: str | None = None,
    notify: Sequence[str] | None = None,
) -> None:
    """Run the app in the foreground until it is told to stop; with `console`, serve that web console too; with
    `notify`, run that command for each notification (`wardian.app.notify`).

    Raises:
        HomeError (AlreadyRunning, InsecureRuntimeDir, HomePathTooLong), StorageError, InvalidArguments (the console's
        address is not loopback, or cannot be bound).
    """
    if host_name is not None:
        check_host_name(host_name)
    url = choose_store(home, store_url)  # refused before anything of the home changes
    if console is not None:
        console.check()  # refused before anything of the home changes
    # Everything the app creates in the home (the store and its WAL, logs, agents' provider homes) is owner-only,
    # whatever umask the app was started with: the home holds every message, task and reply.
    os.umask(0o077)
    tightened = prepare_home(home)
    lock = HomeLock(home)
    lock.acquire()
    try:
        configure_logging(home, log_stream)
        if tightened:
            log.warning("made these paths of the home private (they were open to other users): %s",
                        ", ".join(str(p) for p in tightened))
        _serve_store(home, url, host_name or default_host_name(), on_ready, console, notify)
    finally:
        with suppress(OSError):
            home.pid_path.unlink()
        lock.release()


def _open_store(home: Home, url: str | None) -> tuple[Store, Announcements | None]:
    """The home's own SQLite store, or the shared one at `url` with its announcements of other apps' commits."""
    if url is None:
        return open_sqlite(home.db_path), None
    from wardian.store.postgres import PostgresBackend  # psycopg is imported only for a shared store

    backend = PostgresBackend.open(url)
    return Store(backend), backend.announcements()


def _serve_store(home: Home, url: str | None, name: str, on_ready: Callable[[], None] | None,
                 console: ConsoleSetup | None, notify: Sequence[str] | None = None) -> None:
    """Open the store, claim the host `name` in it, serve until stopped, then give the host up and close the store."""
    store, announcements = _open_store(home, url)
    try:
        # On the embedded store the home lock makes this app the only one: it takes the host whatever the row
        # says (a killed app leaves its lease behind) and serves every agent. On a shared store a live app of the
        # same host name elsewhere refuses this one.
        hosts.claim_host(
            store,
            name,
            secrets.token_hex(16),
            EMBEDDED_LEASE_MS if url is None else HOST_LEASE_MS,
            pid=os.getpid(),
            machine=socket.gethostname(),
            home=str(home.root),
            force=url is None,
        )
        if url is not None:
            _remember_store(home, url)
            log.info("serving host %s of the shared store %s", name, redact_url(url))
        anyio.run(_serve, home, store, on_ready, console, announcements, notify)
        if url is not None:
            with suppress(errors.WardianError):
                hosts.release_host(store)  # a clean stop: the host shows offline at once
    finally:
        store.close()


def _remember_store(home: Home, url: str) -> None:
    if not home.store_url_path.exists():
        fd = os.open(home.store_url_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(url + "\n")


async def _serve(
    home: Home,
    store: Store,
    on_ready: Callable[[], None] | None,
    console_setup: ConsoleSetup | None = None,
    announcements: Announcements | None = None,
    notify: Sequence[str] | None = None,
) -> None:
    # What the start made (modules, classes, the store) lives as long as the app: out of the collector's sight, a
    # full collection, which stops the event loop while it runs, walks only what serving made since. Measured with
    # `scripts/bench.py --only approvals` (2-core VM): the one full collection of the run 18.3 ms before, 4.8 after.
    gc.freeze()
    writer = StoreWriter(store)
    stopping = anyio.Event()
    signals_ = MailboxSignals()
    runtime = Runtime(home, writer, signals_)
    service = AppService(home, writer, signals_, stopping.set, runtime)
    server = ControlServer(service)
    notifier = None
    if notify is not None:
        notifier = Notifier(notify, home.root, writer, signals_)
        runtime.approvals.on_waiting = notifier.approval_waiting
    console: WebConsole | None = None
    if console_setup is not None:
        feed = ChangeFeed()
        writer.on_commit = feed.changed  # only with a console: without one, commits signal nothing
        console = console_setup(service, feed)  # binds now: a taken port fails the start
        service.console = console
    if sys.platform == "win32":
        pipe_name = pipes.pipe_name(home.root)
        pipe = _windows.PipeListener(pipe_name)
        channel = f"pipe {pipe_name}"
        serve, close = functools.partial(server.serve_pipe, pipe), pipe.aclose
    else:
        channel = f"socket {home.socket_path}"
        listener = await _bind_socket(home)
        serve = functools.partial(server.serve, listener.extra(anyio.abc.SocketAttribute.raw_socket))
        close = functools.partial(_close_listener, listener)
    home.pid_path.write_text(f"{os.getpid()}\n", encoding="utf-8")
    # The handlers are installed before readiness is reported, so a SIGTERM right after start is clean.
    with _stop_signals() as signals:
        await _serve_until_stopped(
            home, writer, runtime, (serve, close, channel), stopping, signals, on_ready, console, announcements,
            notifier,
        )


async def _bind_socket(home: Home) -> anyio.abc.Listener[anyio.abc.SocketStream]:
    # The lock is ours, so a socket file left here belongs to a dead app: replace it.
    with suppress(FileNotFoundError):
        os.unlink(home.socket_path)
    old_umask = os.umask(0o177)
    try:
        return await anyio.create_unix_listener(home.socket_path, mode=0o600)
    finally:
        os.umask(old_umask)


async def _close_listener(listener: anyio.abc.Listener[anyio.abc.SocketStream]) -> None:
    with suppress(OSError):
        await listener.aclose()


@contextmanager
def _stop_signals() -> Iterator[AsyncIterator[int]]:
    """SIGTERM and SIGINT; on Windows none (asyncio has no signal handlers there): the app stops on `app/stop`, and
    `TerminateProcess` ends it outright (its agents' Job Objects end their trees then)."""
    if sys.platform == "win32":
        yield _never()
        return
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        yield signals


async def _never() -> AsyncIterator[int]:
    await anyio.sleep_forever()
    yield 0  # never reached: it makes this an async generator


async def _serve_until_stopped(
    home: Home,
    writer: StoreWriter,
    runtime: Runtime,
    listening: tuple[Callable[..., Coroutine[Any, Any, None]], Callable[[], Coroutine[Any, Any, None]], str],
    stopping: anyio.Event,
    signals: AsyncIterator[int],
    on_ready: Callable[[], None] | None,
    console: WebConsole | None = None,
    announcements: Announcements | None = None,
    notifier: Notifier | None = None,
) -> None:
    async with anyio.create_task_group() as outer:
        await outer.start(writer.run)
        async with anyio.create_task_group() as providers:
            reader = writer.wait_reader
            if reader is not None:
                await providers.start(_keep_wait_reader, reader)
            if notifier is not None:
                await providers.start(notifier.run)  # following the person's tasks before recovery ends any
            # Recovery (lost bindings -> uncertain, captured outcomes -> published) runs before readiness.
            await providers.start(runtime.run)
            if announcements is not None:
                providers.start_soon(_heartbeat, writer, stopping)
                providers.start_soon(_follow_announcements, announcements, runtime)
            if console is not None:
                await providers.start(console.run)  # serving before readiness is reported
            await _serve_clients(home, listening[0], listening[2], stopping, signals, on_ready)
            if console is not None:
                await console.stop()  # its pages read the store: it ends before the writer does
            providers.cancel_scope.cancel()  # owners stop their app-servers in shielded cleanup
        await listening[1]()
        with suppress(FileNotFoundError):
            os.unlink(home.socket_path)
        writer.close()


async def _serve_clients(home: Home, serve: Callable[..., Coroutine[Any, Any, None]], channel: str,
                         stopping: anyio.Event, signals: AsyncIterator[int], on_ready: Callable[[], None] | None
                         ) -> None:
    """Serve the control channel until stopped; `channel` names it in the log (`socket PATH`, or `pipe NAME` on
    Windows, where no socket file is made)."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(_watch_signals, signals, stopping)
        await tg.start(serve)
        log.info("app ready: home %s, pid %d, %s", home.root, os.getpid(), channel)
        if on_ready is not None:
            on_ready()
        await stopping.wait()
        log.info("app stopping")
        tg.cancel_scope.cancel()


async def _heartbeat(writer: StoreWriter, stopping: anyio.Event) -> None:
    """Renew this app's host lease; an app whose lease another app took stops (its claims are fenced anyway)."""
    while True:
        await anyio.sleep(HEARTBEAT_S)
        try:
            renewed = await writer.call(hosts.renew_host, HOST_LEASE_MS)
        except errors.WardianError as exc:
            log.warning("could not renew the host lease (%s: %s); trying again", exc.code, exc.message)
            continue
        if not renewed:
            log.error(
                "another app took this host's lease (this app was cut off longer than %d ms); stopping", HOST_LEASE_MS
            )
            stopping.set()
            return


async def _keep_wait_reader(reader: WaitReader, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
                            ) -> None:
    """The shared store's first look of waits (`Backend.wait_reader`): its connection opened before readiness (its
    first attempt bounded by the store's connect timeout; until it is open waits look through the writer), kept
    while the app runs, and closed, shielded and bounded, when the app stops (after the clients were served)."""
    try:
        await reader.keep(task_status.started)
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(WAIT_READER_CLOSE_S):
            await reader.close()


async def _follow_announcements(announcements: Announcements, runtime: Runtime) -> None:
    """Act on what other apps of the shared store commit (and read durable state again after each reconnect)."""
    async for event in announcements.events():
        try:
            await runtime.other_hosts.announced(event)
        except errors.WardianError as exc:
            log.warning("could not act on an announcement (%s: %s)", exc.code, exc.message)


async def _watch_signals(signals: AsyncIterator[int], stopping: anyio.Event) -> None:
    async for _ in signals:
        stopping.set()
        return
