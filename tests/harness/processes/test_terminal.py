"""harness/terminal.py: a program in a pseudo-terminal, rendered by pyte, captured for evidence."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from wardian_harness.processes.terminal import capture, open_terminal, wait_for_text


def test_a_terminal_renders_what_the_program_draws_and_keeps_captures() -> None:
    """The screen shows the result of cursor movement, not the raw bytes (a TUI redraws in place)."""
    script = "import sys; sys.stdout.write('hello wrld\\x1b[4Dworld\\n'); sys.stdout.flush(); input()"
    term = open_terminal([sys.executable, "-c", script], {"PATH": "/usr/bin:/bin", "TERM": "xterm"}, rows=5, cols=40)
    try:
        screen = wait_for_text(term, "hello world", lambda: time.sleep(0.05), rounds=2000)
        assert screen.splitlines()[0] == "hello world"
        assert capture(term, "greeting") == term.text()
        assert term.captures[0][0] == "greeting"
        term.send("\r")
    finally:
        term.close(timeout_s=10)
    assert not term.is_alive()


# The program exits at once; a grandchild (SIGHUP ignored, so it outlives the session leader's hangup) keeps the
# pty open until it reads a line, so the end of the program is seen by waiting on it, not by an end of file.
_EXITS_LEAVING_THE_PTY_OPEN = """
import os, signal, sys
signal.signal(signal.SIGHUP, signal.SIG_IGN)
if os.fork() == 0:
    sys.stdin.readline()
    os._exit(0)
"""


def test_a_program_that_exits_is_reaped_by_one_thread_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """ptyprocess's isalive() raises "no child process" when another thread reaped the child between its check of
    `terminated` and its waitpid (https://github.com/pexpect/ptyprocess/blob/master/ptyprocess/ptyprocess.py)."""
    real_waitpid = os.waitpid
    child: list[int] = []
    reaped, second_waiter = threading.Event(), threading.Event()
    thread_errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: thread_errors.append(args.exc_value))

    def waitpid(pid: int, options: int) -> tuple[int, int]:
        if pid not in child:
            return real_waitpid(pid, options)
        if reaped.is_set():
            second_waiter.set()
        result = real_waitpid(pid, options)
        if result[0] == pid:
            reaped.set()
            # Hold the status before the reaper records it, as a preempted thread would: a second thread waiting
            # on the child now certainly meets ECHILD. The bound is for when, rightly, nobody else waits on it.
            second_waiter.wait(1.0)
        return result

    monkeypatch.setattr(os, "waitpid", waitpid)
    term = open_terminal([sys.executable, "-c", _EXITS_LEAVING_THE_PTY_OPEN], {"PATH": "/usr/bin:/bin"},
                         rows=5, cols=40)
    child.append(term.pid)
    try:
        for _ in range(600):
            if not term.is_alive():
                break
            time.sleep(0.05)
    finally:
        term.send("\r")  # the grandchild's line: it exits, the pty ends
        status = term.close(timeout_s=10)
    assert status == 0
    assert thread_errors == []
