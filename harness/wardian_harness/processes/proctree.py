"""Process trees: every child of a run in one tree that is always reaped.

Invariants:
- every child is spawned through `ProcessTree.spawn` (or adopted with `adopt` when a library forks it, as
  pexpect does) and carries the run marker in its environment (`RUN_MARKER_ENV`);
- `close()` stops the whole tree, pass or fail: the platform backend's polite stop (POSIX: SIGTERM to each
  process group), a bounded wait, then the hard stop (SIGKILL / TerminateJobObject), then a psutil sweep as
  the backstop for anything that escaped its group (Codex app-servers run in their own sessions, so the sweep
  finds them by the marker they inherited from the app, and their descendants by parentage);
- `close()` returns the processes still alive afterwards; the acceptance asserts that list is empty.

The POSIX backend (`_proctree_posix`) runs in the Linux suite. The Windows backend (`_proctree_windows`: a
non-inheritable kill-on-close Job Object, `CREATE_NO_WINDOW`) has the same interface and runs under Wine
(tests/windows/test_harness.py, docs/guide/windows.md).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

import psutil

RUN_MARKER_ENV = "WARDIAN_E2E_RUN_ID"
"""Set in every member's environment: the sweep finds by it what escaped the tree's process groups."""


class Backend(Protocol):
    """The platform half of a tree: how to spawn into it and how to stop a member."""

    def popen_kwargs(self) -> dict[str, Any]: ...

    def after_spawn(self, proc: subprocess.Popen[bytes]) -> None: ...

    def terminate(self, pid: int) -> None: ...

    def kill(self, pid: int) -> None: ...

    def close(self) -> None: ...


def _backend() -> Backend:
    if sys.platform == "win32":
        from wardian_harness.processes._proctree_windows import WindowsBackend

        return WindowsBackend()
    from wardian_harness.processes._proctree_posix import PosixBackend

    return PosixBackend()


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class ProcessTree:
    """One run's children; a context manager whose exit stops and reaps all of them."""

    def __init__(self, run_id: str, *, term_timeout_s: float = 10.0, kill_timeout_s: float = 10.0) -> None:
        self.run_id = run_id
        self.term_timeout_s = term_timeout_s
        self.kill_timeout_s = kill_timeout_s
        self._backend = _backend()
        self._popens: list[subprocess.Popen[bytes]] = []
        self._leaders: set[int] = set()

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start `argv` as a new member (its own session / job), with the run marker in its environment."""
        child_env = {**env, RUN_MARKER_ENV: self.run_id}
        # The one Popen of the harness, so no child escapes the run; callers never ask for text mode: pipes are bytes.
        proc = cast("subprocess.Popen[bytes]", subprocess.Popen(
            list(argv), env=child_env, **self._backend.popen_kwargs(), **kwargs))
        self._backend.after_spawn(proc)
        self._popens.append(proc)
        self._leaders.add(proc.pid)
        return proc

    def adopt(self, pid: int) -> None:
        """Track a session leader some library started (pexpect forks its own pty child)."""
        self._leaders.add(pid)

    def members(self) -> list[psutil.Process]:
        """Every live process of the run: the leaders, anything carrying the marker, and all their descendants."""
        found: dict[int, psutil.Process] = {}
        # Never ourselves or our ancestors: a tree inside a run (the acceptance under the runner) shares the marker.
        me = psutil.Process()
        exempt = {me.pid, *(p.pid for p in me.parents())}
        roots: list[psutil.Process] = []
        for pid in self._leaders:
            try:
                roots.append(psutil.Process(pid))
            except psutil.Error:
                continue
        for proc in psutil.process_iter(["pid"]):
            try:
                if proc.environ().get(RUN_MARKER_ENV) == self.run_id:
                    roots.append(proc)
            except psutil.Error:
                continue
        for root in roots:
            try:
                for p in [root, *root.children(recursive=True)]:
                    if _alive(p) and p.pid not in exempt:
                        found[p.pid] = p
            except psutil.Error:
                continue
        return list(found.values())

    def stop(self, proc: subprocess.Popen[bytes], timeout_s: float | None = None) -> int | None:
        """Stop one member politely (TERM, bounded wait, then KILL); return its exit status."""
        if proc.poll() is None:
            self._backend.terminate(proc.pid)
            try:
                proc.wait(timeout_s or self.term_timeout_s)
            except subprocess.TimeoutExpired:
                self._backend.kill(proc.pid)
                proc.wait(self.kill_timeout_s)
        return proc.returncode

    def close(self) -> list[psutil.Process]:
        """Stop and reap the whole tree; return what is still alive (empty unless something resists KILL)."""
        members = self.members()
        for pid in list(self._leaders):
            self._backend.terminate(pid)
        for p in members:
            try:
                p.terminate()
            except psutil.Error:
                continue
        _, alive = psutil.wait_procs(members, timeout=self.term_timeout_s)
        for pid in list(self._leaders):
            self._backend.kill(pid)
        # The sweep: anything started meanwhile or outside the groups (own sessions) is found again.
        stragglers = {p.pid: p for p in [*alive, *self.members()]}
        for p in stragglers.values():
            try:
                p.kill()
            except psutil.Error:
                continue
        psutil.wait_procs(list(stragglers.values()), timeout=self.kill_timeout_s)
        for proc in self._popens:
            try:
                proc.wait(self.kill_timeout_s)
            except subprocess.TimeoutExpired:
                continue
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        self._backend.close()
        return [p for p in self.members() if _alive(p)]

    def __enter__(self) -> ProcessTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
