"""`wardian codex register`: register `wardian mcp serve` for one managed agent in its private CODEX_HOME."""

from __future__ import annotations

import argparse

from wardian.cli.common import Commands


def register(commands: Commands) -> None:
    codex = commands.group("codex", "Codex integration")
    p = commands.add(codex, "register", cmd_codex_register,
                     "register `wardian mcp serve` for one managed agent in a private CODEX_HOME")
    p.add_argument("--codex-home", dest="codex_home", required=True, help="the agent's private CODEX_HOME")
    p.add_argument("--agent", required=True, help="the managed agent's name or UUID")
    p.add_argument("--approve-tools", dest="approve_tools", default=None,
                   help="comma-separated tool names to grant approval_mode = \"approve\"")


def cmd_codex_register(args: argparse.Namespace) -> int:
    from wardian.providers.codex.registration import main_register

    return int(main_register(args))
