"""An agent's private home for its provider, made and kept the same way for every provider.

Each provider keeps what it writes for an agent under `<agent dir>/<provider>/` (0700), in directories its CLI reads
from environment variables (Codex: `CODEX_HOME`; OpenCode: the four XDG dirs; Claude Code: `CLAUDE_CONFIG_DIR`,
`TMPDIR`, ...), never in the person's own. One of those variables identifies the agent's process: a process a killed
app left running is ended at the next start only if it still runs with that variable naming this agent's directory,
so a pid reused by another process is never touched (`end_left_behind`).
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import psutil

from wardian import errors
from wardian.providers.process import reap_left_behind

if sys.platform == "win32":  # privacy by access list there
    from wardian import _home_windows

log = logging.getLogger("wardian.providers.homes")


def private_dir(path: Path) -> None:
    """Make `path` (and a missing parent) 0700; refuse one that is a symlink or another user's.

    Raises:
        InsecureRuntimeDir: `path` is a link, not a directory, or another user's.
        OSError: Windows refused to create it or set its access list.
    """
    if sys.platform == "win32":
        _home_windows.private_dir(path)  # owner-only by access list
        return
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise errors.InsecureRuntimeDir(f"{path} is not a directory of this user; remove it")
    os.chmod(path, 0o700)


def wait_gone(pid: int, timeout_s: float = 5.0) -> None:
    """Wait (bounded) until a process we just killed is gone."""
    with suppress(psutil.Error, psutil.TimeoutExpired):
        psutil.Process(pid).wait(timeout=timeout_s)


@dataclass(frozen=True, slots=True)
class ProviderHome:
    """One agent's private provider home: `root` and the directories its CLI is given, by the variable that names
    each (a directory may lie outside `root` where the CLI needs a short path: Claude Code's XDG_RUNTIME_DIR)."""

    root: Path
    dirs: Mapping[str, Path]

    def make(self) -> None:
        """Create `root` and every directory, each 0700. Raises: InsecureRuntimeDir (as `private_dir`)."""
        for path in (self.root, *self.dirs.values()):
            private_dir(path)

    def env(self) -> dict[str, str]:
        """The directories as the provider's process is given them."""
        return {name: str(path) for name, path in self.dirs.items()}


def end_left_behind(pid_path: Path, variable: str, directory: Path, *, agent: str, label: str) -> None:
    """End the process group a killed app left running for `agent` (recorded at `pid_path`, and still running with
    `variable` naming the agent's `directory`), and wait (bounded) until its leader is gone, so what the next start
    writes is not raced. `label` says what it was, in the log (`the Codex app-server`)."""
    try:
        recorded: int | None = int(pid_path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        recorded = None
    if reap_left_behind(pid_path, variable, str(directory)) and recorded is not None:
        log.warning("ended %s a previous app left running for %s", label, agent)
        wait_gone(recorded)
