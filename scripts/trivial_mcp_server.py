"""A trivial stdio MCP server on the official SDK: the yardstick `scripts/bench.py` measures `wardian mcp serve`
against in the same run (docs/benchmarks.md#the-metrics).

It is what a minimal server built the SDK's documented way costs: the low-level `Server` (the one `wardian mcp
serve` is built on) behind the SDK's own `stdio_server` transport, with one tool, `noop`, that returns a
constant text without touching anything. Its spawn -> `initialize` time is the SDK's import and start-up; its
`tools/call noop` round trip is the SDK's per-call cost on both sides of the pipe.

Usage: `python scripts/trivial_mcp_server.py` (speaks MCP on stdin/stdout until stdin ends).
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL = types.Tool(name="noop", description="Return a constant text; touches nothing.",
                  input_schema={"type": "object", "properties": {}, "additionalProperties": False},
                  annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False,
                                                    idempotent_hint=True, open_world_hint=False))


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text="ok")], structured_content={"ok": True})


async def main() -> None:
    server: Server[Any] = Server("trivial", version="0", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
