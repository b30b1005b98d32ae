"""POSIX backend of `wardian.providers.tree`: a provider child leads a process group of its own (a new session), and
the group is signalled as one."""

from __future__ import annotations

import os
import signal
from contextlib import suppress
from typing import Any

import psutil

SPAWN_OPTIONS: dict[str, Any] = {"start_new_session": True}


def killpg(pid: int, sig: int) -> None:
    """Signal a process group; a group already gone (or not ours) is no error."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (signal 0; EPERM means one exists but is not ours). A group of
    zombies only runs nothing (`_runs_a_member`)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _runs_a_member(pgid)


def _runs_a_member(pgid: int) -> bool:
    """Whether a member of the group is more than a zombie. A member whose parent died first (a provider's MCP
    server, killed with it) is reparented and stays a zombie, still answering signal 0 for its group, until init
    reaps it, which some inits do only a second or two later; waiting for that would only wait for init. A member
    that cannot be looked at counts as running."""
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue  # gone meanwhile
        except (PermissionError, psutil.AccessDenied):
            return True
    return False


class Tree:
    """The process group the child `pid` leads."""

    def __init__(self, pid: int) -> None:
        self.pgid = pid

    def terminate(self) -> None:
        killpg(self.pgid, signal.SIGTERM)

    def kill(self) -> None:
        killpg(self.pgid, signal.SIGKILL)

    def alive(self) -> bool:
        return group_alive(self.pgid)

    def close(self) -> None:
        """Nothing to release: a group is no object of ours."""


def end_left_behind(pid: int) -> None:
    """End the group a killed app left behind, led by `pid`."""
    killpg(pid, signal.SIGKILL)
