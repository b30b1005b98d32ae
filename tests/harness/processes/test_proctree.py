"""harness/proctree.py: every child of a run is reaped, including one that left its group."""

from __future__ import annotations

import subprocess
import sys
import uuid

import psutil
import pytest

from wardian_harness.processes.proctree import RUN_MARKER_ENV, ProcessTree

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

# A child that starts a grandchild in a new session (as the app starts Codex app-servers) and sleeps; both
# ignore SIGTERM (so the KILL step is needed). The grandchild prints its own pid once it runs: a pid printed by
# the parent right after Popen can name a process still inside execve, whose /proc environ reads empty.
_ESCAPER = """
import signal, subprocess, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                  "print(os.getpid(), flush=True); [time.sleep(1) for _ in range(600)]"], start_new_session=True)
signal.pause()
"""


def test_close_reaps_a_tree_whose_members_ignore_sigterm_and_escape_their_group() -> None:
    """The marker sweep finds a grandchild in its own session; SIGKILL follows the bounded SIGTERM wait."""
    tree = ProcessTree(uuid.uuid4().hex, term_timeout_s=1, kill_timeout_s=10)
    try:
        proc = tree.spawn([sys.executable, "-c", _ESCAPER], {"PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE)
        assert proc.stdout is not None
        grandchild = int(proc.stdout.readline())
        assert psutil.Process(grandchild).environ()[RUN_MARKER_ENV] == tree.run_id
        assert {proc.pid, grandchild} <= {p.pid for p in tree.members()}
    finally:
        assert tree.close() == []  # also when an assertion failed: no survivor may leak into the next test
    assert proc.returncode is not None
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE


def test_a_tree_never_counts_its_own_process_or_ancestors() -> None:
    """A tree inside a run (the acceptance under the runner) shares the marker with its own process."""
    tree = ProcessTree(uuid.uuid4().hex)
    tree.adopt(psutil.Process().pid)
    assert tree.members() == []
    assert tree.close() == []
