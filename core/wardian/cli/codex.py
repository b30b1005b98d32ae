"""`wardian codex register`: register `wardian mcp serve` for one managed agent in its private CODEX_HOME (the command
is `wardian.cli.registration`'s; this module holds Codex's words)."""

from __future__ import annotations

import shlex

from wardian.cli.registration import Grants, RegisterCommand, Target
from wardian.home import ENV_HOME, ENV_SESSION
from wardian.limits import CODEX_TOOL_TIMEOUT_SEC

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from wardian.providers.registration import Registrar, Registration


def _registrar() -> Registrar:
    from wardian.providers.codex import registration  # Codex's stack (tomlkit, ~50 ms): only for this command

    return registration


def equivalent_command(reg: Registration) -> str:
    """The `codex mcp add` line a separately configured host would run (without the secret itself)."""
    return (f"codex mcp add {reg.server} --env {ENV_HOME}={shlex.quote(reg.home)} "
            f"--env {ENV_SESSION}=\"${ENV_SESSION}\" -- {shlex.quote(reg.command)} {' '.join(reg.args)}")


def _summary(reg: Registration) -> dict[str, Any]:
    return {
        "config": str(reg.config_path), "server": reg.server, "command": reg.command, "args": list(reg.args),
        "tool_timeout_sec": CODEX_TOOL_TIMEOUT_SEC, "agent": {"name": reg.agent["name"], "uuid": reg.agent["uuid"]},
        "home": reg.home, "approved_tools": list(reg.approved), "created": reg.created, "enabled": reg.enabled,
        "equivalent": equivalent_command(reg),
    }


def _report(reg: Registration) -> list[str]:
    verb = "registered" if reg.created else "updated"
    lines = [f"{verb} [mcp_servers.{reg.server}] for agent {reg.agent['name']} ({reg.agent['uuid']}) in "
             f"{reg.config_path}",
             f"  command = {reg.command} {' '.join(reg.args)}; tool_timeout_sec = {CODEX_TOOL_TIMEOUT_SEC}"]
    if reg.approved:
        lines.append(f"  approval_mode = \"approve\" for: {', '.join(reg.approved)}")
    if not reg.enabled:
        lines.append("  note: the entry is disabled (enabled = false) and was left disabled")
    lines.append("equivalent command for a separately configured host (with its CODEX_HOME; "
                 f"{ENV_SESSION} from `wardian agent env {reg.agent['name']}`):")
    lines.append(f"  {equivalent_command(reg)}")
    return lines


COMMAND = RegisterCommand(
    "codex", "Codex integration", "register `wardian mcp serve` for one managed agent in a private CODEX_HOME",
    Target("--codex-home", "the agent's private CODEX_HOME"),
    grants=Grants("comma-separated tool names to grant approval_mode = \"approve\""),
    registrar=_registrar, summary=_summary, report=_report)
register = COMMAND.add
