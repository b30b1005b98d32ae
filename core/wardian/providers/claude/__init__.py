"""The Claude Code provider: one app-owned `claude -p` stream-json process per agent (docs/providers/claude.md)."""
