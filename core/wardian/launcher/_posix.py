"""POSIX backend of the launcher: the same pass-through and containment as Windows, with POSIX means.

`wardian` needs no launcher on POSIX (Codex starts `wardian mcp serve` directly and no console window
exists to hide); this backend exists so the shared code path (`_common.run`) runs, and is tested, here.

Containment:
- The child stays in the launcher's process group, so a group signal (Ctrl-C in a terminal, a client
  killing the group) reaches both.
- SIGTERM, SIGHUP and SIGINT sent to the launcher alone are forwarded to the child; the launcher keeps
  waiting and then exits with the child's status.
- Linux: the child asks the kernel for SIGKILL when the launcher dies (`PR_SET_PDEATHSIG`), so even a
  launcher killed with SIGKILL leaves no server behind: the POSIX counterpart of the kill-on-close Job.
  Known gap: macOS has no parent-death signal, so there a SIGKILLed launcher leaves the child running until
  its stdin closes (a launcher is not used on macOS; `wardian` is registered directly).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, cast

from wardian.launcher import _common

MCP_LAUNCHER: str | None = None
CLI_NAME = "wardian"
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
_PR_SET_PDEATHSIG = 1
# A killed child gets this long to be reaped before the launcher stops waiting for it.
_REAP_S = 5.0


def cli_command() -> list[str]:
    """The CLI the launcher starts: `wardian` beside a frozen launcher, else this interpreter's module."""
    if getattr(sys, "frozen", False):
        return [str(Path(sys.executable).absolute().with_name(CLI_NAME))]
    return [sys.executable, "-m", "wardian"]


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A pre-exec hook that makes the kernel SIGKILL the child when `parent` dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork: the hook only calls into it

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The launcher may have died between fork and prctl: then the signal would never come.
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def spawn(command: Sequence[str], streams: dict[str, Any]) -> subprocess.Popen[bytes]:
    # close_fds: the child gets fds 0-2 and nothing else of the launcher's.
    # `streams` holds file objects or descriptors, never `text`/`encoding`: the child's pipes are bytes.
    return cast("subprocess.Popen[bytes]", subprocess.Popen(list(command), **streams, close_fds=True,
                                                            preexec_fn=_die_with_parent(os.getpid())))


@contextmanager
def contain(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    try:
        yield
    finally:
        if proc.poll() is None:
            proc.kill()
            # A child stuck in uninterruptible sleep is reaped by the kernel once the launcher is gone.
            with suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_REAP_S)


def wait(proc: subprocess.Popen[bytes]) -> int:
    """Wait for the child, forwarding SIGTERM/SIGHUP/SIGINT to it meanwhile; its `returncode`."""

    def forward(signum: int, _frame: FrameType | None) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        return proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(command: Sequence[str]) -> int:
    """Start `command` with our stdin/stdout/stderr, contained; its `returncode` (-N: killed by signal N).

    Raises:
        OSError: the command could not be started.
    """
    return _common.run(command, spawn, contain, wait)


def finish(status: int) -> NoReturn:
    """Exit with a child's status; a child killed by signal N kills the launcher with N too (else 128 + N)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if status < 0:
        sig = -status
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # these two cannot be caught, so need no reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # the signal is blocked or ignored by whoever started us
    os._exit(status)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point: run the CLI with our arguments and exit with its status."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        status = run([*cli_command(), *args])
    except OSError as exc:
        sys.stderr.write(f"wardian-mcp: cannot start {cli_command()[0]}: {exc}\n")
        finish(1)
    finish(status)
