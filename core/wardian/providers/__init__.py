"""Provider adapters: how the app reaches each kind of agent (Codex first)."""
