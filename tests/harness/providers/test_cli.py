"""The harness's one discovery of a provider's CLI (`wardian_harness.providers.cli.find_cli`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from wardian_harness.providers.cli import CliNotFound, find_cli

pytestmark = pytest.mark.fast


def _cli(path: Path, version: str, runs: Path) -> None:
    """A CLI that prints `version` and counts its runs in `runs`."""
    path.write_text(f"#!/bin/sh\necho run >> '{runs}'\necho '{version}'\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_a_cli_prints_its_version_once_per_build(tmp_path: Path) -> None:
    """Each world of the tests looks its CLI up, and `opencode --version` alone takes a second of CPU: the version is
    asked once, and again only when the executable was replaced (its time or size changed)."""
    cli, runs = tmp_path / "tool", tmp_path / "runs"
    _cli(cli, "1.2.3", runs)
    env = {"WARDIAN_TOOL": str(cli)}
    assert [str(find_cli("tool", "WARDIAN_TOOL", CliNotFound, env).version) for _ in range(3)] == ["1.2.3"] * 3
    assert runs.read_text(encoding="utf-8").count("run") == 1
    _cli(cli, "1.2.40", runs)  # an upgrade in place
    before = cli.stat().st_mtime_ns
    os.utime(cli, ns=(before, before + 1_000_000))  # a later time, however coarse the file system's clock
    assert str(find_cli("tool", "WARDIAN_TOOL", CliNotFound, env).version) == "1.2.40"
    assert runs.read_text(encoding="utf-8").count("run") == 2
