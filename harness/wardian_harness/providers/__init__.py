"""The real agent CLIs a test runs, one module per provider: where its executable is found and at which version, the
settings that point it at the scripted model, and (Claude Code) how to read what it left in its home."""
