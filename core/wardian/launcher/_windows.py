"""Windows backend of the launcher: `wardian-mcp.exe` starts `wardian-cli.exe` silently and keeps it contained.

Contract rule CFG-5 (docs/design/contract.md): on Windows managed startup registers wardian-mcp.exe, a GUI-subsystem
launcher that starts the console CLI with CREATE_NO_WINDOW, passes standard input, output and error through
unchanged, and closing the launcher also closes its server process.

- Silence: the launcher is a GUI-subsystem program (no console of its own) and starts the console CLI with
  CREATE_NO_WINDOW, so neither flashes a window when Codex launches the server.
- Pass-through: the child inherits the launcher's own standard handles (`_common`); `subprocess` duplicates
  them as inheritable and lists only those three in the child's handle list, so nothing else leaks in.
- Containment: a Job Object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, created without an inheritable handle
  (NULL security attributes) so only the launcher holds it. When the launcher exits or is killed, Windows
  closes that last handle and terminates every process in the job.
- Known gap, written down (docs/guide/frozen-builds.md#windows): the child runs for a moment before
  `AssignProcessToJobObject`. If the launcher dies inside that window the child is outside the job; it still ends
  when Codex closes its stdin, because `wardian mcp serve` exits on EOF and reads the very pipe Codex writes to.
- Exit status: the child's 32-bit exit code, unchanged (NTSTATUS values such as 0xC000013A included).

Verified on Linux only: this module cannot run here (no kernel32). The tests check what Linux can: the
structure layout against the documented x64 size, the exit-code conversion and the CLI's name; the shared
pass-through and containment sequence runs here through the POSIX backend.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from wardian.executables import WINDOWS_MCP_LAUNCHER
from wardian.launcher import _common

MCP_LAUNCHER: str | None = WINDOWS_MCP_LAUNCHER
CLI_NAME = "wardian-cli.exe"

CREATE_NO_WINDOW = 0x08000000
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9  # JobObjectExtendedLimitInformation
PROCESS_TERMINATE = 0x0001
PROCESS_SET_QUOTA = 0x0100

# Fixed-width fields (DWORD = 32 bits, SIZE_T/ULONG_PTR = pointer-sized), so the layout is the same on
# every platform and can be checked on Linux; ctypes.wintypes.DWORD is 64-bit there.
_DWORD = ctypes.c_uint32
_SIZE_T = ctypes.c_size_t


class JOBOBJECT_BASIC_LIMIT_INFORMATION(ctypes.Structure):  # the Win32 names
    _fields_ = (
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", _DWORD),
        ("MinimumWorkingSetSize", _SIZE_T),
        ("MaximumWorkingSetSize", _SIZE_T),
        ("ActiveProcessLimit", _DWORD),
        ("Affinity", _SIZE_T),
        ("PriorityClass", _DWORD),
        ("SchedulingClass", _DWORD),
    )


class IO_COUNTERS(ctypes.Structure):
    _fields_ = tuple((name, ctypes.c_uint64) for name in (
        "ReadOperationCount", "WriteOperationCount", "OtherOperationCount", "ReadTransferCount",
        "WriteTransferCount", "OtherTransferCount"))


class JOBOBJECT_EXTENDED_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = (
        ("BasicLimitInformation", JOBOBJECT_BASIC_LIMIT_INFORMATION),
        ("IoInfo", IO_COUNTERS),
        ("ProcessMemoryLimit", _SIZE_T),
        ("JobMemoryLimit", _SIZE_T),
        ("PeakProcessMemoryUsed", _SIZE_T),
        ("PeakJobMemoryUsed", _SIZE_T),
    )


def _kernel32() -> Any:
    """kernel32 with the prototypes we call (loaded on first use, so this module imports anywhere)."""
    k32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    handle = ctypes.c_void_p
    k32.CreateJobObjectW.argtypes = (ctypes.c_void_p, ctypes.c_wchar_p)
    k32.CreateJobObjectW.restype = handle
    k32.SetInformationJobObject.argtypes = (handle, ctypes.c_int, ctypes.c_void_p, _DWORD)
    k32.SetInformationJobObject.restype = ctypes.c_int
    k32.OpenProcess.argtypes = (_DWORD, ctypes.c_int, _DWORD)
    k32.OpenProcess.restype = handle
    k32.AssignProcessToJobObject.argtypes = (handle, handle)
    k32.AssignProcessToJobObject.restype = ctypes.c_int
    k32.CloseHandle.argtypes = (handle,)
    k32.CloseHandle.restype = ctypes.c_int
    return k32


def _win_error(what: str) -> OSError:
    return ctypes.WinError(ctypes.get_last_error(), what)  # type: ignore[attr-defined]


def kill_on_close_limits() -> JOBOBJECT_EXTENDED_LIMIT_INFORMATION:
    """The job limits we set: kill every process of the job when its last handle closes, nothing else."""
    info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION()
    info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    return info


def _assign_to_new_job(k32: Any, pid: int) -> int:
    """A new kill-on-close job holding process `pid`; its (non-inheritable) handle.

    Raises:
        OSError: a Win32 call failed (no job is left open).
    """
    job = k32.CreateJobObjectW(None, None)  # NULL security attributes: the handle is not inheritable
    if not job:
        raise _win_error("CreateJobObjectW")
    try:
        info = kill_on_close_limits()
        if not k32.SetInformationJobObject(job, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS, ctypes.byref(info),
                                           ctypes.sizeof(info)):
            raise _win_error("SetInformationJobObject")
        # The pid cannot be reused here: subprocess holds the child's process handle until we reap it.
        process = k32.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, 0, pid)
        if not process:
            raise _win_error("OpenProcess")
        try:
            if not k32.AssignProcessToJobObject(job, process):
                raise _win_error("AssignProcessToJobObject")
        finally:
            k32.CloseHandle(process)
    except BaseException:
        k32.CloseHandle(job)
        raise
    return int(job)


def cli_command() -> list[str]:
    """The CLI the launcher starts: `wardian-cli.exe` beside a frozen launcher, else this interpreter's module."""
    if getattr(sys, "frozen", False):
        return [str(Path(sys.executable).absolute().with_name(CLI_NAME))]
    return [sys.executable, "-m", "wardian"]


def spawn(command: Sequence[str], streams: dict[str, Any]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(list(command), **streams, close_fds=True,
                            creationflags=CREATE_NO_WINDOW)  # type: ignore[call-overload]


@contextmanager
def contain(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    k32 = _kernel32()
    try:
        job = _assign_to_new_job(k32, proc.pid)
    except BaseException:
        # Without the job contract rule CFG-5 ("closing the launcher closes its server") would not hold: do not run on.
        proc.kill()
        proc.wait()
        raise
    try:
        yield
    finally:
        k32.CloseHandle(job)  # the last handle: Windows terminates whatever of the child is still running


def wait(proc: subprocess.Popen[bytes]) -> int:
    return proc.wait()


def run(command: Sequence[str]) -> int:
    """Start `command` silently with our standard handles, in a kill-on-close job; its exit code.

    Raises:
        OSError: the command could not be started or contained (nothing is left running).
    """
    return _common.run(command, spawn, contain, wait)


def exit_code(status: int) -> int:
    """A child's unsigned 32-bit exit code as the int `os._exit` turns back into the same 32 bits."""
    status &= 0xFFFFFFFF
    return status - (1 << 32) if status >= 1 << 31 else status


def finish(status: int) -> NoReturn:
    """Exit with a child's exit code, unchanged."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:  # a GUI-subsystem process may have none
            stream.flush()
    os._exit(exit_code(status))


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point of `wardian-mcp.exe`: run `wardian-cli.exe` with our arguments; exit with its status."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        status = run([*cli_command(), *args])
    except OSError as exc:
        if sys.stderr is not None:
            sys.stderr.write(f"wardian-mcp: cannot start {cli_command()[0]}: {exc}\n")
        finish(1)
    finish(status)
