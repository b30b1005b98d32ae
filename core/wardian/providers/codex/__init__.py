"""The Codex provider: app-server client, version gates, delivery and MCP registration."""
