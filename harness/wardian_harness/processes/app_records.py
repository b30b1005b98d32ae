"""A record of every `wardian app run` the harness started and has not yet seen stopped, so that none outlives its test.

A test that times out may never reach the code that stops its app: with pytest-timeout's `signal` method the failure
is raised wherever the test (or its teardown) then is, and with the `thread` method the test process ends at once
(`os._exit`), running neither finalizers nor `atexit`. So each started app leaves a record on disk, one file per app
under `<temp dir>/wardian-apps-<uid>`, naming the app and the process that started it (each by pid and start time,
`wardian_harness.processes.owner.Owner`: a pid alone may already belong to someone else):

- `stop` removes the record once the app's whole process group has ended;
- at a normal exit of the starting process, `atexit` ends the groups of the apps it still owns;
- `reap_orphan_apps()` (at each test session's start and finish) ends the groups of apps whose starter is gone.

Nothing is ever matched by name, and an app whose starter still runs (another xdist worker, another session) is left
alone by the reaper.
"""

from __future__ import annotations

import atexit
import contextlib
import getpass
import json
import os
import signal
import tempfile
from pathlib import Path
from typing import Any

import psutil

from wardian_harness.processes.owner import Owner

__all__ = ["end_group", "forget", "reap_orphan_apps", "records_dir", "remember"]

_PREFIX = "app-"
_registered = False


def records_dir() -> Path:
    """Where the records of this user's started apps are: one well-known place, so a later session finds them."""
    user = os.geteuid() if hasattr(os, "geteuid") else getpass.getuser()
    return Path(tempfile.gettempdir()) / f"wardian-apps-{user}"


def _path(pid: int, parent: Path | None = None) -> Path:
    return (records_dir() if parent is None else parent) / f"{_PREFIX}{pid}.json"


def remember(pid: int) -> None:
    """Record the app `pid` (leader of its own process group) as started by this process."""
    global _registered  # one atexit hook per process
    try:
        record = {"app": Owner.of(pid).as_json(), "owner": Owner.of(os.getpid()).as_json()}
    except psutil.NoSuchProcess:
        return  # already gone: nothing to end later
    parent = records_dir()
    parent.mkdir(mode=0o700, exist_ok=True)
    tmp = parent / f".{_PREFIX}{pid}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record), encoding="utf-8")
    tmp.replace(_path(pid, parent))  # atomic: the reaper never reads half a record
    if not _registered:
        atexit.register(_at_exit)
        _registered = True


def forget(pid: int) -> None:
    """Drop the record of the app `pid` (it has been stopped)."""
    with contextlib.suppress(OSError):
        _path(pid).unlink()


def end_group(pid: int) -> None:
    """SIGKILL whatever is left of the process group led by `pid` (a started app leads a new session). A group that
    is gone (ESRCH) is done; EPERM means the id is someone else's now: left alone."""
    if not hasattr(os, "killpg"):
        return  # Windows: the native harness's job object ends the tree (wardian_harness.processes.proctree)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _read(path: Path) -> tuple[Owner, Owner] | None:
    try:
        value: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict):
        return None
    app, owner = Owner.from_json(value.get("app")), Owner.from_json(value.get("owner"))
    return None if app is None or owner is None else (app, owner)


def _sweep(parent: Path, *, mine: bool) -> list[int]:
    """End the apps recorded under `parent` whose starter is gone (`mine=False`) or is this process (`mine=True`);
    returns their pids. A record of an app that has ended is dropped either way."""
    ended: list[int] = []
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        paths = [Path(e.path) for e in entries if e.name.startswith(_PREFIX) and e.name.endswith(".json")]
        for path in paths:
            record = _read(path)
            if record is None:
                continue
            app, owner = record
            if app.alive():
                if not (owner.pid == os.getpid() if mine else not owner.alive()):
                    continue
                end_group(app.pid)
                ended.append(app.pid)
            with contextlib.suppress(OSError):
                path.unlink()
    return ended


def reap_orphan_apps(parent: Path | None = None) -> list[int]:
    """End every recorded app whose starting process is gone (a test process killed by a timeout, kill -9 or
    `os._exit`); returns their pids. Apps of live starters are never touched."""
    return _sweep(records_dir() if parent is None else parent, mine=False)


def _at_exit() -> None:
    """At a normal exit: an app this process started and never stopped would be an orphan a moment later."""
    _sweep(records_dir(), mine=True)
