"""The reaper of private PostgreSQL servers whose owner is gone (see the package's docstring), and the clusters this
process still owns at its exit."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import itertools
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from wardian_harness.hosts.postgres._server import (
    OWNER_FILE,
    ROOT_PREFIX,
    PgNotFound,
    clusters_dir,
    find_pg_bin,
    is_private_parent,
    pidfile_pid,
    run_as_server,
)
from wardian_harness.processes.owner import Owner

if TYPE_CHECKING:
    from wardian_harness.hosts.postgres.cluster import PrivateCluster

__all__ = ["reap_orphans", "track", "untrack"]

STOP_TIMEOUT_S = 15
KILL_TIMEOUT_S = 10.0

_OWN: dict[Path, PrivateCluster] = {}
"""This process's clusters not yet destroyed, for `_at_exit`."""
_PARENTS: set[Path] = set()


def track(cluster: PrivateCluster) -> None:
    if not _PARENTS:
        atexit.register(_at_exit)
    _OWN[cluster.root] = cluster
    _PARENTS.add(cluster.parent)


def untrack(cluster: PrivateCluster) -> None:
    _OWN.pop(cluster.root, None)


def _at_exit() -> None:
    """At a normal exit: destroy what this process still owns (a cluster never destroyed would be an orphan a moment
    later), then reap the orphans beside them. A forked child exiting owns none of its parent's clusters."""
    for cluster in list(_OWN.values()):
        if cluster.owner.pid == os.getpid():
            with contextlib.suppress(Exception):
                cluster.destroy()
    for parent in _PARENTS:
        with contextlib.suppress(Exception):
            reap_orphans(parent)


def reap_orphans(parent: Path | None = None) -> list[Path]:
    """Stop and remove every cluster under `parent` (`clusters_dir()` unless given) whose owner process is gone;
    returns the roots removed.

    Only directories carrying an owner record are looked at: one without is being made right now (the record follows
    `mkdtemp` at once), or is not a cluster of this module. A cluster whose owner is alive is never touched, nor one
    whose record cannot be read. One reaper at a time per parent (an flock); a second one returns at once, as the
    first is doing the work. Errors on one cluster leave it for the next pass and never reach the caller: this runs
    at session start and at exit.
    """
    parent = clusters_dir() if parent is None else parent
    reaped: list[Path] = []
    try:
        if not is_private_parent(parent.lstat()):
            return reaped
        with _reaper_lock(parent) as locked:
            if not locked:
                return reaped
            with os.scandir(parent) as entries:
                roots = [Path(e.path) for e in entries
                         if e.name.startswith(ROOT_PREFIX) and e.is_dir(follow_symlinks=False)]
            for root in roots:
                try:
                    if _reap(root):
                        reaped.append(root)
                except (OSError, subprocess.SubprocessError, psutil.Error):
                    continue
    except OSError:
        pass
    return reaped


@contextlib.contextmanager
def _reaper_lock(parent: Path) -> Iterator[bool]:
    """An exclusive, non-blocking flock on `parent/.reaper.lock`; yields whether it was taken. The kernel drops it
    when its holder dies, so a reaper killed mid-pass blocks no one."""
    try:
        fd = os.open(parent / ".reaper.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _reap(root: Path) -> bool:
    """Reap one cluster if its owner is gone; whether its directory was removed."""
    try:
        record = json.loads((root / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    owner = Owner.from_json(record.get("owner")) if isinstance(record, dict) else None
    if owner is None or owner.alive():
        return False
    data = root / "data"
    server = _server_of(data, record)
    if server is not None and not _stop(server, data, record):
        return False
    shutil.rmtree(root, ignore_errors=True)
    return not root.exists()


def _server_of(data: Path, record: dict[str, Any]) -> psutil.Process | None:
    """The running postmaster of `data`, if any: the pid in `postmaster.pid` (else the record's), and only if that
    process is a postgres started with `-D data` - the file outlives a killed server, and after a reboot its pid may
    name anything.

    Raises:
        psutil.AccessDenied: the process may not be inspected (the caller leaves the cluster alone).
    """
    recorded = Owner.from_json(record.get("postmaster"))
    candidates = [pidfile_pid(data), recorded.pid if recorded else None]
    for pid in dict.fromkeys(p for p in candidates if p is not None):
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            args = proc.cmdline()
        except psutil.NoSuchProcess:
            continue
        target = os.path.realpath(data)
        if any(flag == "-D" and os.path.realpath(value) == target for flag, value in itertools.pairwise(args)):
            return proc
    return None


def _stop(server: psutil.Process, data: Path, record: dict[str, Any]) -> bool:
    """`pg_ctl stop -m immediate` (the server ends its own children and removes its shared memory), then SIGKILL for
    the server and whatever of its children outlived it, and the shared memory it left; each step bounded. Whether all
    of them are gone."""
    segment = _segment(data)
    try:
        procs = [server, *server.children(recursive=True)]
    except psutil.NoSuchProcess:
        return True
    pg_ctl: Path | None = Path(str(record.get("bin", ""))) / "pg_ctl"
    if not pg_ctl.is_file():
        try:
            pg_ctl = find_pg_bin() / "pg_ctl"
        except PgNotFound:
            pg_ctl = None  # SIGKILL alone, then
    if pg_ctl is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            run_as_server([str(pg_ctl), "-D", str(data), "stop", "-w", "-t", str(STOP_TIMEOUT_S), "-m", "immediate"],
                          check=False, timeout=STOP_TIMEOUT_S + 15)
    for proc in procs:
        if _running(proc):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()  # psutil checks first that the pid still names this process
    deadline = time.monotonic() + KILL_TIMEOUT_S
    while any(_running(p) for p in procs):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    if segment is not None:
        _drop_segment(*segment)
    return True


def _segment(data: Path) -> tuple[str, str] | None:
    """The System V shared memory segment of the server, (key, id) as line 7 of `postmaster.pid` gives them (see
    `pidfile_pid`): beside its mmap'd memory PostgreSQL keeps this small one as an interlock, and removes it only
    itself, at its own exit (https://www.postgresql.org/docs/current/kernel-resources.html)."""
    try:
        lines = (data / "postmaster.pid").read_text(encoding="utf-8", errors="replace").splitlines()
        key, shmid = lines[6].split()
        return (str(int(key)), str(int(shmid)))
    except (OSError, IndexError, ValueError):
        return None


def _drop_segment(key: str, shmid: str) -> None:
    """Remove the segment a killed server left (`ipcrm`), if it is still that one (same key and id, in decimal in
    Linux's /proc/sysvipc/shm as in `postmaster.pid`) and nothing is attached to it any more. Elsewhere, or without
    `ipcrm`, it stays: 56 bytes."""
    try:
        rows = Path("/proc/sysvipc/shm").read_text(encoding="utf-8").splitlines()[1:]
    except OSError:
        return
    for row in rows:
        cols = row.split()
        if len(cols) > 6 and (cols[0], cols[1]) == (key, shmid) and cols[6] == "0":
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(["ipcrm", "-m", shmid], capture_output=True, timeout=30, check=False,
                               stdin=subprocess.DEVNULL)


def _running(proc: psutil.Process) -> bool:
    """Alive and still the same process; a zombie has exited (its parent, init here, has not collected it yet)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
