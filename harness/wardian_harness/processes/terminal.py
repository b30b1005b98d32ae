"""Terminals: a command in a pseudo-terminal, rendered by a VT100 emulator (pyte) for assertions and evidence.

One interface, two backends: pexpect on POSIX (`_terminal_posix`) and pywinpty on Windows (`_terminal_windows`,
verified under Wine with pywinpty's WinPTY backend; ConPTY needs a real Windows machine, docs/guide/windows.md).
A reader thread feeds everything the program writes into a pyte screen; `text()` is what a person would see now,
`capture()` keeps a labelled copy for the evidence report.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import pyte


class TerminalTimeout(AssertionError):
    """The awaited text never appeared; the message holds the screen."""


class Screen:
    """A pyte screen fed from another thread."""

    def __init__(self, rows: int, cols: int) -> None:
        self._screen = pyte.Screen(cols, rows)
        self._stream = pyte.Stream(self._screen)
        self._lock = threading.Lock()

    def feed(self, data: str) -> None:
        with self._lock:
            self._stream.feed(data)

    def text(self) -> str:
        with self._lock:
            return "\n".join(line.rstrip() for line in self._screen.display).rstrip("\n")


class Terminal(Protocol):
    """A program running in a pseudo-terminal."""

    pid: int
    captures: list[tuple[str, str]]

    def text(self) -> str: ...

    def send(self, text: str) -> None: ...

    def sendcontrol(self, char: str) -> None: ...

    def is_alive(self) -> bool: ...

    def close(self, timeout_s: float = 30.0) -> int | None: ...


def open_terminal(argv: Sequence[str], env: Mapping[str, str], *, rows: int = 45, cols: int = 160) -> Terminal:
    """Start `argv` in a new pseudo-terminal of `rows` x `cols`."""
    if sys.platform == "win32":
        from wardian_harness.processes._terminal_windows import WinptyTerminal

        return WinptyTerminal(argv, env, rows=rows, cols=cols)
    from wardian_harness.processes._terminal_posix import PexpectTerminal

    return PexpectTerminal(argv, env, rows=rows, cols=cols)


def capture(terminal: Terminal, label: str) -> str:
    """Keep the current screen under `label` for the evidence report and return it."""
    text = terminal.text()
    terminal.captures.append((label, text))
    return text


def wait_for_text(terminal: Terminal, needle: str, tick: Callable[[], None], *, rounds: int = 600) -> str:
    """Poll the screen until `needle` shows (calling `tick`, a bounded wait, between looks); return the screen.

    Raises:
        TerminalTimeout: `needle` did not show within `rounds` ticks.
    """
    for _ in range(rounds):
        screen = terminal.text()
        if needle in screen:
            return screen
        tick()
    raise TerminalTimeout(f"{needle!r} never appeared on screen:\n{terminal.text()}")
