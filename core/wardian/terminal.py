"""`wardian agent attach`: run a Codex TUI in the current terminal against the app-owned app-server.

The TUI runs in the foreground process group of this terminal (so keys and resizes reach it) as a child of
this process. On Linux this process first becomes a child subreaper, so anything the TUI leaves behind is
re-parented here and ended when the TUI exits (docs/providers/codex.md#attached-terminals: a local TUI can leave
a managed daemon; `--remote` left none in our runs, but the sweep costs nothing). Verified on Linux only.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from contextlib import suppress
from typing import Any

import psutil

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except OSError:
        return False


def tui_command(info: dict[str, Any], extra_args: list[str]) -> list[str]:
    """`codex --remote unix://SOCK -C WORKSPACE [-c …] [resume THREAD]` for the agent's conversation."""
    cmd = [info["codex"], "--remote", f"unix://{info['socket']}", "-C", info["workspace"]]
    for override in info.get("config") or []:
        cmd += ["-c", override]
    args = [a for a in extra_args if a != "--"]
    if info.get("thread_id") and not args:
        cmd += ["resume", info["thread_id"]]  # the TUI shows the conversation the app delivers into
    return cmd + args


def run_attached_tui(info: dict[str, Any], extra_args: list[str]) -> int:
    become_subreaper()
    env = {k: v for k, v in os.environ.items() if k not in ("WARDIAN_SESSION_ID",)}
    env["CODEX_HOME"] = info["codex_home"]
    proc = subprocess.Popen(tui_command(info, extra_args), env=env)
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:
                continue  # Ctrl-C belongs to the TUI
    finally:
        reap_leftovers()


def reap_leftovers(timeout_s: float = 3.0) -> list[int]:
    """End every process still under this one (TERM, then KILL); returns their pids."""
    children = psutil.Process().children(recursive=True)
    for child in children:
        with suppress(psutil.Error):
            child.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(children, timeout=timeout_s)
    for child in alive:
        with suppress(psutil.Error):
            child.kill()
    return [c.pid for c in children]
