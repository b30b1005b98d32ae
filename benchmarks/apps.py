"""The app under test (`wardian_harness.processes.apps.running_app`, its stderr kept in the home) and its agents."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.config import REPO
from wardian.client import AppClient
from wardian.home import Home
from wardian.home_setup import adopt_home
from wardian_harness.processes.apps import RunningApp, app_env, fresh_home, running_app

__all__ = ["RunningApp", "add_agents", "bench_app", "console_script", "cpu_seconds", "drain_mailbox", "fresh_app",
           "new_home", "pid_cpu_seconds", "plain_env", "start_minimal_server"]


def new_home() -> Path:
    """A new wardian home under /tmp (short: a Unix socket path must fit in 108 bytes), made one at once: a benchmark
    puts its own files there (a fake Codex, timings, the app's stderr) before the app starts, and the app takes only a
    folder wardian made or an empty one."""
    root = fresh_home("wbench")
    adopt_home(Home(root))
    return root


def plain_env() -> dict[str, str]:
    """This process's environment without `WARDIAN_*`: what every child of the bench starts from."""
    return app_env()


def start_minimal_server(shape: str, socket_path: str, db_path: str) -> subprocess.Popen[str]:
    """`benchmarks.minimal_server` in `shape` on the store at `db_path`, listening on `socket_path` once this returns;
    the caller stops it (SIGTERM; its stdout then says its batches and operations)."""
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.minimal_server", shape, socket_path, db_path],
                            cwd=REPO, env=plain_env(), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        proc.wait()
        raise RuntimeError(f"benchmarks.minimal_server {shape} did not start")
    return proc


def cpu_seconds(app: RunningApp) -> float:
    """User + system CPU time the app process has used so far (Linux /proc)."""
    return pid_cpu_seconds(app.proc.pid)


def pid_cpu_seconds(pid: int) -> float:
    """User + system CPU time process `pid` has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def bench_app(root: Path, extra_env: dict[str, str] | None = None, extra_args: tuple[str, ...] = (),
              timeout_s: float = 60) -> Iterator[RunningApp]:
    """An app on the home at `root` (the caller removes it), its stderr in `root/bench-app.stderr`."""
    with running_app(root, extra_env=extra_env, stderr_file=root / "bench-app.stderr", timeout_s=timeout_s,
                     stop_timeout_s=30, extra_args=extra_args) as app:
        yield app


@contextlib.contextmanager
def fresh_app(store_url: str | None = None, host_name: str | None = None) -> Iterator[RunningApp]:
    """An app on a fresh home: on its own SQLite file, or serving `host_name` of the shared store `store_url`."""
    root = new_home()
    extra = (*(("--store", store_url) if store_url else ()), *(("--host-name", host_name) if host_name else ()))
    try:
        with bench_app(root, extra_args=extra) as app:
            yield app
    finally:
        shutil.rmtree(root, ignore_errors=True)


def add_agents(client: AppClient, prefix: str, count: int) -> list[tuple[dict[str, Any], str]]:
    """Register `count` agents and issue each a session: [(agent, token)]."""
    out = []
    for i in range(count):
        agent = client.call("agent/add", {"name": f"{prefix}{i}", "provider": "codex"})
        token = client.call("agent/session", {"agent": agent["uuid"]})["session_id"]
        out.append((agent, token))
    return out


def drain_mailbox(client: AppClient, token: str) -> None:
    """Receive and acknowledge everything unacknowledged, so `mailbox/wait` blocks again."""
    page = client.call("mailbox/receive", {"session": token, "limit": 100})
    while page["records"]:
        page = client.call("mailbox/receive", {"session": token, "limit": 100, "ack_cursor": page["cursor"]})


def console_script() -> str:
    """The installed `wardian` console script next to this interpreter (what a person or an agent runs)."""
    candidate = Path(sys.executable).parent / "wardian"
    found = str(candidate) if candidate.exists() else shutil.which("wardian")
    if not found:
        raise RuntimeError("the wardian console script is not installed next to this interpreter")
    return found
