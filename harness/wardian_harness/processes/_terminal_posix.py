"""POSIX terminal backend: pexpect forks the program as a session leader on a new pty.

Exactly one place waits on the program: pexpect's `isalive()`, which reaps it, called only under `_wait_lock`.
ptyprocess keeps no lock of its own: two threads in `isalive()` at once both find the child not yet `terminated`,
the first waitpid reaps it and the second gets ECHILD, which pexpect raises as "no child process"
(https://github.com/pexpect/ptyprocess/blob/master/ptyprocess/ptyprocess.py). pexpect's read methods call
`isalive()` on an end of file and on every idle timeout, so the reader thread never calls into pexpect: it reads
the pty's fd itself, and `close()` waits for it to see the end instead of reading the pty too.
"""

from __future__ import annotations

import codecs
import os
import select
import threading
from collections.abc import Mapping, Sequence

import pexpect

from wardian_harness.processes.terminal import Screen


class PexpectTerminal:
    def __init__(self, argv: Sequence[str], env: Mapping[str, str], *, rows: int, cols: int) -> None:
        self._screen = Screen(rows, cols)
        self.captures: list[tuple[str, str]] = []
        self._child = pexpect.spawn(argv[0], list(argv[1:]), env=dict(env), dimensions=(rows, cols),
                                    encoding="utf-8", codec_errors="replace", timeout=30)
        assert self._child.pid is not None  # set once spawn returned
        self.pid: int = self._child.pid
        self._wait_lock = threading.Lock()
        self._closed = False
        self._ended = threading.Event()  # the reader met the pty's end: nothing holds the program's side any more
        self._wake_r, self._wake_w = os.pipe()  # close() wakes the reader out of select() with a byte here
        self._reader = threading.Thread(target=self._drain, args=(self._child.child_fd,), name=f"pty-{self.pid}",
                                        daemon=True)
        self._reader.start()

    def _drain(self, fd: int) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            readable, _, _ = select.select([fd, self._wake_r], [], [])
            if self._wake_r in readable:
                return
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: how Linux ends a pty once no process holds its other side
                data = b""
            if not data:  # an end of file: how BSD and macOS end it
                self._screen.feed(decoder.decode(b"", final=True))
                self._ended.set()
                return
            self._screen.feed(decoder.decode(data))

    def text(self) -> str:
        return self._screen.text()

    def send(self, text: str) -> None:
        self._child.send(text)

    def sendcontrol(self, char: str) -> None:
        self._child.sendcontrol(char)

    def is_alive(self) -> bool:
        with self._wait_lock:
            return bool(self._child.isalive())

    def close(self, timeout_s: float = 30.0) -> int | None:
        """Ask the TUI to quit (Ctrl-C twice, as a person would), then force; return the exit status."""
        if self.is_alive():
            for _ in range(2):
                try:
                    self._child.sendcontrol("c")
                except OSError:
                    break
        if not self._closed:
            # The pty ends once the program, and anything it left holding the terminal, is gone.
            self._ended.wait(timeout_s)
        with self._wait_lock:
            if not self._closed:
                self._closed = True
                os.write(self._wake_w, b"\0")
                self._reader.join()  # before the pty's fd closes: a new file could get its number under the reader
                os.close(self._wake_r)
                os.close(self._wake_w)
                self._child.close(force=True)  # closes the pty, then SIGHUP .. SIGKILL if the program is still there
            status = self._child.exitstatus
            return status if status is not None else self._child.signalstatus
