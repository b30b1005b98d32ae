"""Which process is the host of `wardian mcp serve` (the MCP client that started it), and whether it still runs.

The server must end when its host dies (within about 2 s), but its direct parent is not always the host:
a wrapper may sit in between and outlive it. `find_host` walks up the ancestry once, at startup, by these rules:

1. Start at the direct parent.
2. The PyInstaller onefile launcher is skipped: a onefile build unpacks itself and runs the program in a child of
   its own bootloader process, which waits for that child and so outlives the host. It is recognised by all three
   of: this process is frozen (`sys.frozen`); it is a onefile build's program (`_PYI_APPLICATION_HOME_DIR` set:
   PyInstaller >= 6.10's launcher passes its unpack folder so, and only in onefile mode; see `pyi_main` in
   https://github.com/pyinstaller/pyinstaller/blob/develop/bootloader/src/pyi_main.c); and the parent's
   executable is the very file this process runs (same device and inode). Only the direct parent can be it.
   `_PYI_PARENT_PROCESS_LEVEL` cannot tell: by the time Python runs, the bootloader has set it to this process's
   own level (1, the main process) for its children, in onefile and onedir builds alike.
3. A wrapper is skipped: a process named (its process name, or its executable's file name) one of `WRAPPERS`.
   These are the shells that may run `wardian mcp serve` as a child and wait for it instead of exec-ing it
   (`sh -c 'wardian mcp serve; true'`, bash, ...), busybox (whose applets include sh and timeout), and coreutils'
   `timeout`, which forks and waits. `env`, `nice`, `nohup`, `stdbuf` and `exec` replace themselves with the
   command, so they are never a parent and need no entry.
4. The first process that is neither is the host. There is none (`find_host` returns None, and only the direct
   parent is watched) when a process on the way cannot be read, when a wrapper has no parent to go on to (pid 1,
   e.g. a container's `sh -c`), or after `MAX_WRAPPERS` wrappers.

The host is identified by pid and start time, so a pid reused by a later process is not taken for the host alive;
a zombie counts as dead. A host that died before the walk is not seen: its wrappers are re-parented by then, and
the walk may end at init or a subreaper (stdin EOF and the direct parent's death still end the server).

Processes are read from /proc on Linux (stdlib only, a few small reads) and with psutil elsewhere on POSIX,
imported on first use: callers run this off the server's start path. On Windows there is no host to find
(`reader_for`): there the launcher's job object ends the server (`wardian.launcher`).

`watch` polls the host and the direct parent until one of them dies.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

log = logging.getLogger("wardian.mcp")

# Process names (or executable file names) of the wrappers skipped on the way up (rule 3).
WRAPPERS = frozenset({"sh", "ash", "dash", "bash", "zsh", "ksh", "mksh", "busybox", "timeout"})
# How many wrappers in a row the walk goes through before it gives up (rule 4).
MAX_WRAPPERS = 8
# How often the server checks that its host and its parent are still alive: it must exit within ~2 s of the
# parent's death, grace included.
PARENT_POLL_S = 0.25
# Set by the PyInstaller onefile launcher for the program it starts: the folder it unpacked the program into.
PYI_ONEFILE_HOME_ENV = "_PYI_APPLICATION_HOME_DIR"


class Process(NamedTuple):
    """What the walk needs of one process, read at one moment (a NamedTuple: a dataclass costs ~1.5 ms to define)."""

    pid: int
    ppid: int
    name: str
    exe: str | None  # the executable's path; None when it cannot be read (another user's process, a zombie)
    exe_id: tuple[int, int] | None  # (st_dev, st_ino) of the executable, when it can be read
    started: float  # the start time, in the reader's own unit: only compared with the same reader's
    zombie: bool


Reader = Callable[[int], Process | None]


def _read_proc(pid: int) -> Process | None:
    """`pid` read from /proc (Linux); None if it does not exist (or no longer does)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        # `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so split at the last ")"; starttime is
        # field 22 (proc_pid_stat(5)), the 20th after comm.
        end = stat.rindex(b")")
        name = stat[stat.index(b"(") + 1:end].decode("utf-8", "replace")
        fields = stat[end + 2:].split()
        state, ppid, started = fields[0], int(fields[1]), float(int(fields[19]))
    except (OSError, ValueError, IndexError):
        return None
    exe = exe_id = None
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        st = os.stat(f"/proc/{pid}/exe")
        exe_id = (st.st_dev, st.st_ino)
    except OSError:
        pass
    return Process(pid, ppid, name, exe, exe_id, started, state in (b"Z", b"X"))


def _read_psutil(pid: int) -> Process | None:
    """`pid` read with psutil (POSIX systems without /proc, e.g. macOS); None if it does not exist."""
    import psutil  # ~10 ms: only the watchdog thread pays for it, and only off Linux

    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            name, ppid, started, status = proc.name(), proc.ppid(), proc.create_time(), proc.status()
    except psutil.Error:
        return None
    exe = exe_id = None
    try:
        exe = proc.exe() or None
        if exe is not None:
            st = os.stat(exe)
            exe_id = (st.st_dev, st.st_ino)
    except (psutil.Error, OSError):
        pass
    return Process(pid, ppid, name, exe, exe_id, started, status == psutil.STATUS_ZOMBIE)


def reader_for(platform: str) -> Reader | None:
    """How processes are read on `platform` (a `sys.platform` value); None on Windows, where nothing is watched."""
    if platform == "win32":
        return None
    return _read_proc if platform.startswith("linux") else _read_psutil


def parent_watched(platform: str) -> bool:
    """Whether the server watches its parent on `platform` (a `sys.platform` value). Not on Windows: a process is
    never re-parented there, so `watch` would never fire (the launcher's job object ends the server,
    `wardian.launcher`), and Python 3.12's `os.getppid()` takes a process snapshot on each call there
    (PssCaptureSnapshot, which Wine 8.0 does not implement: the call aborts the process; docs/guide/windows.md)."""
    return platform != "win32"


def behind_onefile_launcher(environ: Mapping[str, str], frozen: bool) -> bool:
    """Whether this process is the program of a PyInstaller onefile build, started by its launcher (rule 2)."""
    return frozen and bool(environ.get(PYI_ONEFILE_HOME_ENV))


def is_wrapper(proc: Process) -> bool:
    """Rule 3: a shell or `timeout` that may wait for its child; a login shell's name may start with "-"."""
    names = {proc.name.lstrip("-")}
    if proc.exe:
        names.add(os.path.basename(proc.exe))
    return not names.isdisjoint(WRAPPERS)


def choose_host(parent: int, read: Reader, *, own: Process | None, onefile_child: bool) -> Process | None:
    """The host above this process (`own`, whose direct parent is `parent`), by the rules of this module."""
    proc = read(parent)
    if (proc is not None and onefile_child and own is not None and own.exe_id is not None
            and proc.exe_id == own.exe_id):
        proc = read(proc.ppid) if proc.ppid > 0 else None
    skipped = 0
    while proc is not None and is_wrapper(proc):
        if proc.ppid <= 0 or skipped == MAX_WRAPPERS:
            return None
        proc = read(proc.ppid)
        skipped += 1
    return proc


class Host:
    """The host found at startup; `running` says whether that same process still runs."""

    def __init__(self, process: Process, read: Reader) -> None:
        self.process = process
        self._read = read

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        now = self._read(self.process.pid)
        return now is not None and now.started == self.process.started and not now.zombie


def find_host(parent: int, read: Reader | None = None) -> Host | None:
    """The host of this process, whose direct parent is `parent` (`os.getppid()` taken at startup); None when there
    is none to watch beyond that parent (see the rules above, and Windows). `read` replaces the platform's reader."""
    if read is None:
        read = reader_for(sys.platform)
        if read is None:
            return None
    found = choose_host(parent, read, own=read(os.getpid()),
                        onefile_child=behind_onefile_launcher(os.environ, bool(getattr(sys, "frozen", False))))
    return None if found is None else Host(found, read)


def watch(parent: int, on_death: Callable[[], None], poll_s: float = PARENT_POLL_S) -> None:
    """Call `on_death` once, when the host (the MCP client that started this server) or the direct parent, `parent`
    (`os.getppid()` taken at startup), has died; blocks until then (the server runs it on a daemon thread).

    A dead parent's children are re-parented (to init or a subreaper), so `os.getppid()` changes: polling it is
    portable and needs no privilege, and it does not matter who else holds stdin open. The parent may be a wrapper
    that outlives the host, though (a shell that does not exec, the PyInstaller onefile launcher): so the host,
    found once by walking up the ancestry (`find_host`, on the watching thread so the walk, and psutil off Linux,
    cost the start nothing), is polled too, by pid and start time.
    Not PR_SET_PDEATHSIG: Linux sends that when the parent *thread* that spawned us exits, and hosts such as Codex
    spawn from short-lived threads. A parent or host that died before this runs is not seen (stdin EOF still ends
    the server). On Windows a process is never re-parented and no host is looked for, so this never fires; there
    the launcher's job object ends the server (`wardian.launcher`).
    """
    try:
        host = find_host(parent)
    except Exception:  # the parent is still watched
        log.exception("could not tell the host process")
        host = None
    if host is None:
        log.info("no host found above the parent, pid %d: watching the parent only", parent)
    else:
        log.info("watching the host, pid %d (%s), and the parent, pid %d", host.pid, host.process.name, parent)
    while True:
        if os.getppid() != parent:
            log.info("the parent process (pid %d) has died: exiting as at the end of stdin", parent)
            break
        if host is not None and not host.running():
            log.info("the host process (pid %d) has died: exiting as at the end of stdin", host.pid)
            break
        time.sleep(poll_s)
    on_death()
