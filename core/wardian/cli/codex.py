"""`wardian codex register`: register `wardian mcp serve` for one managed agent in its private CODEX_HOME.

Everything is checked before the app is asked for the agent's session, and the config is written only after (the
provider's registration module holds those rules); the session secret is written into the config, never printed.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wardian.cli.common import Commands
from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out
from wardian.home import ENV_HOME, ENV_SESSION, resolve_home

if TYPE_CHECKING:
    from wardian.providers.codex.registration import Registration


def register(commands: Commands) -> None:
    codex = commands.group("codex", "Codex integration")
    p = commands.add(codex, "register", cmd_codex_register,
                     "register `wardian mcp serve` for one managed agent in a private CODEX_HOME")
    p.add_argument("--codex-home", dest="codex_home", required=True, help="the agent's private CODEX_HOME")
    p.add_argument("--agent", required=True, help="the managed agent's name or UUID")
    p.add_argument("--approve-tools", dest="approve_tools", default=None,
                   help="comma-separated tool names to grant approval_mode = \"approve\"")


def cmd_codex_register(args: argparse.Namespace) -> int:
    """Register, then print what was written; errors are raised for `main` to print.

    Raises:
        InvalidArguments: the global Codex home, or an unreadable config.
        RegistrationConflict: `[mcp_servers.wardian]` exists and is not ours.
        CliNotFound: no wardian executable to register.
        AppNotRunning, UnknownAgent, ...: the app could not issue the agent a session.
    """
    from wardian.client import AppClient
    from wardian.protocol.tools import parse_tool_names
    from wardian.providers.codex.registration import check_registration, register_session

    approved = parse_tool_names(args.approve_tools)
    home = resolve_home(args.home)
    codex_home = check_registration(Path(args.codex_home), home)
    with AppClient(home) as app:
        issued = app.call("agent/session", {"agent": args.agent})
    reg = register_session(codex_home, home, issued["session_id"], issued["agent"], approved)
    if args.json:
        out(dump(_summary(reg)))
    else:
        out("\n".join(_report(reg)))
    return EXIT_OK


def equivalent_command(reg: Registration) -> str:
    """The `codex mcp add` line a separately configured host would run (without the secret itself)."""
    from wardian.protocol.tools import SERVER_NAME
    from wardian.providers.mcp_command import SERVE_ARGS

    return (f"codex mcp add {SERVER_NAME} --env {ENV_HOME}={shlex.quote(reg.home)} "
            f"--env {ENV_SESSION}=\"${ENV_SESSION}\" -- {shlex.quote(reg.command)} {' '.join(SERVE_ARGS)}")


def _summary(reg: Registration) -> dict[str, Any]:
    from wardian.protocol.tools import CODEX_TOOL_TIMEOUT_SEC, SERVER_NAME
    from wardian.providers.mcp_command import SERVE_ARGS

    return {
        "config": str(reg.config_path), "server": SERVER_NAME, "command": reg.command, "args": list(SERVE_ARGS),
        "tool_timeout_sec": CODEX_TOOL_TIMEOUT_SEC, "agent": {"name": reg.agent["name"], "uuid": reg.agent["uuid"]},
        "home": reg.home, "approved_tools": list(reg.approved), "created": reg.created, "enabled": reg.enabled,
        "equivalent": equivalent_command(reg),
    }


def _report(reg: Registration) -> list[str]:
    from wardian.protocol.tools import CODEX_TOOL_TIMEOUT_SEC, SERVER_NAME
    from wardian.providers.mcp_command import SERVE_ARGS

    verb = "registered" if reg.created else "updated"
    lines = [f"{verb} [mcp_servers.{SERVER_NAME}] for agent {reg.agent['name']} ({reg.agent['uuid']}) in "
             f"{reg.config_path}",
             f"  command = {reg.command} {' '.join(SERVE_ARGS)}; tool_timeout_sec = {CODEX_TOOL_TIMEOUT_SEC}"]
    if reg.approved:
        lines.append(f"  approval_mode = \"approve\" for: {', '.join(reg.approved)}")
    if not reg.enabled:
        lines.append("  note: the entry is disabled (enabled = false) and was left disabled")
    lines.append("equivalent command for a separately configured host (with its CODEX_HOME; "
                 f"{ENV_SESSION} from `wardian agent env {reg.agent['name']}`):")
    lines.append(f"  {equivalent_command(reg)}")
    return lines
