"""`wardian mcp serve`: the MCP server over stdio (the only command that imports the `mcp` SDK)."""

from __future__ import annotations

import argparse

from wardian.cli.common import Commands


def register(commands: Commands) -> None:
    mcp = commands.group("mcp", "the MCP server")
    commands.add(mcp, "serve", cmd_mcp_serve, "serve the eight tools over stdio MCP")


def cmd_mcp_serve(args: argparse.Namespace) -> int:
    from wardian.mcp.server import main as mcp_main  # imports mcp: only this command pays for it

    return int(mcp_main())
