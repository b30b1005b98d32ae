"""The MCP launcher (`wardian-mcp.exe`): start the console CLI with standard I/O passed through and no window.

One interface over two backends; this is the only place that chooses between them:
- `run(command)`: start `command` with this process's stdin, stdout and stderr handed down unchanged, keep it
  contained (it cannot outlive the launcher), wait for it and return its exit status.
- `main()`: the entry point of the frozen `wardian-mcp.exe`: `run` the `wardian-cli.exe` beside it with the
  launcher's own arguments (`wardian-mcp mcp serve` -> `wardian-cli mcp serve`), then exit with its status.
- `finish(status)`: exit this process with a child's status (re-raising a POSIX child's fatal signal).
- `cli_command()`: the CLI the launcher starts; `MCP_LAUNCHER`: the launcher's file name where one is shipped
  (`"wardian-mcp.exe"` on Windows, `None` on POSIX, where Codex launches `wardian` itself).

Verified on Linux only: the Windows backend (`_windows.py`: CREATE_NO_WINDOW, the kill-on-close Job Object)
cannot run here; the POSIX backend runs the same shared code path (`_common.run`) in the tests.
"""

import sys

if sys.platform == "win32":
    from wardian.launcher._windows import MCP_LAUNCHER, cli_command, finish, main, run
else:
    from wardian.launcher._posix import MCP_LAUNCHER, cli_command, finish, main, run

__all__ = ["MCP_LAUNCHER", "cli_command", "finish", "main", "run"]
