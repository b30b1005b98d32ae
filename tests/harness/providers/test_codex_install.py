"""Codex discovery and version parsing (docs/guide/native-acceptance.md); fake executables stand in for Codex here."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from wardian_harness.providers.codex_install import (
    EXECUTABLE_ENV,
    EXPECTED_VERSION_ENV,
    CodexInstall,
    CodexNotFound,
    CodexVersion,
    CodexVersionMismatch,
    CodexVersionUnreadable,
    codex_version,
    discover_codex,
    find_codex,
)

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def fake_codex(path: Path, output: str = "codex-cli 0.171.0", exit_code: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{output}'\nexit {exit_code}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize(("text", "expected"), [
    ("codex-cli 0.171.0", CodexVersion(0, 171, 0)),
    ("codex-cli 0.154.0-alpha.6\n", CodexVersion(0, 154, 0, ("alpha", 6))),
    ("v1.2.3+build.5", CodexVersion(1, 2, 3)),
    ("0.159.2", CodexVersion(0, 159, 2)),
])
def test_a_version_is_read_from_codex_version_output(text: str, expected: CodexVersion) -> None:
    """`codex --version` prints `codex-cli X.Y.Z[-pre]` (docs/providers/codex.md#versions)."""
    assert CodexVersion.parse(text) == expected


def test_versions_order_by_semver_precedence_with_pre_releases_below_their_release() -> None:
    """semver.org, rule 11; VER-2's exception 0.154.0-alpha.6 must sort below 0.154.0 and above 0.153.9."""
    ordered = ["0.153.9", "0.154.0-alpha.2", "0.154.0-alpha.6", "0.154.0-alpha.10", "0.154.0-beta",
               "0.154.0", "0.159.2", "0.171.0", "1.0.0"]
    versions = [CodexVersion.parse(v) for v in ordered]
    assert sorted(reversed(versions)) == versions
    assert [str(v) for v in versions] == ordered


def test_text_without_a_version_is_refused() -> None:
    with pytest.raises(ValueError, match="no version"):
        CodexVersion.parse("codex-cli dev")


def test_the_configured_executable_wins(tmp_path: Path) -> None:
    """WARDIAN_E2E_CODEX_EXECUTABLE comes before node_modules and PATH."""
    configured = fake_codex(tmp_path / "elsewhere" / "codex")
    fake_codex(tmp_path / "repo" / "node_modules" / ".bin" / "codex")
    found = find_codex(env={EXECUTABLE_ENV: str(configured), "PATH": ""}, repo_root=tmp_path / "repo")
    assert found == configured


def test_a_configured_executable_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    """A typo in the variable must not silently fall back to another Codex."""
    fake_codex(tmp_path / "repo" / "node_modules" / ".bin" / "codex")
    with pytest.raises(CodexNotFound):
        find_codex(env={EXECUTABLE_ENV: str(tmp_path / "missing")}, repo_root=tmp_path / "repo")


def test_node_modules_comes_before_path(tmp_path: Path) -> None:
    local = fake_codex(tmp_path / "repo" / "node_modules" / ".bin" / "codex")
    fake_codex(tmp_path / "bin" / "codex")
    assert find_codex(env={"PATH": str(tmp_path / "bin")}, repo_root=tmp_path / "repo") == local


def test_path_is_the_last_resort(tmp_path: Path) -> None:
    on_path = fake_codex(tmp_path / "bin" / "codex")
    assert find_codex(env={"PATH": str(tmp_path / "bin")}, repo_root=tmp_path / "repo") == on_path


def test_nothing_found_names_every_place_tried(tmp_path: Path) -> None:
    with pytest.raises(CodexNotFound) as caught:
        find_codex(env={"PATH": str(tmp_path)}, repo_root=tmp_path / "repo")
    assert "codex on PATH" in caught.value.tried


def test_discovery_reports_the_version(tmp_path: Path) -> None:
    fake_codex(tmp_path / "bin" / "codex", "codex-cli 0.154.0-alpha.6")
    install = discover_codex(env={"PATH": str(tmp_path / "bin")}, repo_root=tmp_path / "repo")
    assert install.version == CodexVersion(0, 154, 0, ("alpha", 6))
    assert install.version_output == "codex-cli 0.154.0-alpha.6"


def test_a_different_version_than_expected_is_an_error(tmp_path: Path) -> None:
    """WARDIAN_E2E_CODEX_EXPECTED_VERSION pins the exact version (docs/guide/native-acceptance.md)."""
    fake_codex(tmp_path / "bin" / "codex", "codex-cli 0.159.2")
    env = {"PATH": str(tmp_path / "bin"), EXPECTED_VERSION_ENV: "0.171.0"}
    with pytest.raises(CodexVersionMismatch) as caught:
        discover_codex(env=env, repo_root=tmp_path / "repo")
    assert (caught.value.found, caught.value.expected) == (CodexVersion(0, 159, 2), CodexVersion(0, 171, 0))


def test_the_expected_version_matches_with_or_without_the_cli_prefix(tmp_path: Path) -> None:
    fake_codex(tmp_path / "bin" / "codex", "codex-cli 0.171.0")
    env = {"PATH": str(tmp_path / "bin"), EXPECTED_VERSION_ENV: "codex-cli 0.171.0"}
    assert discover_codex(env=env, repo_root=tmp_path / "repo").version == CodexVersion(0, 171, 0)


@pytest.mark.parametrize(("output", "exit_code"), [("codex-cli dev", 0), ("codex-cli 0.171.0", 3)])
def test_an_unreadable_version_is_an_error(tmp_path: Path, output: str, exit_code: int) -> None:
    codex = fake_codex(tmp_path / "codex", output, exit_code)
    with pytest.raises(CodexVersionUnreadable):
        codex_version(codex)


@pytest.mark.codex
def test_the_real_codex_reports_a_parsable_version(codex: CodexInstall) -> None:
    """The discovered real binary (fixture `codex`) prints a version this module reads."""
    assert codex.version >= CodexVersion(0, 154, 0, ("alpha", 6))
