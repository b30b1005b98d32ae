"""Windows terminal backend: pywinpty, with ConPTY (its default on Windows 10 and later) on Windows and the WinPTY
backend under Wine, whose ConPTY does not work (docs/guide/windows.md: the WinPTY agent needs a display, which
scripts/windows.sh provides with Xvfb). Verified under Wine 8.0 (tests/windows/test_harness.py); ConPTY needs a real
Windows machine."""

from __future__ import annotations

import sys
import threading
import winreg
from collections.abc import Mapping, Sequence
from typing import Any

from winpty import Backend, PtyProcess  # type: ignore[import-not-found]

from wardian_harness.processes.terminal import Screen

assert sys.platform == "win32"


def _under_wine() -> bool:
    try:
        winreg.CloseKey(winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"Software\Wine"))
    except OSError:
        return False
    return True


BACKEND: Any = Backend.WinPTY if _under_wine() else None  # None: pywinpty's own choice (ConPTY where available)


class WinptyTerminal:
    def __init__(self, argv: Sequence[str], env: Mapping[str, str], *, rows: int, cols: int) -> None:
        self._screen = Screen(rows, cols)
        self.captures: list[tuple[str, str]] = []
        self._child: Any = PtyProcess.spawn(list(argv), env=dict(env), dimensions=(rows, cols),
                                             backend=BACKEND)
        self.pid: int = int(self._child.pid)
        self._reader = threading.Thread(target=self._drain, name=f"conpty-{self.pid}", daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = self._child.read(65536)
            except (EOFError, OSError):  # the program ended, or `close` closed the connection under the read
                return
            self._screen.feed(data)

    def text(self) -> str:
        return self._screen.text()

    def send(self, text: str) -> None:
        self._child.write(text)

    def sendcontrol(self, char: str) -> None:
        self._child.write(chr(ord(char.lower()) - ord("a") + 1))

    def is_alive(self) -> bool:
        return bool(self._child.isalive())

    def close(self, timeout_s: float = 30.0) -> int | None:
        if self._child.isalive():
            self.sendcontrol("c")
            self.sendcontrol("c")
        self._reader.join(timeout_s)
        # pywinpty reads the program's output through a loopback socket pair that only its `close` releases; it
        # also terminates the program if it still runs.
        self._child.close(force=True)
        self._reader.join(timeout_s)
        return self._child.exitstatus
