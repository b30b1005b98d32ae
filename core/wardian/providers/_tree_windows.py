"""Windows backend of `wardian.providers.tree`: a provider child and everything it starts live in a kill-on-close
Job Object that only the app holds (`wardian.winjob`), so stopping the agent ends the tree and an app killed outright
leaves nothing running: Windows closes the job's last handle with the app and ends every member.

There is no polite signal for a console-less child on Windows (no SIGTERM; console control events need a shared
console), so `terminate` is the job's end too; a provider's own polite step (closing its input) comes first in
`ProviderProcess.stop`. Known gap (`wardian.winjob`): what the child starts before it is assigned is outside the job.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import psutil

from wardian import winjob

CREATE_NO_WINDOW = 0x08000000
SPAWN_OPTIONS: dict[str, Any] = {"creationflags": CREATE_NO_WINDOW}
KILLED = 1  # the exit code of a job's processes when it is ended


class Tree:
    """The Job Object that holds the child `pid` and its descendants.

    Raises:
        OSError: the job could not be made or the child not assigned to it (the caller ends the child).
    """

    def __init__(self, pid: int) -> None:
        self._k32 = winjob.kernel32()
        self._job: int | None = winjob.assign_to_new_job(self._k32, pid)

    def terminate(self) -> None:
        self.kill()

    def kill(self) -> None:
        if self._job is not None:
            self._k32.TerminateJobObject(self._job, KILLED)

    def alive(self) -> bool:
        return self._job is not None and winjob.active_processes(self._k32, self._job) > 0

    def close(self) -> None:
        """Release the job (closing its last handle ends whatever of it still runs)."""
        if self._job is not None:
            self._k32.CloseHandle(self._job)
            self._job = None


def end_left_behind(pid: int) -> None:
    """End the leader a killed app left behind (its job died with that app, so only a process started outside the
    job's reach can remain)."""
    with suppress(psutil.Error):
        psutil.Process(pid).kill()
