"""The Windows suite (docs/guide/windows.md): Windows Python runs it, under Wine in CI (`scripts/windows.sh`, one
pytest process). On any other platform it collects nothing; `--confcutdir tests/windows` keeps the Linux suite's
fixtures out of it, so what it needs is here."""

from __future__ import annotations

import contextlib
import ctypes
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

if sys.platform == "win32":
    import winreg
else:
    collect_ignore_glob = ["test_*.py"]

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "programs"
DIST = REPO / "dist" / "windows"
DEADLINE_S = 30.0
PROCESS_QUERY_LIMITED_INFORMATION = 0x1000


def program(name: str) -> str:
    """A stand-in child program of this folder, by file name."""
    return str(PROGRAMS / name)


def pythonw() -> str:
    """The GUI-subsystem interpreter beside this one (no console of its own, like `wardian-mcp.exe`)."""
    return str(Path(sys.executable).with_name("pythonw.exe"))


def poll(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Return once `condition()` holds; fail naming `what` if it does not within the deadline."""
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"not within {deadline_s:.0f} s: {what}")
        time.sleep(0.05)


def read_pid(path: Path) -> int:
    """The pid a stand-in wrote to `path`, once it has (the file is written in one call, then renamed)."""
    poll(path.exists, f"{path.name} written")
    return int(path.read_text(encoding="utf-8"))


def under_wine() -> bool:
    """Whether this Windows is Wine (its registry key is there)."""
    assert sys.platform == "win32"
    try:
        winreg.CloseKey(winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"Software\Wine"))
    except OSError:
        return False
    return True


@pytest.fixture(scope="session", autouse=True)
def _wine_desktop() -> None:
    """Under Wine, the first GUI-subsystem program of a wineserver session that asks for the desktop window starts
    Wine's desktop process (explorer.exe), which inherits that program's standard handles and lives as long as the
    wineserver: a test's pipe to `wardian-mcp.exe` would never see EOF. Start the desktop first from a GUI program
    whose handles are the null device (docs/guide/windows.md#maintaining-the-wine-suite). Windows has no such
    process: nothing to do there."""
    if under_wine():
        subprocess.run([pythonw(), "-c", "import ctypes; ctypes.windll.user32.GetDesktopWindow()"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=DEADLINE_S, check=True)


@pytest.fixture
def reaper() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; any still running at its end is killed, pass or fail."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        with proc:  # closes its pipes and reaps it
            pass


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (an exited process whose handle someone still holds does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def image_name(pid: int) -> str | None:
    """The file name of process `pid`'s executable, or None if it is gone. psutil's own `name()` asks
    NtQuerySystemInformation, which Wine 8.0 does not answer for every process; this is what Windows itself uses."""
    assert sys.platform == "win32"
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.OpenProcess.restype = ctypes.c_void_p
    handle = kernel32.OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    if not handle:
        return None
    try:
        buf, size = ctypes.create_unicode_buffer(32768), ctypes.c_uint32(32768)
        if not kernel32.QueryFullProcessImageNameW(ctypes.c_void_p(handle), 0, buf, ctypes.byref(size)):
            return None
        return Path(buf.value).name
    finally:
        kernel32.CloseHandle(ctypes.c_void_p(handle))


def pe_subsystem(path: str | Path) -> int:
    """The Subsystem field of a PE image's optional header: 2 = Windows GUI, 3 = Windows console (CUI)."""
    with open(path, "rb") as image:
        header = image.read(4096)
    pe = int.from_bytes(header[0x3C:0x40], "little")
    assert header[pe:pe + 4] == b"PE\0\0", f"{path} is not a PE image"
    return int.from_bytes(header[pe + 0x5C:pe + 0x5E], "little")


@pytest.fixture
def strays() -> Iterator[list[int]]:
    """Pids a test expects to end; whatever of them still runs at its end is killed, so a failure leaks nothing."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()
