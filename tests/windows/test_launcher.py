"""The launcher's Windows backend (core/wardian/launcher/_windows.py) from source: contract rule CFG-5
(docs/design/contract.md): a GUI-subsystem launcher starts its child with CREATE_NO_WINDOW, passes standard input,
output and error through unchanged, returns the child's exit code, and closing it ends the child's whole tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.windows.conftest import DEADLINE_S, alive, pe_subsystem, poll, program, pythonw, read_pid

GUI, CONSOLE = 2, 3
# Every byte value, with CR LF and Ctrl+Z (text mode's end of file) where a translating layer would change them.
PAYLOAD = bytes(range(256)) * 512 + b"\r\n\x1a\r\n"


def launch(*argv: str) -> list[str]:
    """`wardian.launcher` run from source by the console interpreter, starting `argv`."""
    return [sys.executable, program("launch.py"), *argv]


def holder(folder: Path, mode: str) -> list[str]:
    return [sys.executable, program("holder.py"), str(folder), mode]


def test_a_gui_launcher_passes_stdio_through_byte_for_byte_with_no_console_window() -> None:
    """CFG-5: the launcher has no console of its own (GUI subsystem, as pythonw.exe); its child gets none either."""
    assert pe_subsystem(pythonw()) == GUI
    done = subprocess.run([pythonw(), program("launch.py"), sys.executable, program("echo.py"), "0"],
                          input=PAYLOAD, capture_output=True, timeout=DEADLINE_S, check=False)
    assert done.stdout == PAYLOAD
    assert done.stderr == b"echo: %d bytes, console window 0\n" % len(PAYLOAD)
    assert done.returncode == 0


def test_the_launcher_exits_with_its_childs_exit_code_unchanged() -> None:
    """CFG-5 and launcher/_windows.py: the child's 32-bit code, NTSTATUS values (Ctrl+C's 0xC000013A) included."""
    for code in (7, 0xC000013A):
        done = subprocess.run([pythonw(), program("launch.py"), sys.executable, program("echo.py"), hex(code)],
                              input=b"", capture_output=True, timeout=DEADLINE_S, check=False)
        assert (done.returncode & 0xFFFFFFFF, done.stdout) == (code, b"")


def test_without_a_job_a_detached_grandchild_outlives_its_parent(tmp_path: Path, strays: list[int]) -> None:
    """The control for the two tests below: DETACHED_PROCESS alone does not tie a grandchild to anything."""
    subprocess.run(holder(tmp_path, "exit"), stdin=subprocess.DEVNULL, timeout=DEADLINE_S, check=True)
    grandchild = read_pid(tmp_path / "grandchild.pid")
    strays.append(grandchild)
    assert alive(grandchild)


def test_the_job_ends_a_detached_grandchild_when_the_child_exits(tmp_path: Path, strays: list[int]) -> None:
    """launcher/_windows.py: the launcher closes its kill-on-close job when its child exits, so nothing the child
    started (even DETACHED_PROCESS, which leaves no console and no parent link to follow) runs on."""
    done = subprocess.run(launch(*holder(tmp_path, "exit")), stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=DEADLINE_S, check=False)
    assert done.returncode == 0, done.stderr
    grandchild = read_pid(tmp_path / "grandchild.pid")
    strays.append(grandchild)
    poll(lambda: not alive(grandchild), "the detached grandchild ended with the launcher's job")


def test_killing_the_launcher_ends_its_child_and_grandchild(tmp_path: Path, strays: list[int],
                                                            reaper: list[subprocess.Popen[bytes]]) -> None:
    """CFG-5: "closing the launcher also closes its server": Windows closes the job's only handle when its holder
    is killed outright. The child reads our open stdin, so nothing but the job can end it."""
    proc = subprocess.Popen(launch(*holder(tmp_path, "wait")), stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reaper.append(proc)
    child, grandchild = read_pid(tmp_path / "child.pid"), read_pid(tmp_path / "grandchild.pid")
    strays += [child, grandchild]
    assert alive(child)
    proc.kill()
    proc.wait(DEADLINE_S)
    poll(lambda: not alive(child) and not alive(grandchild), "the launcher's child and grandchild ended")
