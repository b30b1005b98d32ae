"""An exclusive lock on an open file, dropped by the system when its process ends however it ends: `flock` on POSIX,
a lock on the file's first byte on Windows (`msvcrt.locking`, LockFile). Used for the home lock (app/run.py), the
credential index (auth/index.py) and the ChatGPT owner lock (providers/codex/chatgpt_owner.py).
"""

from __future__ import annotations

import sys

if sys.platform == "win32":
    import msvcrt
else:
    import fcntl


def lock(fd: int, *, wait: bool) -> None:
    """Lock the open file `fd` exclusively for this process; with `wait`, until it is free.

    Raises:
        BlockingIOError: without `wait`, another process holds it.
    """
    if sys.platform != "win32":
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    while True:
        try:
            # LK_LOCK tries for about 10 s then fails: try again while waiting.
            msvcrt.locking(fd, msvcrt.LK_LOCK if wait else msvcrt.LK_NBLCK, 1)
            return
        except OSError as exc:
            if not wait:
                raise BlockingIOError(str(exc)) from None
