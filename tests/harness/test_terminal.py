"""harness/terminal.py: a program in a pseudo-terminal, rendered by pyte, captured for evidence."""

from __future__ import annotations

import sys
import time

from wardian_harness.terminal import capture, open_terminal, wait_for_text


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
