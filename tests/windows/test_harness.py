"""The harness's Windows backends (harness/wardian_harness/processes/): the process tree (a kill-on-close Job
Object) and the terminal (pywinpty; its WinPTY backend under Wine, docs/guide/windows.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.windows.conftest import alive, poll, program, read_pid
from wardian_harness.processes.proctree import ProcessTree
from wardian_harness.processes.terminal import open_terminal, wait_for_text


def test_closing_the_process_tree_ends_a_detached_grandchild(tmp_path: Path, strays: list[int]) -> None:
    """harness/wardian_harness/processes/proctree.py: `close()` stops the whole tree and returns what survived; a
    DETACHED_PROCESS grandchild is in the tree's job, so nothing survives. Its parent still reads an open stdin."""
    tree = ProcessTree(f"wintree{os.getpid()}", term_timeout_s=5, kill_timeout_s=5)
    try:
        tree.spawn([sys.executable, program("holder.py"), str(tmp_path), "wait"], dict(os.environ),
                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        child, grandchild = read_pid(tmp_path / "child.pid"), read_pid(tmp_path / "grandchild.pid")
        strays += [child, grandchild]
        assert alive(grandchild)
    finally:
        left = tree.close()
    assert left == []
    poll(lambda: not alive(child) and not alive(grandchild), "the tree's child and grandchild ended")


def test_the_terminal_runs_cmd_shows_its_screen_and_takes_typed_input() -> None:
    """harness/wardian_harness/processes/terminal.py: a program in a pseudo-terminal, read through the pyte screen,
    written to as a person types; under Wine the WinPTY backend (ConPTY does not work there)."""
    terminal = open_terminal(["cmd.exe", "/q", "/k", "echo hello-from-the-pty"], dict(os.environ), rows=24, cols=80)
    try:
        wait_for_text(terminal, "hello-from-the-pty", lambda: time.sleep(0.05))
        terminal.send("echo typed-%OS%\r\n")
        wait_for_text(terminal, "typed-Windows_NT", lambda: time.sleep(0.05))
        assert terminal.is_alive()
    finally:
        terminal.close(timeout_s=5)
    assert not terminal.is_alive()
