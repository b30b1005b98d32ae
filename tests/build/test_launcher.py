"""The launcher's shared pass-through and containment code path, run on POSIX with real child processes (CFG-5).

Each test starts a real launcher process (`wardian.launcher.run` inside `python -c`) that starts a real child,
so the process boundary is the subject: the launcher's own stdin/stdout/stderr, its death and its exit status.
The Windows backend (CREATE_NO_WINDOW, the kill-on-close Job Object) cannot run here; what Linux can check of
it is at the end of this file.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

import wardian.launcher
from tests.conftest import wardian_cmd
from wardian import winjob
from wardian.launcher import _common, _windows

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the POSIX run of the launcher's code path")

# A launcher exactly like `wardian-mcp`, except that the child comes from its arguments.
LAUNCHER = [sys.executable, "-c", "import sys; from wardian.launcher import finish, run; finish(run(sys.argv[1:]))"]

# Children (plain Python, so they start fast): each reports through its own stdout/stderr or exit status.
ECHO_SHA = """
import hashlib, sys
data = sys.stdin.buffer.read()
sys.stdout.buffer.write(data)
sys.stderr.buffer.write(hashlib.sha256(data).hexdigest().encode() + b"\\n")
"""
REPORT_PID_THEN_READ = """
import os, sys
sys.stdout.write(f"{os.getpid()}\\n"); sys.stdout.flush()
sys.stdin.buffer.read()
"""
REPORT_PID_THEN_SLEEP = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(42))
sys.stdout.write(f"{os.getpid()}\\n"); sys.stdout.flush()
time.sleep(120)
"""


def child(source: str) -> list[str]:
    return [*LAUNCHER, sys.executable, "-c", source]


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.01)
    return False


def test_every_byte_passes_through_unchanged_both_ways() -> None:
    """CFG-5: the launcher passes standard input, output and error through unchanged (checked by SHA-256)."""
    data = bytes(range(256)) * 4096 + "ünïcødé\r\n\x00\x1a".encode() + os.urandom(1 << 20)
    proc = subprocess.run(child(ECHO_SHA), input=data, capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0
    assert hashlib.sha256(proc.stdout).hexdigest() == hashlib.sha256(data).hexdigest()
    assert proc.stderr.decode().strip() == hashlib.sha256(data).hexdigest()  # what the child itself read


def test_the_child_inherits_the_launchers_own_streams_rather_than_copies() -> None:
    """Our choice (CFG-5): pass-through by inheritance, so no launcher thread buffers or reorders a byte."""
    probe = "import os; print(os.fstat(0).st_ino, os.fstat(1).st_ino, flush=True)"
    r0, w0 = os.pipe()
    r1, w1 = os.pipe()
    expected = f"{os.fstat(r0).st_ino} {os.fstat(w1).st_ino}\n".encode()
    proc = subprocess.Popen([*LAUNCHER, sys.executable, "-c", probe], stdin=r0, stdout=w1)
    os.close(r0)
    os.close(w1)
    with os.fdopen(w0, "wb"), os.fdopen(r1, "rb") as out:
        assert proc.wait(timeout=30) == 0
        assert out.read() == expected  # the very pipes we gave the launcher


def test_the_child_gets_no_other_descriptor_of_the_launcher() -> None:
    """CFG-5 (a non-inheritable Job handle, so no child holds it): only the three standard streams are handed down."""
    r, w = os.pipe()
    probe = f"import os; os.fstat({r})"
    proc = subprocess.run([*LAUNCHER, sys.executable, "-c", probe], pass_fds=(r,), stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=30, check=False)
    os.close(r)
    os.close(w)
    assert proc.returncode == 1
    assert b"Bad file descriptor" in proc.stderr


def test_a_closed_stdin_ends_the_child_and_then_the_launcher() -> None:
    """CFG-5: EOF on the launcher's stdin is EOF on the server's, so closing it ends both."""
    proc = subprocess.Popen(child(REPORT_PID_THEN_READ), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdin is not None
    pid = int(proc.stdout.readline())
    assert alive(pid)
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert wait_gone(pid)
    proc.stdout.close()


def test_a_killed_launcher_leaves_no_child_behind() -> None:
    """CFG-5: closing the launcher also closes its server process (Linux: PR_SET_PDEATHSIG, like the Job)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("known gap: macOS has no parent-death signal")
    proc = subprocess.Popen(child(REPORT_PID_THEN_READ), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdin is not None
    pid = int(proc.stdout.readline())
    assert alive(pid)
    proc.kill()  # SIGKILL: the launcher runs no cleanup at all
    proc.wait(timeout=30)
    assert wait_gone(pid)  # even though its stdin (our pipe) is still open
    proc.stdin.close()
    proc.stdout.close()


def test_a_terminated_launcher_forwards_the_signal_and_exits_with_the_childs_status() -> None:
    """Our choice (CFG-5): SIGTERM to the launcher alone reaches its server; the launcher reports how it ended."""
    proc = subprocess.Popen(child(REPORT_PID_THEN_SLEEP), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 42  # the child's SIGTERM handler chose 42
    assert wait_gone(pid)
    proc.stdout.close()


@pytest.mark.parametrize("status", [0, 1, 3, 8, 255])
def test_the_launcher_exits_with_the_childs_exit_status(status: int) -> None:
    """CFG-5: the launcher exits with the child's status."""
    proc = subprocess.run(child(f"raise SystemExit({status})"), stdin=subprocess.DEVNULL, timeout=30, check=False)
    assert proc.returncode == status


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV])
def test_a_child_killed_by_a_signal_kills_the_launcher_with_the_same_signal(sig: signal.Signals) -> None:
    """Our choice (CFG-5): a POSIX child's fatal signal is re-raised, so the caller sees the same end."""
    proc = subprocess.run(child(f"import os; os.kill(os.getpid(), {int(sig)})"), stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=30, check=False)
    assert proc.returncode == -sig


def test_a_command_that_cannot_start_is_an_error_not_a_hang() -> None:
    """CFG-2, CFG-5: a missing CLI beside the launcher is reported on stderr with status 1."""
    proc = subprocess.run([sys.executable, "-c", "from wardian.launcher import main; main(['--version'])"],
                          env={**os.environ, "PATH": ""}, capture_output=True, timeout=30, check=False)
    assert proc.returncode == 0  # from source the CLI is this interpreter's module: it starts
    assert proc.stdout.decode().startswith("wardian ")
    missing = subprocess.run([*LAUNCHER, "/nonexistent/wardian-cli", "mcp", "serve"], stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=30, check=False)
    assert missing.returncode == 1
    assert b"FileNotFoundError" in missing.stderr or b"No such file" in missing.stderr


def test_mcp_serve_answers_initialize_through_the_launcher() -> None:
    """CFG-5: `wardian-mcp mcp serve` is a working MCP server (the CLI under test, frozen or not, as child)."""
    init = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            b'"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    proc = subprocess.run([*LAUNCHER, *wardian_cmd(), "mcp", "serve"], input=init, env=env, capture_output=True,
                          timeout=90, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert orjson.loads(proc.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "wardian"


def test_closed_standard_streams_become_the_null_device() -> None:
    """Our choice (CFG-5): a GUI process started without handles gives its child the null device, not a stray fd."""
    streams = _common.inherited_streams(lambda fd: fd != 1)
    assert streams == {"stdin": 0, "stdout": subprocess.DEVNULL, "stderr": 2}


def test_the_package_exports_one_interface() -> None:
    """`__init__` only re-exports (the package's interface is what it re-exports), and `__all__` lists it."""
    assert all(getattr(wardian.launcher, name, None) is not None or name == "MCP_LAUNCHER"
               for name in wardian.launcher.__all__)
    assert wardian.launcher.MCP_LAUNCHER is None  # POSIX registers `wardian` itself


# --- what Linux can check of the Windows backend --------------------------------------------------------------


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="the documented sizes are for x64")
def test_the_job_limit_structures_match_the_documented_x64_layout() -> None:
    """Win32 docs: JOBOBJECT_BASIC_LIMIT_INFORMATION is 64 bytes, the extended form 144 bytes and the basic
    accounting information 48 bytes on x64."""
    assert ctypes.sizeof(winjob.JOBOBJECT_BASIC_LIMIT_INFORMATION) == 64
    assert ctypes.sizeof(winjob.JOBOBJECT_EXTENDED_LIMIT_INFORMATION) == 144
    assert winjob.JOBOBJECT_BASIC_LIMIT_INFORMATION.LimitFlags.offset == 16
    assert ctypes.sizeof(winjob.JOBOBJECT_BASIC_ACCOUNTING_INFORMATION) == 48
    assert winjob.JOBOBJECT_BASIC_ACCOUNTING_INFORMATION.ActiveProcesses.offset == 40
    limits = winjob.kill_on_close_limits()
    assert limits.BasicLimitInformation.LimitFlags == winjob.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE == 0x2000


@pytest.mark.parametrize(("status", "code"), [(0, 0), (1, 1), (0x7FFFFFFF, 0x7FFFFFFF), (0xC000013A, -1073741510),
                                              (0xFFFFFFFF, -1)])
def test_a_windows_exit_code_keeps_its_32_bits(status: int, code: int) -> None:
    """CFG-5: the launcher exits with the child's status, NTSTATUS codes included."""
    assert _windows.exit_code(status) == code
    assert code & 0xFFFFFFFF == status


def test_the_windows_launcher_starts_the_console_cli_beside_it_without_a_window(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """CFG-5: wardian-mcp.exe starts the console wardian-cli.exe with CREATE_NO_WINDOW."""
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "wardian-mcp.exe"))
    assert _windows.cli_command() == [str(tmp_path / "wardian-cli.exe")]
    assert _windows.MCP_LAUNCHER == "wardian-mcp.exe"
    assert _windows.CREATE_NO_WINDOW == 0x08000000
