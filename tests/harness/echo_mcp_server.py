"""A one-tool stdio MCP server for the harness tests: `shout(text)` returns the text upper-cased.

The tool is annotated read-only, so Codex runs it under `approval_policy = "never"` (docs/providers/codex.md).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("echo")


@server.tool(description="Return the text upper-cased.", annotations=ToolAnnotations(read_only_hint=True))
def shout(text: str) -> str:
    return text.upper()


if __name__ == "__main__":
    server.run("stdio")
