"""Two hosts of one shared store, driven like the native acceptance drives one: two `wardian app run`
processes, each on a home of its own (socket, logs, private provider homes) and a host name (`alpha`, `beta`), both
on one PostgreSQL database of a private server (`postgres.PrivateCluster`), with real Codex agents on the scripted
model (docs/guide/several-machines.md).

`HostRun` is a `NativeRun` whose app serves one host of the shared store (`--store URL --host-name NAME`) and can be
killed with SIGKILL (`kill_app`) and started again on the same home and host name. `TwoHosts` holds the pair and
everything they share: the private server, the scripted model and one process tree; `close()` stops and reaps all
of it, pass or fail, and returns what outlived it. Layout of the run root (the runner's, or one of our own):

    <root>/alpha/{w,home,ws}/   alpha's WARDIAN_HOME, private HOME and fixture workspaces (an `IsolatedRun` each)
    <root>/beta/{w,home,ws}/    beta's

Like `NativeRun`, nothing here asserts: the acceptance (`e2e_native/tests/test_two_hosts_real_native.py`) does.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

from wardian_harness.acceptance.homes import IsolatedRun
from wardian_harness.acceptance.native import NativeRun, NativeRunError
from wardian_harness.acceptance.settings import Settings
from wardian_harness.hosts.postgres import PrivateCluster
from wardian_harness.models.scripted_model import ScriptedModel
from wardian_harness.processes.proctree import ProcessTree
from wardian_harness.providers.codex_install import CodexInstall

__all__ = ["HOSTS", "HostRun", "TwoHosts", "host_run"]

HOSTS = ("alpha", "beta")


def host_run(parent: IsolatedRun, name: str) -> IsolatedRun:
    """One host's part of the run root, laid out like a run of its own (no lock: the parent's owner holds it)."""
    run = IsolatedRun(parent.root / name, parent.run_id, None)
    for d in (run.root, run.wardian_home, run.user_home, run.root / "ws"):
        d.mkdir(mode=0o700, exist_ok=True)
    return run


class HostRun(NativeRun):
    """One host's app on the shared store, its agents and its CLI (every command runs against its home)."""

    def __init__(self, host: str, store_url: str, settings: Settings, run: IsolatedRun, tree: ProcessTree,
                 codex: CodexInstall, model: ScriptedModel | None, progress: Callable[[str], None]) -> None:
        super().__init__(settings, run, tree, codex, model, progress=lambda line: progress(f"{host}: {line}"))
        self.host = host
        self.store_url = store_url
        self.killed: list[int] = []  # pids of the apps killed with SIGKILL

    def app_args(self) -> tuple[str, ...]:
        """`wardian app run --store URL --host-name HOST`: this host of the shared store."""
        return ("--store", self.store_url, "--host-name", self.host)

    def kill_app(self) -> int:
        """kill -9 the app (no clean stop: its lease, its bindings and its provider processes are left behind);
        returns its pid once it has exited."""
        proc = self.app_proc
        if proc is None:
            raise NativeRunError(f"host {self.host} has no running app to kill")
        self.progress(f"kill -9 of the app (pid {proc.pid})")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        self.killed.append(proc.pid)
        self.app_proc = None
        return proc.pid

    def app_log(self) -> str:
        """Every app stderr log of this host, in start order."""
        paths = sorted(self.run.root.glob("app-stderr-*.log"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
        return "".join(f"--- {p.name}\n{p.read_text(encoding='utf-8', errors='replace')}" for p in paths)

    def hosts(self) -> dict[str, dict[str, Any]]:
        """The store's hosts as this app sees them (`agent/list`): name -> live, heartbeat."""
        return dict(self.call("agent/list")["hosts"])


@dataclass
class TwoHosts:
    """Two host apps on one shared store, and what they share; `close()` reaps everything."""

    cluster: PrivateCluster
    store_url: str
    model: ScriptedModel
    tree: ProcessTree
    run: IsolatedRun
    alpha: HostRun
    beta: HostRun
    closed: bool = False

    @classmethod
    def create(cls, settings: Settings, run: IsolatedRun, codex: CodexInstall,
               progress: Callable[[str], None]) -> TwoHosts:
        """Start the private PostgreSQL server and the scripted model, make both hosts' homes (no app yet).

        Raises:
            PgNotFound: no PostgreSQL server binaries.
        """
        cluster = PrivateCluster().start()
        try:
            store_url = cluster.database()
            model = ScriptedModel().start()
        except BaseException:
            cluster.destroy()
            raise
        tree = ProcessTree(run.run_id)
        alpha, beta = (HostRun(h, store_url, settings, host_run(run, h), tree, codex, model, progress) for h in HOSTS)
        return cls(cluster, store_url, model, tree, run, alpha, beta)

    def store_sql(self, statement: str) -> list[tuple[Any, ...]]:
        """Read the shared store directly (the evidence beside `wardian message show`): every row of `statement`."""
        import psycopg

        dbname = self.store_url.split("?", 1)[0].rsplit("/", 1)[1]
        with psycopg.connect(host=self.cluster.socket_dir, port=self.cluster.port, user="wardian", dbname=dbname,
                             autocommit=True) as conn:
            return list(conn.execute(statement).fetchall())  # type: ignore[arg-type]  # our own statements

    def close(self) -> list[psutil.Process]:
        """Stop both apps (SIGTERM), the server, then reap the tree and stop the model; returns what outlived it."""
        if self.closed:
            return []
        self.closed = True
        try:
            for host in (self.alpha, self.beta):
                try:
                    host.stop_app()
                except (OSError, subprocess.SubprocessError) as exc:
                    host.progress(f"could not stop the app: {exc}")
        finally:
            try:
                # Before the tree's sweep: the server inherited the run marker (it is ours to stop, not to kill).
                self.cluster.destroy()
            finally:
                leftovers = self.tree.close()
                self.model.stop()
        return leftovers

