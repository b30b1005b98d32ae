"""A Claude Code agent's private directories, its environment, and the one-process-per-session check.

Everything Claude Code keeps for an agent lives under `<agent dir>/claude/` (0700), each directory named by the
variable Claude Code reads it from:

```
config/   CLAUDE_CONFIG_DIR     settings.json (the agent's -c settings), .claude.json, projects/<cwd>/<session>.jsonl
                                (the transcripts), sessions/<pid>.json (Claude Code's own registry of live processes)
tmp/      TMPDIR, CLAUDE_CODE_TMPDIR   claude-<uid>/… (task output, scratch files)
cache/    XDG_CACHE_HOME        claude-cli-nodejs/… (MCP server logs)
mcp.json                        the 0600 --mcp-config of the current start (it holds the generation's session)
grants.json                     the wardian tools this start grants (the app keeps them with the agent)
```

`XDG_RUNTIME_DIR` is the exception: Claude Code makes its messaging socket there, `cc-socks/<pid>.sock`, and a Unix
socket path must fit in 103 bytes. Under the agent's folder it would not (the home, `agents/<uuid>/claude/run/`, then
the socket name take about 75 bytes before the home's own path), so it is a short directory named by a hash of the
agent's folder under the home's `run/` (0700, checked by the app at start-up), or, for a home whose path is too long
even for that, under the system's temporary directory in a 0700 directory of this user.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import psutil

from wardian.home import MAX_SOCKET_PATH_BYTES, Home
from wardian.providers.homes import ProviderHome, private_dir

# The longest socket name Claude Code makes under XDG_RUNTIME_DIR (Linux pids are at most 7 digits).
_SOCKET_TAIL = "/cc-socks/4194304.sock"


def claude_dir(agent_dir: Path) -> Path:
    return agent_dir / "claude"


def config_dir_of(agent_dir: Path) -> Path:
    return claude_dir(agent_dir) / "config"


def mcp_config_of(agent_dir: Path) -> Path:
    return claude_dir(agent_dir) / "mcp.json"


def grants_of(agent_dir: Path) -> Path:
    return claude_dir(agent_dir) / "grants.json"


def _fits(directory: Path) -> bool:
    return len(os.fsencode(str(directory) + _SOCKET_TAIL)) <= MAX_SOCKET_PATH_BYTES


def runtime_dir_of(home: Home, agent_dir: Path) -> Path:
    """The agent's XDG_RUNTIME_DIR (module docstring): short enough for Claude Code's socket path."""
    tag = "claude-" + hashlib.sha256(str(agent_dir).encode()).hexdigest()[:10]
    preferred = home.run_dir / tag
    if _fits(preferred):
        return preferred
    return Path(tempfile.gettempdir()) / f"wardian-{os.geteuid()}" / tag


def make_dirs(home: Home, agent_dir: Path) -> ProviderHome:
    """Create the agent's private directories (0700). Raises: InsecureRuntimeDir."""
    base = claude_dir(agent_dir)
    private = ProviderHome(base, {"CLAUDE_CONFIG_DIR": base / "config", "TMPDIR": base / "tmp",
                                  "XDG_CACHE_HOME": base / "cache", "XDG_RUNTIME_DIR": runtime_dir_of(home, agent_dir)})
    runtime = private.dirs["XDG_RUNTIME_DIR"]
    if runtime.parent != home.run_dir:
        private_dir(runtime.parent)  # the shared temporary directory's wardian-<uid>/
    private.make()
    return private


def holder_of(config_dir: Path, session_id: str) -> int | None:
    """The pid of a live Claude Code process that holds `session_id` in this config dir: one Claude Code's own
    registry names (`sessions/<pid>.json`, written a moment after start and removed at exit; a killed process leaves
    its file behind, so it counts only while that pid runs with this CLAUDE_CONFIG_DIR), or, for one too young to
    be in it, a process with this CLAUDE_CONFIG_DIR whose command line names the session."""
    for entry in sorted((config_dir / "sessions").glob("*.json")):
        try:
            record = json.loads(entry.read_text(encoding="utf-8"))
            pid = int(record["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if record.get("sessionId") == session_id and _runs_with(pid, config_dir):
            return pid
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if any(session_id in arg for arg in cmdline) and _runs_with(process.pid, config_dir):
            return process.pid
    return None


def _runs_with(pid: int, config_dir: Path) -> bool:
    try:
        return psutil.Process(pid).environ().get("CLAUDE_CONFIG_DIR") == str(config_dir)
    except psutil.Error:
        return False
