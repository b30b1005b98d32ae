"""Provider processes: the environment a provider's child gets, and ending a process group the app left behind.

Every provider runtime runs its executable in a process group of its own (`start_new_session=True`), records the
group leader's pid under the home's `run/` while it runs, and ends the group when it stops. A killed app leaves
that record behind; the next start of the agent ends the group only if its leader still runs with the agent's own
private provider home in its environment, so a reused pid is never touched. POSIX only (verified on Linux).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

import anyio
import psutil

from wardian.home import ENV_HOME, ENV_SESSION


def child_env(extra: Mapping[str, str], *, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment for a provider child, without wardian's own identity (the agent's MCP server gets
    its WARDIAN_HOME and WARDIAN_SESSION_ID from its registration, never ours), with `extra` on top."""
    env = {k: v for k, v in os.environ.items() if k not in (ENV_HOME, ENV_SESSION, *drop)}
    if getattr(sys, "frozen", False):
        # PyInstaller points LD_LIBRARY_PATH at its own bundle; the provider and the shells it runs need the user's.
        original = env.pop("LD_LIBRARY_PATH_ORIG", None)
        if original is not None:
            env["LD_LIBRARY_PATH"] = original
        else:
            env.pop("LD_LIBRARY_PATH", None)
    env.update(extra)
    return env


def killpg(pid: int, sig: int) -> None:
    """Signal a process group; a group already gone (or not ours) is no error."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still exists (signal 0; EPERM means one exists but is not ours)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def end_group(pgid: int, *, grace_s: float = 3.0) -> bool:
    """SIGKILL what is left of a provider's process group and wait (bounded) until none of it exists, so a caller
    that stops an agent returns only once its processes are gone (#13). True when the group is gone."""
    killpg(pgid, signal.SIGKILL)
    with anyio.move_on_after(grace_s):
        # Polled: the group's members are not our children (the leader was reaped), so no event tells their end.
        while group_alive(pgid):  # noqa: ASYNC110
            await anyio.sleep(0.01)
        return True
    return not group_alive(pgid)


def record_pid(pid_path: Path, pid: int) -> None:
    pid_path.write_text(f"{pid}\n", encoding="utf-8")


def reap_left_behind(pid_path: Path, env_key: str, env_value: str) -> bool:
    """End the process group recorded in `pid_path` if its leader still runs with `env_key=env_value` in its
    environment (the agent's private provider home), then forget the record. True when a group was ended."""
    try:
        pid = int(pid_path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return False
    reaped = False
    with suppress(psutil.Error):
        if psutil.Process(pid).environ().get(env_key) == env_value:
            killpg(pid, signal.SIGKILL)
            reaped = True
    with suppress(OSError):
        pid_path.unlink()
    return reaped
