"""Shared fixtures: a real `wardian app run` process on a private, short-pathed temporary home."""

from __future__ import annotations

import io
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, cast

import pytest
from hypothesis import HealthCheck

from wardian.app.spawn import start_app as spawn_app
from wardian.client import AppClient
from wardian.errors import WardianError
from wardian.home import Home
from wardian_harness.postgres import PgNotFound, PrivateCluster, find_pg_bin, reap_orphans

# Every current Hypothesis health check: iterating HealthCheck skips the deprecated ones (unlike __members__),
# but type checkers read its elements as the enum's metaclass.
ALL_HEALTH_CHECKS = cast("list[HealthCheck]", list(HealthCheck))

_names = itertools.count(1)


def unavailable(reason: str) -> NoReturn:
    """A real component the test needs is not installed: the test is skipped here, and fails on CI (`CI` set), where
    `scripts/setup.sh` installs everything, so a missing piece there is a broken set-up, never a silent skip."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def pinned_npm_tool(path: Path, what: str) -> Path:
    """`path` of a pinned npm tool (node_modules/.bin); missing, the test fails on CI and is skipped elsewhere."""
    if not path.exists():
        unavailable(f"{path} is missing: run `scripts/setup.sh --with-node` to install the pinned {what}")
    return path


def short_home(prefix: str = "wh") -> Path:
    """A fresh home under /tmp: pytest's tmp paths can exceed a Unix socket's 108-byte address."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def wardian_cmd() -> list[str]:
    """The CLI under test: WARDIAN_TEST_CLI selects a frozen executable, else this interpreter's module."""
    exe = os.environ.get("WARDIAN_TEST_CLI")
    return [exe] if exe else [sys.executable, "-m", "wardian"]


@dataclass
class AppHandle:
    home: Home
    proc: subprocess.Popen[bytes]
    client: AppClient
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        with AppClient(self.home) as c:
            return c.call(method, params, **kw)

    def add_agent(self, name: str | None = None, provider: str = "codex") -> tuple[dict[str, Any], str]:
        """Register an agent (a unique name unless given) and issue it a session token."""
        name = name or f"agent{next(_names)}"
        agent = self.call("agent/add", {"name": name, "provider": provider})
        token = self.call("agent/session", {"agent": agent["uuid"]})["session_id"]
        self.agents[agent["uuid"]] = agent
        return agent, token

    def env(self, token: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
        env["WARDIAN_HOME"] = str(self.home.root)
        if token is not None:
            env["WARDIAN_SESSION_ID"] = token
        return env

    def cli(self, *args: str, token: str | None = None, input: bytes | None = None,
            check: bool = False) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*wardian_cmd(), *args], env=self.env(token), input=input,
                              capture_output=True, timeout=90, check=check)


class AppProcess(subprocess.Popen[bytes]):
    """A `wardian app run` under test. Its stderr is a pipe read continuously into `stderr_data` by a thread of
    its own, never left unread: a chatty app (10,000 refused sessions log a line each) would block on a full pipe.
    The thread closes the pipe at EOF."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs, stderr=subprocess.PIPE)
        self.stderr_data = bytearray()
        self._drainer = threading.Thread(target=self._drain, name=f"app-stderr-{self.pid}", daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        # A binary Popen with the default bufsize gives a BufferedReader: read1 returns what is there now.
        stream = cast(io.BufferedReader, self.stderr)
        assert stream is not None
        try:
            with suppress(OSError, ValueError):
                while chunk := stream.read1(65536):
                    self.stderr_data += chunk
        finally:
            stream.close()

    def stderr_output(self, timeout_s: float = 30) -> bytes:
        """What the app wrote to stderr so far; all of it once the app has exited (then the rest is waited for, up
        to `timeout_s`: a child that inherited the pipe could keep it open)."""
        if self.poll() is not None:
            self._drainer.join(timeout_s)
        return bytes(self.stderr_data)


def start_app(
    root: Path, extra_env: dict[str, str] | None = None, *, store_url: str | None = None, host_name: str | None = None,
    extra_args: tuple[str, ...] = (),
) -> AppProcess:
    """Start `wardian app run` and return once it accepts connections (the product's own start helper); on a shared
    PostgreSQL store with `store_url`, serving `host_name`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    env.update(extra_env or {})
    spawned: list[AppProcess] = []

    def spawn(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        spawned.append(AppProcess(argv, start_new_session=True, **kwargs))
        return spawned[0]

    try:
        extra = [*(("--store", store_url) if store_url else ()), *(("--host-name", host_name) if host_name else ()),
                 *extra_args]
        spawn_app(root, command=wardian_cmd(), env=env, spawn=spawn, timeout_s=120, extra_args=extra)
    except WardianError as exc:
        err = spawned[0].stderr_output(10) if spawned else b""
        raise RuntimeError(f"app did not start: {exc.code}: {exc.message} {err.decode(errors='replace')[-2000:]}") \
            from None
    return spawned[0]


def stop_app(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    if isinstance(proc, AppProcess):
        proc.stderr_output()  # read to EOF; the drainer closes the pipe
    elif proc.stderr is not None:
        proc.stderr.close()
    return proc.returncode


def _app_on_a_fresh_home(store_url: str | None = None) -> Iterator[AppHandle]:
    root = short_home()
    proc = start_app(root, store_url=store_url)
    handle = AppHandle(Home(root), proc, AppClient(Home(root)))
    try:
        yield handle
    finally:
        handle.client.close()
        stop_app(handle.proc)
        shutil.rmtree(root, ignore_errors=True)


STORES = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that sets `BOTH_STORES = True` runs each test that uses `app` on both backends: the home's
    SQLite file, and a fresh database of the test process's private PostgreSQL server."""
    if getattr(metafunc.module, "BOTH_STORES", False) and "store_backend" in metafunc.fixturenames:
        metafunc.parametrize("store_backend", STORES, indirect=True, scope="module")


@pytest.fixture(scope="module")
def store_backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "sqlite"))


def _database(request: pytest.FixtureRequest, store_backend: str) -> str | None:
    if store_backend == "sqlite":
        return None
    cluster: PrivateCluster = request.getfixturevalue("pg_cluster")
    return cluster.database()


@pytest.fixture
def store_url(request: pytest.FixtureRequest, store_backend: str) -> str | None:
    """None for the embedded store, else the URL of a fresh database on the private server."""
    return _database(request, store_backend)


@pytest.fixture(scope="module")
def shared_store_url(request: pytest.FixtureRequest, store_backend: str) -> str | None:
    """As `store_url`, one for the whole module (`shared_app`)."""
    return _database(request, store_backend)


@pytest.fixture
def app(store_url: str | None) -> Iterator[AppHandle]:
    """A fresh app on its own home (and, in a BOTH_STORES module, on each backend), stopped (and its home removed)
    after the test."""
    yield from _app_on_a_fresh_home(store_url)


@pytest.fixture(scope="module")
def shared_app(shared_store_url: str | None) -> Iterator[AppHandle]:
    """One app for a whole module (per backend in a BOTH_STORES module); tests isolate themselves by registering their
    own agents."""
    yield from _app_on_a_fresh_home(shared_store_url)


def require_postgres() -> None:
    """Skip the calling test without Debian's postgresql, except on CI, where it fails."""
    try:
        find_pg_bin()
    except PgNotFound as exc:
        unavailable(f"PostgreSQL is not installed (scripts/setup.sh --with-system): {exc}")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop and remove the private PostgreSQL servers of test processes that are gone: a worker killed by kill -9 or a
    timeout never stopped its own. Runs in the controller and in each xdist worker; those of live processes (the other
    workers, other sessions) are left alone (`wardian_harness.postgres.reap_orphans`)."""
    reap_orphans()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """As at the start: what a worker killed during this session left behind goes now, not at the next one."""
    reap_orphans()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PrivateCluster]:
    """A private PostgreSQL server for this test process (each xdist worker starts its own), stopped at the end."""
    require_postgres()
    with PrivateCluster() as cluster:
        yield cluster
