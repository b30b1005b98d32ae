"""The reaper of orphaned private PostgreSQL servers (`wardian_harness.hosts.postgres.reap_orphans`): a test process
killed with kill -9 leaves its server running, and the next session must stop it, but never one whose owner lives on.

Real servers (Debian's binaries), real processes killed for real; each test under a parent directory of its own, so
that neither parallel workers' clusters nor another session's are ever in reach of the reaper a test runs."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import require_postgres
from wardian_harness.hosts.postgres import OWNER_FILE, PrivateCluster, reap_orphans, reaper
from wardian_harness.processes.owner import Owner

REPO = Path(__file__).resolve().parents[3]

# A test process that starts a cluster, says where, and waits to be killed.
OWNER_SCRIPT = """
import sys, time
from pathlib import Path
from wardian_harness.hosts.postgres import PrivateCluster

cluster = PrivateCluster(parent=Path(sys.argv[1])).start()
print(cluster.root, flush=True)
time.sleep(600)
"""


@pytest.fixture(autouse=True)
def _needs_postgres() -> None:
    require_postgres()


@pytest.fixture
def parent() -> Iterator[Path]:
    """A parent directory of this test's own, short (under /tmp: the socket path must stay within 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="wrp", dir="/tmp"))
    try:
        yield path
    finally:
        # Whatever a failed test left running here: every owner is gone by now except this process.
        for root in path.glob("wpg*"):
            _rewrite_owner(root, _gone_owner())
        reap_orphans(path)
        shutil.rmtree(path, ignore_errors=True)


def _server(root: Path) -> psutil.Process:
    """The running postmaster of the cluster in `root`, from PostgreSQL's `postmaster.pid`."""
    pid = int((root / "data" / "postmaster.pid").read_text(encoding="utf-8").split("\n", 1)[0])
    return psutil.Process(pid)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _rewrite_owner(root: Path, owner: Owner) -> None:
    record_path = root / OWNER_FILE
    if record_path.exists():
        record = json.loads(record_path.read_text(encoding="utf-8"))
        record["owner"] = owner.as_json()
        record_path.write_text(json.dumps(record), encoding="utf-8")


def _gone_owner() -> Owner:
    """A process that has exited (and was waited for)."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    owner = Owner.of(proc.pid)
    proc.communicate(timeout=30)
    return owner


def _wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"not {what} within {timeout_s} s"
        time.sleep(0.05)


def test_the_cluster_of_a_killed_owner_is_reaped_and_a_live_owners_is_not(parent: Path) -> None:
    """A child process starts a cluster: while it lives the reaper leaves the server alone; once it is SIGKILLed
    (a zombie still: its parent has not waited for it yet) the server is stopped and the directory removed."""
    child = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, str(parent)], stdout=subprocess.PIPE, text=True,
                             cwd=REPO)
    try:
        assert child.stdout is not None
        root = Path(child.stdout.readline().strip())
        assert root.parent == parent, "the child did not start its cluster"
        server = _server(root)
        children = server.children(recursive=True)
        assert _running(server)

        assert reap_orphans(parent) == []
        assert _running(server)
        assert (root / "data").is_dir()

        child.kill()
        child_proc = psutil.Process(child.pid)
        _wait_until(lambda: child_proc.status() == psutil.STATUS_ZOMBIE, "a zombie")
        assert reap_orphans(parent) == [root]
        assert not root.exists()
        assert not _running(server)
        assert not any(_running(p) for p in children), "the server's own processes outlived it"
    finally:
        child.kill()
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()


def test_a_cluster_of_this_live_process_is_left_running(parent: Path) -> None:
    with PrivateCluster(parent=parent) as cluster:
        server = _server(cluster.root)
        assert reap_orphans(parent) == []
        assert _running(server)
        assert cluster.running()
        assert cluster.sql("SELECT 1") == "1"


def test_a_reused_owner_pid_counts_as_gone(parent: Path) -> None:
    """The record names a live process's pid with another start time: a later process under the same number (as
    after the owner's death and a pid wrap) is no owner. The server goes; that unrelated process is not touched."""
    unrelated = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    cluster = PrivateCluster(parent=parent).start()
    try:
        server = _server(cluster.root)
        reused = Owner(unrelated.pid, Owner.of(unrelated.pid).started - 3600)
        assert not reused.alive()
        _rewrite_owner(cluster.root, reused)

        assert reap_orphans(parent) == [cluster.root]
        assert not cluster.root.exists()
        assert not _running(server)
        assert unrelated.poll() is None
    finally:
        cluster.destroy()
        unrelated.communicate(timeout=30)


def test_a_server_that_does_not_stop_is_killed(parent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that cannot answer `pg_ctl stop` (here: SIGSTOPped) is SIGKILLed with its own processes once the
    bounded stop gave up, and the System V segment it could not remove itself goes too."""
    monkeypatch.setattr(reaper, "STOP_TIMEOUT_S", 1)
    cluster = PrivateCluster(parent=parent).start()
    server = _server(cluster.root)
    try:
        children = server.children(recursive=True)
        key, shmid = (cluster.data / "postmaster.pid").read_text(encoding="utf-8").splitlines()[6].split()
        assert _segments() & {(key, shmid)}
        _rewrite_owner(cluster.root, _gone_owner())
        server.suspend()

        assert reap_orphans(parent) == [cluster.root]
        assert not cluster.root.exists()
        assert not _running(server)
        assert not any(_running(p) for p in children)
        assert not _segments() & {(key, shmid)}
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            server.resume()  # a failed test's server must be able to stop
        cluster.destroy()


def _segments() -> set[tuple[str, str]]:
    """The System V shared memory segments on this machine, as (key, id) in decimal."""
    rows = Path("/proc/sysvipc/shm").read_text(encoding="utf-8").splitlines()[1:]
    return {(cols[0], cols[1]) for cols in map(str.split, rows)}


def test_a_stale_postmaster_pid_file_never_signals_the_process_it_names(parent: Path) -> None:
    """A server killed outright (or a reboot) leaves `postmaster.pid` behind, naming a pid that may belong to anything
    by now: the reaper removes the directory and signals nothing."""
    unrelated = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    cluster = PrivateCluster(parent=parent)  # its directory and owner record, no server
    try:
        cluster.data.mkdir()
        (cluster.data / "postmaster.pid").write_text(f"{unrelated.pid}\n{cluster.data}\n0\n{cluster.port}\n",
                                                     encoding="utf-8")
        _rewrite_owner(cluster.root, _gone_owner())

        assert reap_orphans(parent) == [cluster.root]
        assert not cluster.root.exists()
        assert unrelated.poll() is None
    finally:
        cluster.destroy()
        unrelated.communicate(timeout=30)
