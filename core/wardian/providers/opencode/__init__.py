"""The OpenCode provider: one app-owned `opencode serve` per agent (HTTP on 127.0.0.1, its `/event` stream), the
agent's private XDG homes and `opencode.json` (JSONC) with `wardian mcp serve` registered, version gates and the
runtime that delivers into the agent's one session."""
