"""The Codex provider: app-server client, typed messages, version gates, delivery items, the runtime of one agent's
app-server and conversation, and MCP registration in the agent's private CODEX_HOME."""
