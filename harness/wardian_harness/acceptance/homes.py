"""Isolated homes for one acceptance run: a temporary root that nothing else shares.

Layout of a run root (short, under /tmp on POSIX, because a Unix socket path is limited to ~108 bytes):

    <root>/run.lock        the home lock (held by the runner for the whole run)
    <root>/w/              WARDIAN_HOME; the app keeps each agent's private CODEX_HOME under w/agents/<uuid>/codex
    <root>/home/           HOME (and USERPROFILE) of every child: the developer's real homes are never read
    <root>/ws/<agent>/     one fixture workspace per agent, each its own empty git repository, so Codex cannot
                           inherit the checkout's repository root

Invariants: two runners never share a root (an exclusive, non-blocking lock on `run.lock`, held by the owner of
the run; anyone else opening the root finds it held); a child environment is built from an allowlist, never
inherited; only the named auth file is copied from an auth home.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from wardian_harness.processes.environment import allowlisted_env
from wardian_harness.processes.proctree import RUN_MARKER_ENV

AUTH_FILES: tuple[str, ...] = ("auth.json",)
"""The only files copied from WARDIAN_E2E_CODEX_AUTH_HOME into an isolated CODEX_HOME."""


class HomeLocked(RuntimeError):
    """Another runner holds this run root."""


class HomeLock:
    """An exclusive, non-blocking lock on one file (fcntl on POSIX, msvcrt on Windows)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def acquire(self) -> HomeLock:
        """Take the lock.

        Raises:
            HomeLocked: another process holds it.
        """
        handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release()
        try:
            _lock_file(handle)
        except OSError as exc:
            handle.close()
            raise HomeLocked(f"{self.path} is held by another runner") from exc
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle
        return self

    def is_held_elsewhere(self) -> bool:
        """True when some other open file holds the lock (we probe and release at once)."""
        try:
            with open(self.path, "a+", encoding="utf-8") as probe:
                _lock_file(probe)
                _unlock_file(probe)
        except OSError:
            return True
        return False

    def release(self) -> None:
        if self._file is not None:
            _unlock_file(self._file)
            self._file.close()
            self._file = None


def _lock_file(handle: IO[str]) -> None:
    if sys.platform == "win32":
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
    else:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def _unlock_file(handle: IO[str]) -> None:
    if sys.platform == "win32":
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
    else:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class IsolatedRun:
    """One run's root: WARDIAN_HOME, a private HOME, fixture workspaces, the lock and the run marker."""

    def __init__(self, root: Path, run_id: str, lock: HomeLock | None) -> None:
        self.root = root
        self.run_id = run_id
        self._lock = lock

    @classmethod
    def create(cls, prefix: str = "wne") -> IsolatedRun:
        """A fresh root, locked by this process."""
        base = "/tmp" if sys.platform != "win32" and os.path.isdir("/tmp") else tempfile.gettempdir()
        root = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        lock = HomeLock(root / "run.lock").acquire()
        run = cls(root, uuid.uuid4().hex, lock)
        for d in (run.wardian_home, run.user_home, run.root / "ws"):
            d.mkdir(mode=0o700, exist_ok=True)
        return run

    @classmethod
    def join(cls, root: Path, run_id: str) -> IsolatedRun:
        """Use a root another process (the runner) created and still holds.

        Raises:
            HomeLocked: the root's lock is not held, so no runner owns it (a stale or foreign directory).
        """
        if not HomeLock(root / "run.lock").is_held_elsewhere():
            raise HomeLocked(f"{root} is not held by a runner; refusing to share an unowned home")
        return cls(root, run_id, None)

    @property
    def wardian_home(self) -> Path:
        return self.root / "w"

    @property
    def user_home(self) -> Path:
        return self.root / "home"

    @property
    def owns_lock(self) -> bool:
        return self._lock is not None

    def codex_home(self, agent_uuid: str) -> Path:
        """The agent's private CODEX_HOME, which the app prepares under WARDIAN_HOME."""
        return self.wardian_home / "agents" / agent_uuid / "codex"

    def opencode_dir(self, agent_uuid: str) -> Path:
        """An OpenCode agent's private XDG root (config, data, cache, state), which the app prepares."""
        return self.wardian_home / "agents" / agent_uuid / "opencode"

    def claude_dir(self, agent_uuid: str) -> Path:
        """A Claude Code agent's private directories (config/, tmp/, cache/), which the app prepares."""
        return self.wardian_home / "agents" / agent_uuid / "claude"

    def pi_dir(self, agent_uuid: str) -> Path:
        """A Pi agent's private directories (agent/: settings, models; sessions/), which the app prepares."""
        return self.wardian_home / "agents" / agent_uuid / "pi"

    def workspace(self, name: str) -> Path:
        """Create (once) the agent's fixture workspace: an empty directory with its own git repository."""
        path = self.root / "ws" / name
        if not (path / ".git").exists():
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            subprocess.run(["git", "init", "-q", str(path)], check=True, env=self.child_env(),
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        return path

    def child_env(self, extra: Mapping[str, str] | None = None, *,
                  parent: Mapping[str, str] | None = None) -> dict[str, str]:
        """An allowlisted environment: HOME is the run's private home, WARDIAN_HOME the run's home, the marker."""
        env = allowlisted_env(self.user_home, parent)
        env["WARDIAN_HOME"] = str(self.wardian_home)
        env[RUN_MARKER_ENV] = self.run_id
        env["GIT_CONFIG_NOSYSTEM"] = "1"
        env.update(extra or {})
        return env

    def copy_auth(self, auth_home: Path, codex_home: Path) -> list[str]:
        """Copy only the auth file(s) from `auth_home` into `codex_home` (0600); return the names copied.

        Raises:
            FileNotFoundError: `auth_home` holds none of AUTH_FILES.
        """
        copied: list[str] = []
        codex_home.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name in AUTH_FILES:
            source = auth_home / name
            if source.is_file():
                target = codex_home / name
                shutil.copyfile(source, target)
                os.chmod(target, 0o600)
                copied.append(name)
        if not copied:
            raise FileNotFoundError(f"{auth_home} holds none of {', '.join(AUTH_FILES)}")
        return copied

    def close(self, *, keep: bool = False) -> None:
        """Release the lock (if ours) and remove the root unless `keep`."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None
            if not keep:
                shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> IsolatedRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
