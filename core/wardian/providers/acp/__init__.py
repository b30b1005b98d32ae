"""ACP agents: Qwen Code, and any agent that speaks the Agent Client Protocol over stdio (docs/guide/acp.md)."""
