"""Windows backend of `proctree`, verified under Wine 8.0 (tests/windows/test_harness.py; docs/guide/windows.md).

Every member is created with CREATE_NO_WINDOW | CREATE_NEW_PROCESS_GROUP and assigned at once to one Job Object
with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE whose handle is not inheritable, so closing the job (or the runner
dying) ends the whole tree. Known gap, by design of the Win32 API: a child runs for a moment before it is
assigned to the job; if it spawns a grandchild inside that window, only the psutil sweep catches it. The job
structures are core's (`wardian.launcher._windows`), whose x64 layout is checked by core's tests.
"""

from __future__ import annotations

import ctypes
import subprocess
from typing import Any

from wardian.winjob import kernel32, kill_on_close_limits

CREATE_NO_WINDOW = 0x08000000
CREATE_NEW_PROCESS_GROUP = 0x00000200
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9
PROCESS_TERMINATE_AND_SET_QUOTA = 0x0001 | 0x0100


class WindowsBackend:
    def __init__(self) -> None:
        self._k32: Any = kernel32()
        self._job = self._k32.CreateJobObjectW(None, None)  # a NULL security attribute: not inheritable
        if not self._job:
            raise ctypes.WinError()  # type: ignore[attr-defined]
        limits = kill_on_close_limits()
        if not self._k32.SetInformationJobObject(self._job, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS,
                                                 ctypes.byref(limits), ctypes.sizeof(limits)):
            raise ctypes.WinError()  # type: ignore[attr-defined]

    def popen_kwargs(self) -> dict[str, Any]:
        return {"creationflags": CREATE_NO_WINDOW | CREATE_NEW_PROCESS_GROUP}

    def after_spawn(self, proc: subprocess.Popen[bytes]) -> None:
        handle = self._k32.OpenProcess(PROCESS_TERMINATE_AND_SET_QUOTA, False, proc.pid)
        if handle:
            self._k32.AssignProcessToJobObject(self._job, handle)
            self._k32.CloseHandle(handle)

    def terminate(self, pid: int) -> None:
        # Windows has no SIGTERM for console-less children; the polite stop is the hard stop of the job.
        return None

    def kill(self, pid: int) -> None:
        if self._job:
            self._k32.TerminateJobObject(self._job, 1)

    def close(self) -> None:
        if self._job:
            self._k32.CloseHandle(self._job)
            self._job = None
