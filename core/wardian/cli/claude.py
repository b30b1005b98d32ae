"""`wardian claude register`: register `wardian mcp serve` for one managed agent with a Claude Code a person runs (the
command is `wardian.cli.registration`'s; this module holds Claude Code's words).

With `--config-dir DIR` (the dir that person's `CLAUDE_CONFIG_DIR` names), the entry is written into its
`.claude.json` (`mcpServers.wardian`), with a session the app issues for the agent, and each `--approve-tools` grant
as an allow rule in its `settings.json`. Without it, only the equivalent `claude mcp add` line is printed.
"""

from __future__ import annotations

import shlex

from wardian.cli.registration import Grants, RegisterCommand, Target
from wardian.home import ENV_HOME, ENV_SESSION

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from wardian.providers.registration import Registrar, Registration


def _registrar() -> Registrar:
    from wardian.providers.claude import registration  # Claude Code's stack only for this command

    return registration


def equivalent_command(reg: Registration) -> str:
    """The `claude mcp add` line a person runs with their own `CLAUDE_CONFIG_DIR` (without the secret itself)."""
    return (f"claude mcp add --scope user {reg.server} -e {ENV_HOME}={shlex.quote(reg.home)} "
            f"-e {ENV_SESSION}=\"${ENV_SESSION}\" -- {shlex.quote(reg.command)} {' '.join(reg.args)}")


def _allow_rules(reg: Registration) -> list[str]:
    from wardian.providers.claude.registration import tool_rule  # Claude Code's stack only for this command

    return [tool_rule(t) for t in reg.approved]


def _summary(reg: Registration) -> dict[str, Any]:
    return {"config": None if reg.config_path is None else str(reg.config_path), "server": reg.server,
            "command": reg.command, "args": list(reg.args),
            "agent": {"name": reg.agent["name"], "uuid": reg.agent["uuid"]}, "home": reg.home,
            "approved_tools": list(reg.approved), "allow": _allow_rules(reg), "created": reg.created,
            "equivalent": equivalent_command(reg)}


def _report(reg: Registration) -> list[str]:
    lines: list[str] = []
    if reg.config_path is not None:
        verb = "registered" if reg.created else "updated"
        lines += [f"{verb} mcpServers.{reg.server} for agent {reg.agent['name']} ({reg.agent['uuid']}) in "
                  f"{reg.config_path}", f"  command = {reg.command} {' '.join(reg.args)}"]
        if reg.approved:
            lines.append(f"  allowed without asking (settings.json permissions.allow): {', '.join(_allow_rules(reg))}")
    lines.append(f"equivalent command for a Claude Code you configure yourself (with its CLAUDE_CONFIG_DIR; "
                 f"{ENV_SESSION} from `wardian agent env {reg.agent['name']}`):")
    lines.append(f"  {equivalent_command(reg)}")
    if reg.approved and reg.config_path is None:
        lines.append(f"  and allow the granted tools: claude --allowedTools {','.join(_allow_rules(reg))}")
    return lines


COMMAND = RegisterCommand(
    "claude", "Claude Code integration",
    "register `wardian mcp serve` for one managed agent with a Claude Code you run yourself",
    Target("--config-dir", "the Claude Code config dir (its CLAUDE_CONFIG_DIR) to write the entry into (.claude.json); "
                           "left out, the equivalent `claude mcp add` line is printed", required=False),
    grants=Grants("wardian tools to allow without asking (allow rules in the config dir's settings.json)",
                  metavar="TOOL,..."),
    registrar=_registrar, summary=_summary, report=_report)
register = COMMAND.add
