"""`wardian claude register`: register `wardian mcp serve` for one managed agent with a Claude Code a person runs.

With `--config-dir DIR` (the dir that person's `CLAUDE_CONFIG_DIR` names), the entry is written into its
`.claude.json` (`mcpServers.wardian`), with a session the app issues for the agent, and each `--approve-tools` grant
as an allow rule in its `settings.json`; everything is checked before the app is asked for the session (the
provider's registration module holds those rules). Without it, only the equivalent `claude mcp add` line is printed.
The session secret is written into the config, never printed.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wardian import errors
from wardian.cli.common import Commands
from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out
from wardian.home import ENV_HOME, ENV_SESSION, resolve_home

if TYPE_CHECKING:
    from wardian.providers.claude.registration import Registration


def register(commands: Commands) -> None:
    claude = commands.group("claude", "Claude Code integration")
    p = commands.add(claude, "register", cmd_claude_register,
                     "register `wardian mcp serve` for one managed agent with a Claude Code you run yourself")
    p.add_argument("--config-dir", dest="config_dir", default=None,
                   help="the Claude Code config dir (its CLAUDE_CONFIG_DIR) to write the entry into (.claude.json); "
                        "left out, the equivalent `claude mcp add` line is printed")
    p.add_argument("--agent", required=True, help="the managed agent's name or UUID")
    p.add_argument("--approve-tools", dest="approve_tools", default=None, metavar="TOOL,...",
                   help="wardian tools to allow without asking (allow rules in the config dir's settings.json)")


def cmd_claude_register(args: argparse.Namespace) -> int:
    """Register (or print how to), then report; errors are raised for `main` to print.

    Raises:
        InvalidArguments: the person's own config, an unreadable config, or an unknown tool.
        RegistrationConflict: `mcpServers.wardian` exists and is not ours.
        CliNotFound: no wardian executable to register.
        AppNotRunning, UnknownAgent, ...: the app could not issue the agent a session.
    """
    from wardian.client import AppClient
    from wardian.protocol.tools import parse_tool_names
    from wardian.providers.claude.registration import Registration, check_registration, register_session
    from wardian.providers.mcp_command import wardian_executable

    approved = parse_tool_names(args.approve_tools)
    home = resolve_home(args.home)
    if args.config_dir is None:
        command = str(wardian_executable())
        with AppClient(home) as app:
            agent = _find_agent(app.call("agent/list", {})["agents"], args.agent)
        reg = Registration(None, command, agent, str(home.root), approved, False)
    else:
        config_dir = check_registration(Path(args.config_dir), home)
        with AppClient(home) as app:
            issued = app.call("agent/session", {"agent": args.agent})
        reg = register_session(config_dir, home, issued["session_id"], issued["agent"], approved)
    out(dump(_summary(reg)) if args.json else "\n".join(_report(reg)))
    return EXIT_OK


def _find_agent(agents: list[dict[str, Any]], wanted: str) -> dict[str, Any]:
    for agent in agents:
        if wanted in (agent["name"], agent["uuid"]):
            return {"name": agent["name"], "uuid": agent["uuid"]}
    raise errors.UnknownAgent(f"no agent named {wanted[:80]!r}", field="agent")


def equivalent_command(reg: Registration) -> str:
    """The `claude mcp add` line a person runs with their own `CLAUDE_CONFIG_DIR` (without the secret itself)."""
    from wardian.protocol.tools import SERVER_NAME
    from wardian.providers.mcp_command import SERVE_ARGS

    return (f"claude mcp add --scope user {SERVER_NAME} -e {ENV_HOME}={shlex.quote(reg.home)} "
            f"-e {ENV_SESSION}=\"${ENV_SESSION}\" -- {shlex.quote(reg.command)} {' '.join(SERVE_ARGS)}")


def _allow_rules(reg: Registration) -> list[str]:
    from wardian.providers.claude.registration import tool_rule

    return [tool_rule(t) for t in reg.approved]


def _summary(reg: Registration) -> dict[str, Any]:
    from wardian.protocol.tools import SERVER_NAME
    from wardian.providers.mcp_command import SERVE_ARGS

    return {"config": None if reg.config_path is None else str(reg.config_path), "server": SERVER_NAME,
            "command": reg.command, "args": list(SERVE_ARGS),
            "agent": {"name": reg.agent["name"], "uuid": reg.agent["uuid"]}, "home": reg.home,
            "approved_tools": list(reg.approved), "allow": _allow_rules(reg), "created": reg.created,
            "equivalent": equivalent_command(reg)}


def _report(reg: Registration) -> list[str]:
    from wardian.protocol.tools import SERVER_NAME
    from wardian.providers.mcp_command import SERVE_ARGS

    lines: list[str] = []
    if reg.config_path is not None:
        verb = "registered" if reg.created else "updated"
        lines += [f"{verb} mcpServers.{SERVER_NAME} for agent {reg.agent['name']} ({reg.agent['uuid']}) in "
                  f"{reg.config_path}", f"  command = {reg.command} {' '.join(SERVE_ARGS)}"]
        if reg.approved:
            lines.append(f"  allowed without asking (settings.json permissions.allow): {', '.join(_allow_rules(reg))}")
    lines.append(f"equivalent command for a Claude Code you configure yourself (with its CLAUDE_CONFIG_DIR; "
                 f"{ENV_SESSION} from `wardian agent env {reg.agent['name']}`):")
    lines.append(f"  {equivalent_command(reg)}")
    if reg.approved and reg.config_path is None:
        lines.append(f"  and allow the granted tools: claude --allowedTools {','.join(_allow_rules(reg))}")
    return lines
