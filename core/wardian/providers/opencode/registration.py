"""Registering `wardian mcp serve` in an OpenCode config dir (`opencode.json`, JSONC), for one managed agent
(docs/providers/opencode.md#mcp-inside-opencode).

The same rules as Codex registration (contract rule CFG-2): user-owned entries, comments and `enabled: false`
are kept; an occupied `mcp.wardian` entry that is not ours is reported (`registration_conflict`) and nothing is
replaced; no permission or approval setting is written; the user's global config dir (`~/.config/opencode`) is
refused.

Invariants:
- Everything is checked before anything changes (the config parses, any `wardian` entry is proven ours, the command
  to register exists), and the file is replaced atomically, 0600 (it holds the session secret).
- An entry is ours when it is `type: local` and launches a wardian executable with `mcp serve` for the same
  WARDIAN_HOME. Inside it only our keys are written: `type`, `command`, `environment.WARDIAN_HOME`,
  `environment.WARDIAN_SESSION_ID`; `enabled`, other environment variables and every comment stay as they were.
- The session secret is written only into the config file and never printed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wardian import errors
from wardian.home import ENV_HOME, ENV_SESSION, Home
from wardian.protocol.tools import SERVER_NAME
from wardian.providers.mcp_command import SERVE_ARGS, WARDIAN_EXECUTABLES, wardian_executable, write_private
from wardian.providers.opencode import jsonc

CONFIG_NAMES = ("opencode.jsonc", "opencode.json")


@dataclass(frozen=True, slots=True)
class Registration:
    config_path: Path
    command: list[str]
    agent: dict[str, Any]
    home: str
    created: bool
    enabled: bool


def config_file(config_dir: Path) -> Path:
    """The config file OpenCode reads in `config_dir`: an existing `opencode.jsonc`, else `opencode.json`."""
    jsonc_path = config_dir / "opencode.jsonc"
    return jsonc_path if jsonc_path.is_file() and not (config_dir / "opencode.json").exists() else \
        config_dir / "opencode.json"


def _refuse_global(config_dir: Path) -> None:
    global_dir = (Path.home() / ".config" / "opencode").resolve()
    if config_dir.resolve() == global_dir:
        raise errors.InvalidArguments(
            f"{config_dir} is the user's global OpenCode config; register into the agent's private config dir (for "
            "a host you configure yourself, add the printed block there by hand)", field="config_dir")


def read_config(path: Path) -> str:
    """The config text ('' when absent). Raises: InvalidArguments (not JSONC, or not an object)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    try:
        value = jsonc.loads(text) if text.strip() else {}
    except jsonc.JsoncError as exc:
        raise errors.InvalidArguments(f"{path} is not valid JSONC ({exc}); fix it first, nothing was changed",
                                      field="config_dir") from None
    if not isinstance(value, dict):
        raise errors.InvalidArguments(f"{path} is not a JSON object; fix it first, nothing was changed",
                                      field="config_dir")
    return text


def _is_ours(entry: Any, home: Home) -> bool:
    if not isinstance(entry, dict):
        return False
    command, env = entry.get("command"), entry.get("environment")
    return (entry.get("type") == "local" and isinstance(command, list) and len(command) == 1 + len(SERVE_ARGS)
            and isinstance(command[0], str) and Path(command[0]).name in WARDIAN_EXECUTABLES
            and list(command[1:]) == list(SERVE_ARGS) and isinstance(env, dict) and env.get(ENV_HOME) == str(home.root))


def check_entry(text: str, home: Home, path: Path) -> Any:
    """The existing `mcp.wardian` entry (None when absent). Raises: RegistrationConflict (it is not ours)."""
    value = jsonc.loads(text) if text.strip() else {}
    servers = value.get("mcp")
    if servers is None:
        return None
    if not isinstance(servers, dict):
        raise errors.RegistrationConflict(f"`mcp` in {path} is not an object; nothing was changed", field="config_dir")
    entry = servers.get(SERVER_NAME)
    if entry is not None and not _is_ours(entry, home):
        shown = json.dumps(entry.get("command") if isinstance(entry, dict) else entry)[:200]
        raise errors.RegistrationConflict(
            f"{path} already has an MCP server named {SERVER_NAME!r} that is not this home's wardian (command "
            f"{shown}); remove or rename it, then register again. Nothing was changed", field="config_dir")
    return entry


def check_registration(config_dir: Path, home: Home) -> Path:
    """Check all that `register_session` will, before the app is asked for a session; returns the absolute dir.

    Raises:
        InvalidArguments, RegistrationConflict, CliNotFound: nothing was changed.
    """
    config_dir = config_dir.expanduser().absolute()
    _refuse_global(config_dir)
    wardian_executable()
    path = config_file(config_dir)
    check_entry(read_config(path), home, path)
    return config_dir


def register_session(config_dir: Path, home: Home, session: str, agent: dict[str, Any]) -> Registration:
    """Write our `mcp.wardian` entry for an issued session into `config_dir` (the app's managed startup calls this).

    Raises:
        InvalidArguments, RegistrationConflict, CliNotFound: nothing was changed.
    """
    config_dir = config_dir.expanduser().absolute()
    _refuse_global(config_dir)
    command = [str(wardian_executable()), *SERVE_ARGS]
    path = config_file(config_dir)
    text = read_config(path)
    entry = check_entry(text, home, path)
    for key, value in ((("type",), "local"), (("command",), command),
                       (("environment", ENV_HOME), str(home.root)), (("environment", ENV_SESSION), session)):
        text = jsonc.set_value(text, ("mcp", SERVER_NAME, *key), value)
    config_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(path, text)
    enabled = (entry or {}).get("enabled", True) is not False
    return Registration(path, command, agent, str(home.root), entry is None, enabled)
