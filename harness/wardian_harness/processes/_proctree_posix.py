"""POSIX backend of `proctree`: each member leads a new session and process group; stop = killpg."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any


class PosixBackend:
    def popen_kwargs(self) -> dict[str, Any]:
        return {"start_new_session": True}

    def after_spawn(self, proc: subprocess.Popen[bytes]) -> None:
        return None

    def terminate(self, pid: int) -> None:
        _signal_group(pid, signal.SIGTERM)

    def kill(self, pid: int) -> None:
        _signal_group(pid, signal.SIGKILL)

    def close(self) -> None:
        return None


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # The member leads its own group (start_new_session), so its pid is the group id. A group that is gone
    # (ESRCH) is done; EPERM means a reused id now belongs to someone else: leave it alone.
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        return
