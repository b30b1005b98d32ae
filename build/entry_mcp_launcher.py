"""PyInstaller entry script of the silent Windows launcher `wardian-mcp.exe` (GUI subsystem)."""

from wardian.launcher import main

main()
