"""`wardian opencode register`: register `wardian mcp serve` for one managed agent in an OpenCode config dir (the
command is `wardian.cli.registration`'s; this module holds OpenCode's words)."""

from __future__ import annotations

import json

from wardian.cli.registration import RegisterCommand, Target
from wardian.home import ENV_HOME, ENV_SESSION

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from wardian.providers.registration import Registrar, Registration


def _registrar() -> Registrar:
    from wardian.providers.opencode import registration  # OpenCode's stack only for this command

    return registration


def equivalent_block(reg: Registration) -> str:
    """The `mcp` block a separately configured host would add (the session from `wardian agent env`, never printed)."""
    block = {"mcp": {reg.server: {"type": "local", "command": [reg.command, *reg.args], "environment": {
        ENV_HOME: reg.home, ENV_SESSION: "<the WARDIAN_SESSION_ID of `wardian agent env " + reg.agent["name"] + "`>"}}}}
    return json.dumps(block, indent=2)


def _summary(reg: Registration) -> dict[str, Any]:
    return {"config": str(reg.config_path), "server": reg.server, "command": [reg.command, *reg.args],
            "agent": {"name": reg.agent["name"], "uuid": reg.agent["uuid"]}, "home": reg.home,
            "created": reg.created, "enabled": reg.enabled, "equivalent": json.loads(equivalent_block(reg))}


def _report(reg: Registration) -> list[str]:
    verb = "registered" if reg.created else "updated"
    lines = [f"{verb} mcp.{reg.server} for agent {reg.agent['name']} ({reg.agent['uuid']}) in {reg.config_path}",
             f"  command = {' '.join([reg.command, *reg.args])}"]
    if not reg.enabled:
        lines.append("  note: the entry is disabled (enabled: false) and was left disabled")
    lines.append("equivalent block for a separately configured host (its opencode.json):")
    lines.extend("  " + line for line in equivalent_block(reg).splitlines())
    return lines


COMMAND = RegisterCommand(
    "opencode", "OpenCode integration",
    "register `wardian mcp serve` for one managed agent in an OpenCode config dir (opencode.json)",
    Target("--config-dir", "the OpenCode config dir to register in (its opencode.json or opencode.jsonc)"),
    registrar=_registrar, summary=_summary, report=_report)
register = COMMAND.add
