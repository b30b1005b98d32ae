"""`wardian opencode register`: register `wardian mcp serve` for one managed agent in an OpenCode config dir.

Everything is checked before the app is asked for the agent's session, and the config is written only after (the
provider's registration module holds those rules); the session secret is written into the config, never printed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wardian.cli.common import Commands
from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out
from wardian.home import ENV_HOME, ENV_SESSION, resolve_home

if TYPE_CHECKING:
    from wardian.providers.opencode.registration import Registration


def register(commands: Commands) -> None:
    opencode = commands.group("opencode", "OpenCode integration")
    p = commands.add(opencode, "register", cmd_opencode_register,
                     "register `wardian mcp serve` for one managed agent in an OpenCode config dir (opencode.json)")
    p.add_argument("--config-dir", dest="config_dir", required=True,
                   help="the OpenCode config dir to register in (its opencode.json or opencode.jsonc)")
    p.add_argument("--agent", required=True, help="the managed agent's name or UUID")


def cmd_opencode_register(args: argparse.Namespace) -> int:
    """`wardian opencode register --config-dir DIR --agent NAME`; errors are raised for `main` to print."""
    from wardian.client import AppClient
    from wardian.providers.opencode.registration import check_registration, register_session

    home = resolve_home(args.home)
    config_dir = check_registration(Path(args.config_dir), home)
    with AppClient(home) as app:
        issued = app.call("agent/session", {"agent": args.agent})
    reg = register_session(config_dir, home, issued["session_id"], issued["agent"])
    if args.json:
        out(dump(_summary(reg)))
    else:
        out("\n".join(_report(reg)))
    return EXIT_OK


def equivalent_block(reg: Registration) -> str:
    """The `mcp` block a separately configured host would add (the session from `wardian agent env`, never printed)."""
    from wardian.protocol.tools import SERVER_NAME

    block = {"mcp": {SERVER_NAME: {"type": "local", "command": reg.command, "environment": {
        ENV_HOME: reg.home, ENV_SESSION: "<the WARDIAN_SESSION_ID of `wardian agent env " + reg.agent["name"] + "`>"}}}}
    return json.dumps(block, indent=2)


def _summary(reg: Registration) -> dict[str, Any]:
    from wardian.protocol.tools import SERVER_NAME

    return {"config": str(reg.config_path), "server": SERVER_NAME, "command": reg.command,
            "agent": {"name": reg.agent["name"], "uuid": reg.agent["uuid"]}, "home": reg.home,
            "created": reg.created, "enabled": reg.enabled, "equivalent": json.loads(equivalent_block(reg))}


def _report(reg: Registration) -> list[str]:
    from wardian.protocol.tools import SERVER_NAME

    verb = "registered" if reg.created else "updated"
    lines = [f"{verb} mcp.{SERVER_NAME} for agent {reg.agent['name']} ({reg.agent['uuid']}) in {reg.config_path}",
             f"  command = {' '.join(reg.command)}"]
    if not reg.enabled:
        lines.append("  note: the entry is disabled (enabled: false) and was left disabled")
    lines.append("equivalent block for a separately configured host (its opencode.json):")
    lines.extend("  " + line for line in equivalent_block(reg).splitlines())
    return lines
