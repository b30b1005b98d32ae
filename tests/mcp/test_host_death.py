"""`wardian mcp serve` ends when its host dies, behind a wrapper too (row M5 (c); core/wardian/mcp/_host.py).

The end-to-end tests start a host (a Python script) that starts the server on a stdin pipe it keeps, and hands the
same pipe to a grandchild, so stdin never reaches EOF; the host is SIGKILLed and the server must be gone within
2 s: started directly, behind a shell that does not exec, and as the PyInstaller onefile build. The onefile binary
is WARDIAN_FROZEN_ONEFILE_CLI when set (and the test fails if it is not there); otherwise it is built with
`build/freeze.py --onefile` into `build/work/pytest-onefile/`, once per source state, as tests/build/test_frozen.py
does for onedir: the test never skips. The other tests check `_host`'s rules: on real process chains, and on
made-up ones for what a test cannot start (a onefile launcher above a plain interpreter, pid 1).
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil
import pytest

from tests.build.test_frozen import WORK, _source_digest
from tests.mcp.mcp_harness import serve_command, server_env
from wardian.mcp import _host
from wardian.mcp._host import MAX_WRAPPERS, Host, Process, choose_host, is_wrapper

try:
    import fcntl
except ImportError:  # Windows: build once first and point WARDIAN_FROZEN_ONEFILE_CLI at it
    fcntl = None  # type: ignore[assignment]

REPO = Path(__file__).resolve().parents[2]
ENV_ONEFILE = "WARDIAN_FROZEN_ONEFILE_CLI"
DEADLINE_S = 2.0  # the server is gone within 2 s of its host's death
# A shell that stays: the command is not the last of the script, so sh runs it as a child and waits.
SH_WRAPPER = ["sh", "-c", '"$@"; exit $?', "sh"]
# The server's log line once it knows whom it watches (`_host.watch`, at WARDIAN_LOG_LEVEL=INFO).
WATCHING = re.compile(rb"watching the host, pid (\d+) \((.*)\), and the parent, pid (\d+)")

# The host: starts `cmd` on a stdin pipe, gives the pipe's write end to a grandchild that lives as long as this
# host's own stdin is open (the test's pipe), says both pids, and lives until it is killed.
HOST = r"""
import json, os, subprocess, sys
cmd = json.loads(sys.argv[1])
stdin_r, stdin_w = os.pipe()
holder = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read()"], pass_fds=(stdin_w,),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
child = subprocess.Popen(cmd, stdin=stdin_r, stdout=subprocess.DEVNULL)
os.close(stdin_r)
print(json.dumps({"child": child.pid, "holder": holder.pid}), flush=True)
sys.stdin.buffer.read()
"""

# Prints the host that `_host.find_host` finds for this process, with each reader, and the names of its ancestors.
LEAF = r"""
import json, os
from wardian.mcp import _host
found = {name: getattr(_host.find_host(os.getppid(), read), "pid", None)
         for name, read in (("proc", _host._read_proc), ("psutil", _host._read_psutil))}
names, pid = [], os.getppid()
for _ in range(4):
    proc = _host._read_proc(pid)
    names.append(proc.name)
    pid = proc.ppid
print(json.dumps({"found": found, "ancestors": names}), flush=True)
"""
# A plain process between the test and the wrappers: the host the leaf must find.
MIDDLE = r"""
import json, os, subprocess, sys
print(json.dumps({"middle": os.getpid()}), flush=True)
sys.exit(subprocess.run(json.loads(sys.argv[1])).returncode)
"""


def _build_onefile(into: Path) -> Path:
    """A copy, in `into`, of the onefile CLI of the current sources, built once per source state (xdist workers and
    other sessions share the build through a lock). A copy: another session may rebuild it while this one runs."""
    WORK.mkdir(parents=True, exist_ok=True)
    dist = WORK / "pytest-onefile"
    stamp = dist / "source.sha256"
    name = "wardian-cli.exe" if os.name == "nt" else "wardian"
    with open(WORK / "pytest-onefile.lock", "w", encoding="utf-8") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        digest = _source_digest()
        if not (dist / name).exists() or not stamp.exists() or stamp.read_text(encoding="utf-8") != digest:
            shutil.rmtree(dist, ignore_errors=True)
            proc = subprocess.run([sys.executable, str(REPO / "build" / "freeze.py"), "--onefile", "--distpath",
                                   str(dist)], cwd=REPO, capture_output=True, timeout=840, check=False)
            assert proc.returncode == 0, (proc.stdout + proc.stderr).decode("utf-8", "replace")[-6000:]
            stamp.write_text(digest, encoding="utf-8")
        return Path(shutil.copy2(dist / name, into / name))


@pytest.fixture(scope="session")
def onefile_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get(ENV_ONEFILE)
    exe = Path(given).absolute() if given else _build_onefile(tmp_path_factory.mktemp("onefile"))
    assert exe.is_file(), f"no onefile CLI at {exe} ({ENV_ONEFILE}={given!r})"
    assert os.access(exe, os.X_OK), f"{exe} is not executable"
    return exe


def _read_until(stream: IO[bytes], pattern: re.Pattern[bytes], timeout_s: float) -> tuple[re.Match[bytes], bytes]:
    """Read `stream` until a line matches `pattern`; the match and everything read."""
    fd, data = stream.fileno(), b""
    deadline = time.monotonic() + timeout_s
    while True:
        for line in data.splitlines():
            if match := pattern.search(line):
                return match, data
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no line matching {pattern.pattern!r} within {timeout_s} s: {data[-3000:]!r}"
        chunk = os.read(fd, 1 << 16)
        assert chunk, f"the server's stderr closed first: {data[-3000:]!r}"
        data += chunk


@contextmanager
def _exit_watch(proc: psutil.Process) -> Iterator[Callable[[float], bool]]:
    """A function that says whether `proc` has exited by a deadline (`time.monotonic()`); a zombie has exited, it
    only waits to be reaped. Linux's pidfd is taken at once, so a pid reused after the exit is not mistaken for it."""
    if not hasattr(os, "pidfd_open"):

        def wait(deadline: float) -> bool:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except psutil.TimeoutExpired:
                return False
            return True

        yield wait
        return
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:  # gone and reaped already
        yield lambda deadline: True
        return
    try:
        running = proc.is_running()  # False: the pid was already free, or reused, when the pidfd was taken

        def exited(deadline: float) -> bool:
            return not running or bool(select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0])

        yield exited
    finally:
        os.close(fd)


def _end(proc: psutil.Process, grace_s: float) -> None:
    """Let `proc` end by itself within `grace_s` (a onefile launcher removes its unpacked folder), else kill it."""
    with _exit_watch(proc) as exited:
        if exited(time.monotonic() + grace_s):
            return
    with suppress(psutil.Error):
        proc.kill()  # psutil checks the start time: never another process on a reused pid


@dataclass
class Hosted:
    host: subprocess.Popen[bytes]
    child: psutil.Process  # what the host started: the server, or the wrapper or launcher above it
    server: psutil.Process
    watched_host: int  # the pids of the server's log line
    watched_parent: int
    stderr: bytes


@contextmanager
def _hosted(cmd: list[str]) -> Iterator[Hosted]:
    """A host running `cmd` (a server, perhaps behind a wrapper), once the server has said whom it watches."""
    host = subprocess.Popen([sys.executable, "-c", HOST, json.dumps(cmd)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=server_env(WARDIAN_LOG_LEVEL="INFO"), start_new_session=True)
    server = child = holder = None  # what the host started, and the server
    try:
        assert host.stdout is not None
        assert host.stderr is not None
        line = host.stdout.readline()
        assert line, f"the host ended at once: {host.communicate(timeout=30)[1].decode('utf-8', 'replace')[-3000:]}"
        pids = json.loads(line)
        child, holder = psutil.Process(pids["child"]), psutil.Process(pids["holder"])
        match, stderr = _read_until(host.stderr, WATCHING, 120)  # a onefile build unpacks itself first
        watched_host, watched_parent = int(match[1]), int(match[3])
        server = child if watched_parent == host.pid else psutil.Process(watched_parent).children()[0]
        yield Hosted(host, child, server, watched_host, watched_parent, stderr)
    finally:
        if host.poll() is None:
            host.kill()
        assert host.stdin is not None
        host.stdin.close()  # the holder's stdin: it ends
        # The server first (gone by now unless the test failed); then its wrapper or onefile launcher ends by itself
        # (the launcher removing the folder it unpacked), and so does the holder.
        for proc, grace_s in ((server, 0.0), (child, 30.0), (holder, 30.0)):
            if proc is not None:
                _end(proc, grace_s)
        host.wait(timeout=30)
        for stream in (host.stdout, host.stderr):
            if stream is not None:
                stream.close()


def _kill_host_and_wait(hosted: Hosted) -> bytes:
    """SIGKILL the host; assert the server is gone within the deadline; the server's last words on stderr."""
    assert hosted.host.stderr is not None
    with _exit_watch(hosted.server) as exited:
        killed = time.monotonic()
        hosted.host.send_signal(signal.SIGKILL)
        assert exited(killed + DEADLINE_S), f"the server was still running {DEADLINE_S} s after its host's death"
    hosted.host.wait(timeout=10)
    _, rest = _read_until(hosted.host.stderr, re.compile(rb"has died: exiting"), 30)
    return rest


def test_the_server_started_directly_exits_within_2_s_of_its_hosts_death() -> None:
    """The host is the direct parent: its SIGKILL ends the server although a grandchild keeps stdin open."""
    with _hosted(serve_command()) as hosted:
        assert hosted.watched_host == hosted.watched_parent == hosted.host.pid
        assert hosted.server.pid == hosted.child.pid
        _kill_host_and_wait(hosted)


def test_the_server_behind_a_shell_that_stays_exits_within_2_s_of_its_hosts_death() -> None:
    """`sh -c '"$@"; exit $?'` waits for the server and outlives the host; the server watches the host itself."""
    with _hosted([*SH_WRAPPER, *serve_command()]) as hosted:
        assert hosted.watched_parent == hosted.child.pid != hosted.server.pid  # the shell did not exec
        assert hosted.child.name() == "sh"
        assert hosted.server.ppid() == hosted.child.pid
        assert hosted.watched_host == hosted.host.pid
        rest = _kill_host_and_wait(hosted)
        assert f"the host process (pid {hosted.host.pid}) has died".encode() in rest


@pytest.mark.timeout(900)  # the first test of a source state may wait for the onefile build
def test_the_onefile_server_exits_within_2_s_of_its_hosts_death(onefile_cli: Path) -> None:
    """The onefile bootloader is the server's parent and outlives the host; the server watches the host above it."""
    with _hosted([str(onefile_cli), "mcp", "serve"]) as hosted:
        assert hosted.watched_parent == hosted.child.pid != hosted.server.pid  # the bootloader
        assert os.path.samefile(hosted.child.exe(), onefile_cli)
        assert os.path.samefile(hosted.server.exe(), onefile_cli)
        assert hosted.watched_host == hosted.host.pid
        rest = _kill_host_and_wait(hosted)
        assert f"the host process (pid {hosted.host.pid}) has died".encode() in rest


def test_the_host_is_the_nearest_ancestor_that_is_not_a_shell_or_timeout() -> None:
    """Real chain test -> python -> sh -> timeout -> bash -> leaf: the python is the host, with either reader."""
    leaf = [sys.executable, "-c", LEAF]
    chain = [*SH_WRAPPER, "timeout", "60", "bash", "-c", '"$@"; exit $?', "bash", *leaf]
    out = subprocess.run([sys.executable, "-c", MIDDLE, json.dumps(chain)], capture_output=True, timeout=60,
                         check=True).stdout.splitlines()
    middle, report = json.loads(out[0])["middle"], json.loads(out[1])
    assert report["ancestors"][:3] == ["bash", "timeout", "sh"]  # the wrappers really stayed
    assert report["found"] == {"proc": middle, "psutil": middle}


def test_the_host_of_a_process_without_a_wrapper_is_its_direct_parent() -> None:
    """No wrapper in between: the process that started the leaf (this test's) is the host."""
    out = subprocess.run([sys.executable, "-c", LEAF], capture_output=True, timeout=60, check=True).stdout
    assert json.loads(out)["found"] == {"proc": os.getpid(), "psutil": os.getpid()}


def test_both_readers_see_a_real_process_alike() -> None:
    """The /proc reader (Linux) and the psutil one (other POSIX systems) agree on what the rules use."""
    if not sys.platform.startswith("linux"):
        pytest.skip("/proc is Linux's")
    by_proc, by_psutil = _host._read_proc(os.getpid()), _host._read_psutil(os.getpid())
    assert by_proc is not None
    assert by_psutil is not None
    for field in ("pid", "ppid", "name", "exe", "exe_id", "zombie"):
        assert getattr(by_proc, field) == getattr(by_psutil, field), field
    assert by_proc.exe_id is not None
    assert not by_proc.zombie


def test_a_host_that_is_a_zombie_or_gone_or_a_reused_pid_is_not_running() -> None:
    """A killed, unreaped host is dead; so is a reaped one, and a live process whose start time is not the host's."""
    readers = [_host._read_proc, _host._read_psutil] if sys.platform.startswith("linux") else [_host._read_psutil]
    hosts: list[Host] = []
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE) as child:
        try:
            for read in readers:
                seen = read(child.pid)
                assert seen is not None
                assert not seen.zombie
                hosts.append(Host(seen, read))
                assert not Host(seen._replace(started=seen.started - 1), read).running()
            assert all(host.running() for host in hosts)
            child.kill()
            os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
            for read, host in zip(readers, hosts, strict=True):
                zombie = read(child.pid)
                assert zombie is not None
                assert zombie.zombie
                assert not host.running()
        finally:
            child.kill()  # a no-op once it has died; leaving `with` closes its stdin and reaps it
    assert not any(host.running() for host in hosts)


def _chain(*procs: Process) -> _host.Reader:
    table = {p.pid: p for p in procs}
    return table.get


def _proc(pid: int, ppid: int, name: str, exe: str | None = None, exe_id: tuple[int, int] | None = None) -> Process:
    return Process(pid, ppid, name, exe, exe_id, started=float(pid), zombie=False)


def test_the_onefile_launcher_is_skipped_only_when_it_runs_this_very_executable_and_says_so() -> None:
    """Rule 2: frozen, `_PYI_APPLICATION_HOME_DIR` set and the same executable file; missing any, the parent is the
    host."""
    own = _proc(10, 9, "wardian", "/opt/wardian", (1, 77))
    read = _chain(own, _proc(9, 8, "wardian", "/opt/wardian", (1, 77)), _proc(8, 7, "sh", "/usr/bin/dash"),
                  _proc(7, 1, "codex", "/usr/bin/codex"))
    assert getattr(choose_host(9, read, own=own, onefile_child=True), "pid", None) == 7
    assert getattr(choose_host(9, read, own=own, onefile_child=False), "pid", None) == 9
    other_exe = own._replace(exe_id=(1, 78))
    assert getattr(choose_host(9, read, own=other_exe, onefile_child=True), "pid", None) == 9
    # What PyInstaller 6.22's bootloader leaves in the environment of a onefile build's program, and of onedir's.
    onefile = {"_PYI_ARCHIVE_FILE": "/opt/wardian", "_PYI_PARENT_PROCESS_LEVEL": "1",
               "_PYI_APPLICATION_HOME_DIR": "/tmp/_MEI00005732sZ2Pyt"}
    onedir = {"_PYI_ARCHIVE_FILE": "/opt/wardian/wardian", "_PYI_PARENT_PROCESS_LEVEL": "1"}
    assert _host.behind_onefile_launcher(onefile, frozen=True)
    for environ, frozen in ((onefile, False), (onedir, True), ({}, True)):
        assert not _host.behind_onefile_launcher(environ, frozen), (environ, frozen)


def test_wrappers_are_known_by_process_name_or_executable_name() -> None:
    """Rule 3: busybox's sh, a login shell's "-zsh" and `timeout` are wrappers; env-like commands exec and are not."""
    assert is_wrapper(_proc(5, 4, "sh", "/bin/busybox"))
    assert is_wrapper(_proc(5, 4, "ash", None))
    assert is_wrapper(_proc(5, 4, "-zsh", "/bin/zsh"))
    assert is_wrapper(_proc(5, 4, "timeout", "/usr/bin/timeout"))
    assert is_wrapper(_proc(5, 4, "x", "/usr/bin/bash"))
    for name in ("codex", "node", "env", "python3", "shell"):
        assert not is_wrapper(_proc(5, 4, name, f"/usr/bin/{name}")), name


def test_there_is_no_host_above_pid_1_an_unreadable_process_or_too_many_wrappers() -> None:
    """Rule 4: a wrapper with no parent (a container's `sh -c` as pid 1), a gap in the table, or a wrapper chain
    longer than MAX_WRAPPERS leave only the direct parent to watch."""
    assert choose_host(5, _chain(_proc(5, 1, "bash"), _proc(1, 0, "sh")), own=None, onefile_child=False) is None
    assert choose_host(5, _chain(_proc(5, 4, "bash")), own=None, onefile_child=False) is None
    assert choose_host(5, _chain(), own=None, onefile_child=False) is None
    shells = [_proc(100 + i, 101 + i, "sh") for i in range(MAX_WRAPPERS + 1)]
    top = 100 + MAX_WRAPPERS + 1
    assert choose_host(100, _chain(*shells, _proc(top, 1, "codex")), own=None, onefile_child=False) is None
    assert getattr(choose_host(101, _chain(*shells, _proc(top, 1, "codex")), own=None, onefile_child=False),
                   "pid", None) == top
    init = _proc(1, 0, "systemd")
    assert choose_host(5, _chain(_proc(5, 1, "sh"), init), own=None, onefile_child=False) == init


def test_nothing_is_watched_on_windows_and_linux_reads_proc() -> None:
    """On Windows the launcher's job object ends the server (`wardian.launcher`), so there is no reader."""
    assert _host.reader_for("win32") is None
    assert _host.reader_for("linux") is _host._read_proc
    assert _host.reader_for("darwin") is _host._read_psutil
