"""Which Claude Code CLI versions wardian drives (docs/providers/claude.md#versions): the pinned 2.1.328 and newer
stable releases; anything older, a pre-release, or an executable that prints no version is refused with a message
naming WARDIAN_CLAUDE."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import anyio
import pytest

from tests.conftest import pinned_npm_tool
from wardian import errors
from wardian.providers.claude.compat import ENV_CLAUDE, GATE, capabilities, parse_claude_version
from wardian.providers.claude.provider import ClaudeProvider
from wardian.providers.probe import find_executable

CHECKOUT = Path(__file__).resolve().parents[3]
PINNED = CHECKOUT / "node_modules" / ".bin" / "claude"


def fake_claude(tmp_path: Path, output: str) -> Path:
    """An executable that answers `--version` as a Claude Code would (only the version gate reads it)."""
    path = tmp_path / "claude"
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' {output!r}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.fast
@pytest.mark.parametrize("text", ["2.1.328 (Claude Code)", "2.1.332 (Claude Code)", "2.2.0 (Claude Code)", "3.0.0"])
def test_eligible_versions_may_steer_inject_interrupt_and_take_grants(text: str) -> None:
    caps = capabilities(parse_claude_version(text))
    assert (caps.steer, caps.inject, caps.inject_while_active, caps.interrupt, caps.exact_completion,
            caps.tool_grants) == (True, True, True, True, True, True)
    assert caps.attach is False
    assert caps.no_attach_reason is not None
    assert "diverg" in caps.no_attach_reason


@pytest.mark.fast
@pytest.mark.parametrize("text", ["2.1.327 (Claude Code)", "1.0.128 (Claude Code)", "2.1.329-beta.1 (Claude Code)"])
def test_older_and_prerelease_versions_are_refused_naming_the_fix(text: str) -> None:
    with pytest.raises(errors.Unsupported) as exc:
        capabilities(parse_claude_version(text))
    assert "2.1.328" in exc.value.message
    assert ENV_CLAUDE in exc.value.message


@pytest.mark.fast
def test_output_without_a_version_is_refused() -> None:
    with pytest.raises(errors.Unsupported) as exc:
        parse_claude_version("command not found")
    assert ENV_CLAUDE in exc.value.message


def test_the_pinned_cli_passes_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    pinned = pinned_npm_tool(PINNED, "Claude Code CLI")
    monkeypatch.setenv(ENV_CLAUDE, str(pinned))
    info = anyio.run(ClaudeProvider().probe)
    assert info.version == "2.1.328"
    assert info.executable == str(pinned)
    assert info.capabilities.steer
    assert info.capabilities.tool_grants


@pytest.mark.fast
def test_an_older_cli_named_by_wardian_claude_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_CLAUDE, str(fake_claude(tmp_path, "2.1.200 (Claude Code)")))
    with pytest.raises(errors.Unsupported) as exc:
        anyio.run(ClaudeProvider().probe)
    assert "Claude Code 2.1.200 is not supported" in exc.value.message


@pytest.mark.fast
def test_wardian_claude_must_name_an_executable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "claude"
    monkeypatch.setenv(ENV_CLAUDE, str(missing))
    with pytest.raises(errors.Unsupported) as exc:
        find_executable(GATE)
    assert f"{ENV_CLAUDE}={missing} is not an executable" in exc.value.message


@pytest.mark.fast
def test_without_wardian_claude_the_pinned_cli_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    pinned_npm_tool(PINNED, "Claude Code CLI")
    monkeypatch.delenv(ENV_CLAUDE, raising=False)
    monkeypatch.chdir("/")
    assert os.path.samefile(find_executable(GATE), PINNED)
