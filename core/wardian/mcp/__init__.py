"""`wardian mcp serve`: the stdio MCP server of the seven messaging tools (entry point: `wardian.mcp.server.main`)."""

__all__: list[str] = []
