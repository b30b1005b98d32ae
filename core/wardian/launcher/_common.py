"""The launcher logic both platforms share: hand the child our standard streams, contain it, wait, report.

Invariants:
- Pass-through is by inheritance, not by copying: the child receives the launcher's own stdin, stdout and
  stderr (fds 0-2; on Windows the handles behind them), so every byte reaches it unchanged, in order, with no
  buffering, and EOF on the launcher's stdin is EOF on the child's. The launcher never reads or writes them.
- A standard stream the launcher does not have (a GUI process started without handles) becomes the null
  device for the child, never whatever handle happens to sit in its place.
- The child is contained for its whole life: the backend's `contain` is entered right after the spawn and
  its exit (normal return, exception or KeyboardInterrupt) kills whatever is left of the child.
- The launcher's exit status is the child's (see the backends' `finish`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

STD_FDS = (("stdin", 0), ("stdout", 1), ("stderr", 2))


Spawn = Callable[[Sequence[str], dict[str, Any]], "subprocess.Popen[bytes]"]
Contain = Callable[["subprocess.Popen[bytes]"], AbstractContextManager[None]]
Wait = Callable[["subprocess.Popen[bytes]"], int]


def inherited_streams(is_open: Callable[[int], bool] | None = None) -> dict[str, Any]:
    """`Popen` keyword arguments that hand the child fds 0, 1 and 2 as they are (the null device if closed)."""
    check = is_open or _fd_is_open
    return {name: (fd if check(fd) else subprocess.DEVNULL) for name, fd in STD_FDS}


def _fd_is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def run(command: Sequence[str], spawn: Spawn, contain: Contain, wait: Wait) -> int:
    """Start `command` with our standard streams through the backend's `spawn`, inside its `contain`; the
    exit status its `wait` reports.

    Raises:
        OSError: the command could not be started (nothing is left running).
    """
    proc = spawn(list(command), inherited_streams())
    with contain(proc):
        return wait(proc)
