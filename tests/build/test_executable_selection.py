"""Which command registration writes into a Codex home (CFG-1, CFG-5; docs/guide/frozen-builds.md).

A frozen build registers the frozen executable, or the silent launcher beside it where the platform ships
one (`wardian-mcp.exe` on Windows); from source it registers the `wardian` console script beside the
interpreter. Never a Python interpreter path. The platform is a parameter, so the Windows rule runs here too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from wardian import errors
from wardian.launcher import MCP_LAUNCHER
from wardian.providers.mcp_command import WARDIAN_EXECUTABLES, wardian_executable


def touch(path: Path, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    path.chmod(mode)
    return path


def test_a_frozen_posix_build_registers_itself(tmp_path: Path) -> None:
    """CFG-1: frozen, the registered command is the frozen executable, never an interpreter."""
    exe = touch(tmp_path / "dist" / "wardian" / "wardian")
    touch(tmp_path / "dist" / "wardian" / "python3")  # nothing beside it is ever preferred
    assert wardian_executable(str(exe), frozen=True, launcher=None) == exe


def test_a_frozen_windows_build_registers_the_silent_launcher_beside_the_cli(tmp_path: Path) -> None:
    """CFG-5: on Windows managed startup registers wardian-mcp.exe, not the console wardian-cli.exe."""
    cli = touch(tmp_path / "wardian" / "wardian-cli.exe")
    launcher = touch(tmp_path / "wardian" / "wardian-mcp.exe")
    assert wardian_executable(str(cli), frozen=True, launcher="wardian-mcp.exe") == launcher
    assert launcher.name in WARDIAN_EXECUTABLES  # a later registration still recognises the entry as ours


def test_a_frozen_windows_build_without_its_launcher_is_reported(tmp_path: Path) -> None:
    """CFG-2, CFG-5: a missing CLI is reported; the console CLI is not registered instead (it would open a window)."""
    cli = touch(tmp_path / "wardian" / "wardian-cli.exe")
    with pytest.raises(errors.CliNotFound) as caught:
        wardian_executable(str(cli), frozen=True, launcher="wardian-mcp.exe")
    assert caught.value.code == "cli_not_found"


def test_from_source_the_console_script_beside_the_interpreter_is_registered(tmp_path: Path) -> None:
    """CFG-1: not frozen, the `wardian` script of the environment, not `python -m wardian`."""
    python = touch(tmp_path / "venv" / "bin" / "python")
    script = touch(tmp_path / "venv" / "bin" / "wardian")
    assert wardian_executable(str(python), frozen=False) == script
    assert wardian_executable(str(python), frozen=False, launcher="wardian-mcp.exe") == script


def test_from_source_without_a_console_script_nothing_is_guessed(tmp_path: Path) -> None:
    """CFG-2: no executable script beside the interpreter is `cli_not_found`."""
    python = touch(tmp_path / "venv" / "bin" / "python")
    touch(tmp_path / "venv" / "bin" / "wardian", mode=0o644)  # not executable
    with pytest.raises(errors.CliNotFound):
        wardian_executable(str(python), frozen=False)


def test_the_defaults_describe_this_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The defaults read `sys.executable`, `sys.frozen` and the platform's launcher name."""
    exe = touch(tmp_path / "wardian")
    monkeypatch.setattr(sys, "executable", str(exe))
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    expected = exe if MCP_LAUNCHER is None else exe.with_name(MCP_LAUNCHER)
    if MCP_LAUNCHER is not None:
        touch(expected)
    assert wardian_executable() == expected
