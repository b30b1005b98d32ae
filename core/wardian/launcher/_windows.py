"""Windows backend of the launcher: `wardian-mcp.exe` starts `wardian-cli.exe` silently and keeps it contained.

Contract rule CFG-5 (docs/design/contract.md): on Windows managed startup registers wardian-mcp.exe, a GUI-subsystem
launcher that starts the console CLI with CREATE_NO_WINDOW, passes standard input, output and error through
unchanged, and closing the launcher also closes its server process.

- Silence: the launcher is a GUI-subsystem program (no console of its own) and starts the console CLI with
  CREATE_NO_WINDOW, so neither flashes a window when Codex launches the server.
- Pass-through: the child inherits the launcher's own standard handles (`_common`); `subprocess` duplicates
  them as inheritable and lists only those three in the child's handle list, so nothing else leaks in.
- Containment: a Job Object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE (`wardian.winjob`), whose handle only the
  launcher holds. When the launcher exits or is killed, Windows closes that last handle and terminates every
  process in the job.
- Known gap, written down (docs/guide/frozen-builds.md#windows): the child runs for a moment before
  `AssignProcessToJobObject`. If the launcher dies inside that window the child is outside the job; it still ends
  when Codex closes its stdin, because `wardian mcp serve` exits on EOF and reads the very pipe Codex writes to.
- Exit status: the child's 32-bit exit code, unchanged (NTSTATUS values such as 0xC000013A included).

Verified under Wine 8.0 (tests/windows/, docs/guide/windows.md); on Linux the tests check the exit-code conversion
and the CLI's name, and the shared pass-through and containment sequence runs through the POSIX backend.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from wardian import winjob
from wardian.executables import WINDOWS_MCP_LAUNCHER
from wardian.launcher import _common

MCP_LAUNCHER: str | None = WINDOWS_MCP_LAUNCHER
CLI_NAME = "wardian-cli.exe"

CREATE_NO_WINDOW = 0x08000000


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
    k32 = winjob.kernel32()
    try:
        job = winjob.assign_to_new_job(k32, proc.pid)
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
