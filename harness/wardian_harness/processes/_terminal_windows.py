"""Windows terminal backend (UNVERIFIED: never run; the project is tested on Linux only): pywinpty's ConPTY."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from wardian_harness.processes.terminal import Screen


class WinptyTerminal:
    def __init__(self, argv: Sequence[str], env: Mapping[str, str], *, rows: int, cols: int) -> None:
        from winpty import PtyProcess  # type: ignore[import-not-found]

        self._screen = Screen(rows, cols)
        self.captures: list[tuple[str, str]] = []
        self._child: Any = PtyProcess.spawn(list(argv), env=dict(env), dimensions=(rows, cols))
        self.pid: int = int(self._child.pid)
        self._reader = threading.Thread(target=self._drain, name=f"conpty-{self.pid}", daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = self._child.read(65536)
            except EOFError:
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
        if self._child.isalive():
            self._child.terminate(force=True)
        return self._child.exitstatus
