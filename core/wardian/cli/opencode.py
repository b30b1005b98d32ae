"""`wardian opencode register`: register `wardian mcp serve` for one managed agent in an OpenCode config dir."""

from __future__ import annotations

import argparse

from wardian.cli.common import Commands


def register(commands: Commands) -> None:
    opencode = commands.group("opencode", "OpenCode integration")
    p = commands.add(opencode, "register", cmd_opencode_register,
                     "register `wardian mcp serve` for one managed agent in an OpenCode config dir (opencode.json)")
    p.add_argument("--config-dir", dest="config_dir", required=True,
                   help="the OpenCode config dir to register in (its opencode.json or opencode.jsonc)")
    p.add_argument("--agent", required=True, help="the managed agent's name or UUID")


def cmd_opencode_register(args: argparse.Namespace) -> int:
    from wardian.providers.opencode.registration import main_register

    return int(main_register(args))
