"""`wardian mcp serve`: the stdio MCP server of the eight messaging tools (entry point: `wardian.mcp.server.main`)."""

__all__: list[str] = []
