"""Windows Job Objects: a process tree that ends when its holder closes it or dies (ctypes, no pywin32).

Shared by the MCP launcher (`wardian.launcher._windows`: `wardian-mcp.exe` holds its server in one) and the
providers (`wardian.providers._tree_windows`: the app holds each agent's process tree in one).

Invariants:
- A job is created with NULL security attributes, so its handle is not inheritable: only its creator holds it, and
  when that process closes it or dies, Windows closes the last handle and JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE ends
  every process in the job (verified under Wine 8.0: tests/windows/, docs/guide/windows.md).
- Children a member starts join its job (no CREATE_BREAKAWAY_FROM_JOB is allowed), DETACHED_PROCESS ones included.
- Known gap, by design of the Win32 API: a process runs for a moment between its creation and its assignment; what
  it starts inside that moment is outside the job.

Imports anywhere (kernel32 is loaded on first use), so core's Linux tests check the structures' x64 layout.
"""

from __future__ import annotations

import ctypes
from typing import Any

JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
JOB_OBJECT_BASIC_ACCOUNTING_INFORMATION_CLASS = 1  # JobObjectBasicAccountingInformation
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


class JOBOBJECT_BASIC_ACCOUNTING_INFORMATION(ctypes.Structure):
    _fields_ = (
        ("TotalUserTime", ctypes.c_int64),
        ("TotalKernelTime", ctypes.c_int64),
        ("ThisPeriodTotalUserTime", ctypes.c_int64),
        ("ThisPeriodTotalKernelTime", ctypes.c_int64),
        ("TotalPageFaultCount", _DWORD),
        ("TotalProcesses", _DWORD),
        ("ActiveProcesses", _DWORD),
        ("TotalTerminatedProcesses", _DWORD),
    )


def kernel32() -> Any:
    """kernel32 with the prototypes we call (loaded on first use, so this module imports anywhere)."""
    k32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    handle = ctypes.c_void_p
    k32.CreateJobObjectW.argtypes = (ctypes.c_void_p, ctypes.c_wchar_p)
    k32.CreateJobObjectW.restype = handle
    k32.SetInformationJobObject.argtypes = (handle, ctypes.c_int, ctypes.c_void_p, _DWORD)
    k32.SetInformationJobObject.restype = ctypes.c_int
    k32.QueryInformationJobObject.argtypes = (handle, ctypes.c_int, ctypes.c_void_p, _DWORD, ctypes.c_void_p)
    k32.QueryInformationJobObject.restype = ctypes.c_int
    k32.TerminateJobObject.argtypes = (handle, ctypes.c_uint)
    k32.TerminateJobObject.restype = ctypes.c_int
    k32.OpenProcess.argtypes = (_DWORD, ctypes.c_int, _DWORD)
    k32.OpenProcess.restype = handle
    k32.AssignProcessToJobObject.argtypes = (handle, handle)
    k32.AssignProcessToJobObject.restype = ctypes.c_int
    k32.CloseHandle.argtypes = (handle,)
    k32.CloseHandle.restype = ctypes.c_int
    return k32


def win_error(what: str) -> OSError:
    return ctypes.WinError(ctypes.get_last_error(), what)  # type: ignore[attr-defined]


def kill_on_close_limits() -> JOBOBJECT_EXTENDED_LIMIT_INFORMATION:
    """The job limits we set: kill every process of the job when its last handle closes, nothing else."""
    info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION()
    info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    return info


def assign_to_new_job(k32: Any, pid: int) -> int:
    """A new kill-on-close job holding process `pid`; its (non-inheritable) handle. The caller must hold a handle
    of `pid` (a `Popen` not yet reaped) so the pid cannot be reused meanwhile.

    Raises:
        OSError: a Win32 call failed (no job is left open).
    """
    job = k32.CreateJobObjectW(None, None)  # NULL security attributes: the handle is not inheritable
    if not job:
        raise win_error("CreateJobObjectW")
    try:
        info = kill_on_close_limits()
        if not k32.SetInformationJobObject(job, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS, ctypes.byref(info),
                                           ctypes.sizeof(info)):
            raise win_error("SetInformationJobObject")
        process = k32.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, 0, pid)
        if not process:
            raise win_error("OpenProcess")
        try:
            if not k32.AssignProcessToJobObject(job, process):
                raise win_error("AssignProcessToJobObject")
        finally:
            k32.CloseHandle(process)
    except BaseException:
        k32.CloseHandle(job)
        raise
    return int(job)


def active_processes(k32: Any, job: int) -> int:
    """How many processes of `job` still run.

    Raises:
        OSError: the query failed.
    """
    info = JOBOBJECT_BASIC_ACCOUNTING_INFORMATION()
    if not k32.QueryInformationJobObject(job, JOB_OBJECT_BASIC_ACCOUNTING_INFORMATION_CLASS, ctypes.byref(info),
                                         ctypes.sizeof(info), None):
        raise win_error("QueryInformationJobObject")
    return int(info.ActiveProcesses)
