"""Registering `wardian mcp serve` with Claude Code, for one managed agent (docs/providers/claude.md#registration).

Two places, one entry (`mcpServers.wardian`: `type: stdio`, the wardian command, `args: ["mcp", "serve"]`,
`env.WARDIAN_HOME` and `env.WARDIAN_SESSION_ID`):
- the app's own start writes a private `--mcp-config` file (0600: it holds the session of the new generation) that
  the process reads with `--strict-mcp-config`, so no project `.mcp.json` is mixed in;
- `wardian claude register` writes the entry into a config dir's `.claude.json` (Claude Code's user-scope MCP servers
  when `CLAUDE_CONFIG_DIR` names that dir), for a person who runs Claude Code themselves.

Which wardian tools run without asking (`--allowedTools`): `list_agents`, `wait_agent` and `receive_messages`
always (they only read or wait), the others (`send_message`, `followup_task`, `reply`, `interrupt_agent`) only when
granted with `--approve-tools`. Claude Code asks before every MCP tool it has no allow rule for, and an app-owned
`claude -p` has nobody to ask, so an ungranted tool is refused. Every other tool follows the agent's own settings.

The rules of Codex and OpenCode registration hold for `.claude.json` (contract rule CFG-2): every other key and
server is kept; an occupied `mcpServers.wardian` that is not ours is `registration_conflict` and nothing changes;
the person's own config (`~/.claude`, `~/.claude.json`) is refused; the session secret is written only into the
file (0600), never printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wardian import errors
from wardian.home import ENV_HOME, ENV_SESSION, Home
from wardian.protocol.tools import SERVER_NAME, parse_tool_names
from wardian.providers.journal import JSON
from wardian.providers.mcp_command import SERVE_ARGS, read_json_object, wardian_executable, write_private
from wardian.providers.registration import Registration, existing_entry, launches_wardian, target_dir

UNGRANTED = ("wait_agent", "receive_messages", "list_agents")
"""The wardian tools an agent may always run: they read or wait, and change nothing another agent sees."""
USER_CONFIG = ".claude.json"


def tool_rule(tool: str) -> str:
    """Claude Code's name of a wardian tool (`mcp__wardian__list_agents`)."""
    return f"mcp__{SERVER_NAME}__{tool}"


def allowed_tools(grants: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """`--allowedTools` for an agent with these `--approve-tools` grants, in the tool table's order.
    Raises: InvalidArguments (a name that is no wardian tool)."""
    return tuple(tool_rule(t) for t in parse_tool_names([*UNGRANTED, *parse_tool_names(list(grants))]))


def server_entry(home: Home, session: str) -> dict[str, Any]:
    """Our `mcpServers.wardian` entry for a session. Raises: CliNotFound."""
    return {"type": "stdio", "command": str(wardian_executable()), "args": list(SERVE_ARGS),
            "env": {ENV_HOME: str(home.root), ENV_SESSION: session}}


def write_mcp_config(path: Path, home: Home, session: str) -> None:
    """The private `--mcp-config` file of one start (0600). Raises: CliNotFound."""
    write_private(path, json.dumps({"mcpServers": {SERVER_NAME: server_entry(home, session)}}, indent=2) + "\n")


FIELD = "config_dir"
REFUSAL = ("{dir} is the user's own Claude Code config; register into a private config dir (the one "
           "CLAUDE_CONFIG_DIR names), or run the printed `claude mcp add` line yourself")


def _is_ours(entry: Any, home: Home) -> bool:
    return (isinstance(entry, dict) and entry.get("type", "stdio") == "stdio"
            and launches_wardian(entry.get("command"), entry.get("args"), entry.get("env"), home))


def _check(doc: dict[str, Any], home: Home, path: Path) -> Any:
    return existing_entry(doc.get("mcpServers"), path, home, key="mcpServers", kind="an object", field=FIELD,
                          ours=_is_ours)


def check_registration(config_dir: Path, home: Home) -> Path:
    """Check all that `register_session` will, before the app is asked for a session; returns the absolute dir.

    Raises:
        InvalidArguments, RegistrationConflict, CliNotFound: nothing was changed.
    """
    config_dir = target_dir(config_dir, (Path.home() / ".claude", Path.home()), REFUSAL, field=FIELD)
    wardian_executable()
    _check(read_json_object(config_dir / USER_CONFIG, field=FIELD), home, config_dir / USER_CONFIG)
    read_json_object(config_dir / "settings.json", field=FIELD)
    return config_dir


def _grant(config_dir: Path, approved: tuple[str, ...]) -> None:
    """Add allow rules for the granted tools to the config dir's `settings.json` (kept once given, as Codex's)."""
    if not approved:
        return
    path = config_dir / "settings.json"
    doc = read_json_object(path, field=FIELD)
    permissions = doc.setdefault("permissions", {})
    if not isinstance(permissions, dict) or not isinstance(permissions.setdefault("allow", []), list):
        raise errors.InvalidArguments(f"`permissions.allow` in {path} is not a list; nothing was granted",
                                      field=FIELD)
    allow: list[Any] = permissions["allow"]
    allow.extend(rule for rule in map(tool_rule, approved) if rule not in allow)
    write_private(path, JSON.dump(doc))


def register_session(config_dir: Path, home: Home, session: str, agent: dict[str, Any],
                     approved: tuple[str, ...]) -> Registration:
    """Write our `mcpServers.wardian` entry for an issued session into the config dir's `.claude.json`, and the
    granted tools' allow rules into its `settings.json`.

    Raises:
        InvalidArguments, RegistrationConflict, CliNotFound: nothing was changed.
    """
    config_dir = check_registration(config_dir, home)
    path = config_dir / USER_CONFIG
    doc = read_json_object(path, field=FIELD)
    created = _check(doc, home, path) is None
    entry = server_entry(home, session)
    servers = doc.setdefault("mcpServers", {})
    mine = servers.get(SERVER_NAME) or {}
    servers[SERVER_NAME] = {**mine, **entry, "env": {**mine.get("env", {}), **entry["env"]}}
    config_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    _grant(config_dir, approved)
    write_private(path, JSON.dump(doc))
    return Registration(path, entry["command"], agent, str(home.root), approved, created)
