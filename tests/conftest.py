"""Shared fixtures: a real `wardian app run` process on a private, short-pathed temporary home."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, cast

import pytest
from hypothesis import HealthCheck

from wardian.client import AppClient
from wardian.home import Home
from wardian_harness.hosts.postgres import PgNotFound, PrivateCluster, find_pg_bin, reap_orphans
from wardian_harness.processes import apps
from wardian_harness.processes.app_records import reap_orphan_apps
from wardian_harness.processes.apps import AppProcess

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
    return apps.fresh_home(prefix)


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

    def add_agent(self, name: str | None = None, provider: str = "codex",
                  command: list[str] | None = None) -> tuple[dict[str, Any], str]:
        """Register an agent (a unique name unless given; `command` for a generic ACP one) and issue it a session
        token."""
        name = name or f"agent{next(_names)}"
        params: dict[str, Any] = {"name": name, "provider": provider}
        if command is not None:
            params["command"] = command
        agent = self.call("agent/add", params)
        token = self.call("agent/session", {"agent": agent["uuid"]})["session_id"]
        self.agents[agent["uuid"]] = agent
        return agent, token

    def env(self, token: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
        env["WARDIAN_HOME"] = str(self.home.root)
        if token is not None:
            env["WARDIAN_SESSION_ID"] = token
        return env

    def records_for(self, token: str, rounds: int = 600) -> list[dict[str, Any]]:
        """Wait (bounded: `rounds` waits of 100 ms on the mailbox) for records of the caller of `token`, acknowledge
        them, and return them."""
        for _ in range(rounds):
            page = self.call("mailbox/receive", {"session": token, "limit": 100, "timeout_ms": 100})
            if page["records"]:
                self.call("mailbox/receive", {"session": token, "ack_cursor": page["cursor"], "limit": 1})
                return list(page["records"])
        raise AssertionError("no record arrived")

    def cli(self, *args: str, token: str | None = None, input: bytes | None = None,
            check: bool = False) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*wardian_cmd(), *args], env=self.env(token), input=input,
                              capture_output=True, timeout=90, check=check)


def start_app(
    root: Path, extra_env: dict[str, str] | None = None, *, store_url: str | None = None, host_name: str | None = None,
    extra_args: tuple[str, ...] = (),
) -> AppProcess:
    """Start `wardian app run` and return once it accepts connections (the product's own start helper); on a shared
    PostgreSQL store with `store_url`, serving `host_name`. Its stderr is drained into memory."""
    proc = apps.start(root, env=apps.app_env(extra_env), command=wardian_cmd(), store_url=store_url,
                      host_name=host_name, extra_args=extra_args)
    return cast(AppProcess, proc)  # no stderr file and no spawn given: the harness drains it (an AppProcess)


def stop_app(proc: subprocess.Popen[bytes]) -> int:
    """Stop the app (SIGTERM, then SIGKILL) and return its exit status once it has ended."""
    return apps.stop(proc)


@contextmanager
def app_on_a_fresh_home(**running_app: Any) -> Iterator[AppHandle]:
    """An app on a fresh home (`wardian_harness.processes.apps.running_app` with these arguments) as an
    `AppHandle`; stopped, and its home removed, after."""
    with apps.running_app(command=wardian_cmd(), **running_app) as running:
        handle = AppHandle(running.home, cast(AppProcess, running.proc), AppClient(running.home))
        try:
            yield handle
        finally:
            handle.client.close()
            stop_app(handle.proc)  # a test may have replaced the process (a restart)


@contextmanager
def app_on_root(root: Path, env: dict[str, str]) -> Iterator[AppHandle]:
    """An app on the home `root` with `env` added to its environment, as an `AppHandle`; stopped (whichever process
    it then is: a test may restart it) and the home removed after."""
    handle = AppHandle(Home(root), start_app(root, env), AppClient(Home(root)))
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
    with app_on_a_fresh_home(store_url=store_url) as handle:
        yield handle


@pytest.fixture(scope="module")
def shared_app(shared_store_url: str | None) -> Iterator[AppHandle]:
    """One app for a whole module (per backend in a BOTH_STORES module); tests isolate themselves by registering their
    own agents."""
    with app_on_a_fresh_home(store_url=shared_store_url) as handle:
        yield handle


def require_postgres() -> None:
    """Skip the calling test without Debian's postgresql, except on CI, where it fails."""
    try:
        find_pg_bin()
    except PgNotFound as exc:
        unavailable(f"PostgreSQL is not installed (scripts/setup.sh --with-system): {exc}")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop and remove the private PostgreSQL servers of test processes that are gone: a worker killed by kill -9 or a
    timeout never stopped its own. Runs in the controller and in each xdist worker; those of live processes (the other
    workers, other sessions) are left alone (`wardian_harness.hosts.postgres.reap_orphans`). The same for the apps such
    a process started (`wardian_harness.processes.app_records`)."""
    reap_orphan_apps()
    reap_orphans()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """As at the start: what a worker killed during this session left behind goes now, not at the next one."""
    reap_orphan_apps()
    reap_orphans()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PrivateCluster]:
    """A private PostgreSQL server for this test process (each xdist worker starts its own), stopped at the end."""
    require_postgres()
    with PrivateCluster() as cluster:
        yield cluster
