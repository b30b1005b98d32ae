"""What registering `wardian mcp serve` with any provider needs: the command to register, and a provider's config
file read as one JSON object and written back privately and atomically (it holds a session secret).

The command is never a Python interpreter: a frozen build registers itself (or, on Windows, the silent
`wardian-mcp.exe` launcher beside it: contract rule CFG-5), a source install the `wardian` console script
beside its interpreter.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from wardian import errors
from wardian.executables import MCP_LAUNCHER

SERVE_ARGS = ("mcp", "serve")
# Executable names a registration of ours may launch: the CLI, and the silent Windows launcher.
WARDIAN_EXECUTABLES = frozenset({"wardian", "wardian.exe", "wardian-cli", "wardian-cli.exe", "wardian-mcp",
                                 "wardian-mcp.exe"})


def wardian_executable(executable: str | None = None, frozen: bool | None = None,
                       launcher: str | None = MCP_LAUNCHER) -> Path:
    """The absolute path of the wardian command to register: never a Python interpreter.

    Frozen (PyInstaller): the frozen executable itself, or, where the platform ships a launcher
    (`wardian-mcp.exe` on Windows, contract rule CFG-5), that launcher beside it. From source: the
    `wardian` console script beside the interpreter. The arguments default to this process's
    `sys.executable`, `sys.frozen` and the platform's launcher name.

    Raises:
        CliNotFound: frozen but the launcher is missing beside the executable, or not frozen and no `wardian`
            console script beside this interpreter.
    """
    exe = Path(sys.executable if executable is None else executable).absolute()
    if getattr(sys, "frozen", False) if frozen is None else frozen:
        if launcher is None:
            return exe
        silent = exe.with_name(launcher)
        if silent.is_file():
            return silent
        # Registering the console CLI instead would open a console window for every Codex server start.
        raise errors.CliNotFound(f"the silent launcher {launcher} is missing beside {exe}: reinstall wardian "
                                 "so the provider has a windowless command to launch", field="executable")
    bindir = exe.parent
    for name in ("wardian", "wardian.exe"):
        candidate = bindir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise errors.CliNotFound(f"no `wardian` executable beside {exe}: install wardian into this environment "
                      "(pip install wardian) so the provider has a command to launch")


def read_json_object(path: Path, *, field: str = "config") -> dict[str, Any]:
    """The JSON object in `path` ({} when absent or blank).

    Raises:
        InvalidArguments: not JSON, or not an object (naming `field`, the option or setting it came from: by default
            a `-c` setting).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise errors.InvalidArguments(f"{path} is not valid JSON ({exc}); fix it first, nothing was changed",
                                      field=field) from None
    if not isinstance(value, dict):
        raise errors.InvalidArguments(f"{path} is not a JSON object; fix it first, nothing was changed", field=field)
    return value


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically (same directory, fsync, rename), never wider than its owner's access
    (the file holds a session secret); a new file is 0600.
    """
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, tmp = tempfile.mkstemp(prefix=".config.", suffix=".toml.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        # The file holds a session secret: never wider than the user's own access.
        os.chmod(tmp, mode & 0o700)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
