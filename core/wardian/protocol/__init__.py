"""Wire models and method tables (no I/O)."""
