"""Pi (`@mariozechner/pi-coding-agent`), driven over its RPC mode (docs/guide/pi.md)."""
