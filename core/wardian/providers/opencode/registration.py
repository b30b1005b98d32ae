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

from pathlib import Path
from typing import Any

from wardian import errors
from wardian.home import ENV_HOME, ENV_SESSION, Home
from wardian.protocol.tools import SERVER_NAME
from wardian.providers.mcp_command import SERVE_ARGS, wardian_executable, write_private
from wardian.providers.opencode import jsonc
from wardian.providers.registration import Registration, existing_entry, launches_wardian, target_dir

CONFIG_NAMES = ("opencode.jsonc", "opencode.json")
FIELD = "config_dir"
REFUSAL = ("{dir} is the user's global OpenCode config; register into the agent's private config dir (for a host "
           "you configure yourself, add the printed block there by hand)")


def config_file(config_dir: Path) -> Path:
    """The config file OpenCode reads in `config_dir`: an existing `opencode.jsonc`, else `opencode.json`."""
    jsonc_path = config_dir / "opencode.jsonc"
    return jsonc_path if jsonc_path.is_file() and not (config_dir / "opencode.json").exists() else \
        config_dir / "opencode.json"


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
                                      field=FIELD) from None
    if not isinstance(value, dict):
        raise errors.InvalidArguments(f"{path} is not a JSON object; fix it first, nothing was changed",
                                      field=FIELD)
    return text


def _is_ours(entry: Any, home: Home) -> bool:
    command = entry.get("command") if isinstance(entry, dict) else None
    return (isinstance(entry, dict) and entry.get("type") == "local" and isinstance(command, list) and bool(command)
            and launches_wardian(command[0], command[1:], entry.get("environment"), home))


def check_entry(text: str, home: Home, path: Path) -> Any:
    """The existing `mcp.wardian` entry (None when absent). Raises: RegistrationConflict (it is not ours)."""
    value = jsonc.loads(text) if text.strip() else {}
    return existing_entry(value.get("mcp"), path, home, key="mcp", kind="an object", field=FIELD, ours=_is_ours)


def check_registration(config_dir: Path, home: Home) -> Path:
    """Check all that `register_session` will, before the app is asked for a session; returns the absolute dir.

    Raises:
        InvalidArguments, RegistrationConflict, CliNotFound: nothing was changed.
    """
    config_dir = target_dir(config_dir, (Path.home() / ".config" / "opencode",), REFUSAL, field=FIELD)
    wardian_executable()
    path = config_file(config_dir)
    check_entry(read_config(path), home, path)
    return config_dir


def register_session(config_dir: Path, home: Home, session: str, agent: dict[str, Any],
                     approved: tuple[str, ...] = ()) -> Registration:
    """Write our `mcp.wardian` entry for an issued session into `config_dir` (the app's managed startup calls this).
    OpenCode asks before no tool, so a grant (`approved`) would mean nothing: it is refused, not ignored (the rule
    of `Capabilities.tool_grants`).

    Raises:
        InvalidArguments, RegistrationConflict, CliNotFound: nothing was changed.
    """
    if approved:
        raise errors.InvalidArguments("OpenCode asks before no tool: there is nothing to grant; nothing was changed",
                                      field="approve_tools")
    config_dir = target_dir(config_dir, (Path.home() / ".config" / "opencode",), REFUSAL, field=FIELD)
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
    return Registration(path, command[0], agent, str(home.root), created=entry is None, enabled=enabled)
