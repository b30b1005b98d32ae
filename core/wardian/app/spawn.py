"""Starting an app and waiting for readiness: the one helper `wardian app start`, the tests, the bench and the
harness all use (stdlib only: the CLI's cold start must not pay for the app's imports).

The protocol: the child runs `wardian app run --home ROOT --ready-fd N` and writes one line on fd N, `ready`
once it accepts calls, or its startup error as JSON (`WardianError.to_data()`); EOF without a line means it died.
On Windows N is the pipe's inheritable handle, passed to that child alone (`STARTUPINFO.lpAttributeList`'s handle
list), and the child opens it as a descriptor.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, cast

import orjson

from wardian import errors

if sys.platform == "win32":
    import msvcrt

READY = "ready"
DEFAULT_START_TIMEOUT_S = 15.0


def self_command() -> list[str]:
    """The command that runs this wardian: the frozen executable itself, or this interpreter's `-m wardian`."""
    if getattr(sys, "frozen", False):
        return [sys.executable]
    return [sys.executable, "-m", "wardian"]


def _new_session_popen(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    # Never text mode (no `text`/`encoding` is passed), so its pipes, if any, are bytes.
    return cast("subprocess.Popen[bytes]", subprocess.Popen(list(argv), start_new_session=True, **kwargs))


def start_app(root: Path, *, command: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
              stdout: int | IO[Any] | None = subprocess.DEVNULL, stderr: int | IO[Any] | None = None,
              timeout_s: float = DEFAULT_START_TIMEOUT_S,
              spawn: Callable[..., subprocess.Popen[bytes]] = _new_session_popen,
              extra_args: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """Start `wardian app run` on the home at `root` (in a session of its own by default) and return the running
    process once it accepts calls.

    `spawn(argv, **popen_kwargs)` makes the process (tests and the harness pass their own); `stderr` None leaves
    it to `spawn`.

    Raises:
        WardianError: the app's own startup error (`already_running`, `storage_unavailable`, ...).
        InternalError: it neither became ready nor reported an error within `timeout_s`, or exited without a word
            (it is killed and reaped).
    """
    read_fd, write_fd = os.pipe()
    ready_arg, kwargs = _pass_ready_fd(write_fd)
    argv = [*(command or self_command()), "app", "run", "--home", str(root), "--ready-fd", ready_arg, *extra_args]
    kwargs |= {"stdin": subprocess.DEVNULL, "stdout": stdout}
    if stderr is not None:
        kwargs["stderr"] = stderr
    if env is not None:
        kwargs["env"] = dict(env)
    try:
        proc = spawn(argv, **kwargs)
    finally:
        os.close(write_fd)
    try:
        ready, line = _read_ready(read_fd, timeout_s)
    finally:
        if sys.platform != "win32":  # there the reading thread closes it (it may still be reading)
            os.close(read_fd)
    if line == READY:
        return proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    if line.startswith("{"):
        raise errors.from_data(orjson.loads(line))
    if not ready:
        raise errors.InternalError(f"the app did not become ready in {timeout_s:g} s")
    raise errors.InternalError(f"the app exited ({proc.returncode}) before it was ready")


def _pass_ready_fd(write_fd: int) -> tuple[str, dict[str, Any]]:
    """How the child gets the pipe's writing end: its number for `--ready-fd`, and the Popen arguments that pass it
    to that child alone."""
    if sys.platform != "win32":
        return str(write_fd), {"pass_fds": (write_fd,)}
    handle = msvcrt.get_osfhandle(write_fd)
    os.set_handle_inheritable(handle, True)
    info = subprocess.STARTUPINFO(lpAttributeList={"handle_list": [handle]})
    # No console of its own (it is a background server), and out of this console's Ctrl+C.
    flags = subprocess.CREATE_NO_WINDOW | subprocess.CREATE_NEW_PROCESS_GROUP
    return str(handle), {"startupinfo": info, "creationflags": flags, "close_fds": True}


def _read_ready(read_fd: int, timeout_s: float) -> tuple[bool, str]:
    """Whether the child wrote or closed its end within `timeout_s`, and the line it wrote (stripped)."""
    if sys.platform != "win32":
        ready, _, _ = select.select([read_fd], [], [], timeout_s)
        return bool(ready), os.read(read_fd, 65536).decode("utf-8", "replace").strip() if ready else ""
    # Windows cannot select() on a pipe: a thread reads it, and closes it once the read ends (the caller kills a
    # child that is not ready, which ends the read).
    got: list[bytes] = []

    def read() -> None:
        try:
            got.append(os.read(read_fd, 65536))
        except OSError:
            got.append(b"")
        finally:
            os.close(read_fd)

    reader = threading.Thread(target=read, name="wardian-ready", daemon=True)
    reader.start()
    reader.join(timeout_s)
    return bool(got), got[0].decode("utf-8", "replace").strip() if got else ""


def report_ready(ready_fd: int | None, line: str) -> None:
    """The app's side: write `ready` (or the startup error's JSON) on the inherited fd (on Windows, handle) and close
    it."""
    if ready_fd is None:
        return
    try:
        if sys.platform == "win32":
            ready_fd = msvcrt.open_osfhandle(ready_fd, 0)
        os.write(ready_fd, line.encode("utf-8") + b"\n")
        os.close(ready_fd)
    except OSError:
        pass
