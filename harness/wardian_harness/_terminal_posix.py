"""POSIX terminal backend: pexpect forks the program as a session leader on a new pty."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence

import pexpect

from wardian_harness.terminal import Screen


class PexpectTerminal:
    def __init__(self, argv: Sequence[str], env: Mapping[str, str], *, rows: int, cols: int) -> None:
        self._screen = Screen(rows, cols)
        self.captures: list[tuple[str, str]] = []
        self._child = pexpect.spawn(argv[0], list(argv[1:]), env=dict(env), dimensions=(rows, cols),
                                    encoding="utf-8", codec_errors="replace", timeout=30)
        assert self._child.pid is not None  # set once spawn returned
        self.pid: int = self._child.pid
        self._reader = threading.Thread(target=self._drain, name=f"pty-{self.pid}", daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = self._child.read_nonblocking(65536, timeout=0.2)
            except pexpect.TIMEOUT:
                continue
            except (pexpect.EOF, OSError, ValueError):
                return
            self._screen.feed(data)

    def text(self) -> str:
        return self._screen.text()

    def send(self, text: str) -> None:
        self._child.send(text)

    def sendcontrol(self, char: str) -> None:
        self._child.sendcontrol(char)

    def is_alive(self) -> bool:
        return bool(self._child.isalive())

    def close(self, timeout_s: float = 30.0) -> int | None:
        """Ask the TUI to quit (Ctrl-C twice, as a person would), then force; return the exit status."""
        if self._child.isalive():
            for _ in range(2):
                try:
                    self._child.sendcontrol("c")
                except OSError:
                    break
            with contextlib.suppress(pexpect.TIMEOUT, pexpect.EOF, OSError):
                self._child.expect(pexpect.EOF, timeout=timeout_s)
        self._reader.join(timeout_s)
        self._child.close(force=True)
        return self._child.exitstatus if self._child.exitstatus is not None else self._child.signalstatus
