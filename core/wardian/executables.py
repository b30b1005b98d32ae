"""The file name of the silent MCP launcher, where a platform ships one.

Both the launcher (which is that executable) and provider registration (which writes it into a provider's config)
need it; it lives here, importing nothing, so that providers never import the launcher itself.
"""

from __future__ import annotations

import sys

# On Windows a console program opens a window for every Codex server start: a GUI-subsystem launcher is registered
# instead. Elsewhere there is no launcher and `wardian` itself is registered.
WINDOWS_MCP_LAUNCHER = "wardian-mcp.exe"
MCP_LAUNCHER: str | None = WINDOWS_MCP_LAUNCHER if sys.platform == "win32" else None
