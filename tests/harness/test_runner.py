"""harness/runner.py (`run-native-e2e`): clear, non-zero exits before anything starts when Codex is unusable."""

from __future__ import annotations

import pytest

from wardian_harness import runner


def test_a_missing_codex_exits_3_with_a_clear_message(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #5: run-native-e2e exits non-zero with a clear message when Codex is missing."""
    monkeypatch.setenv("WARDIAN_E2E_CODEX_EXECUTABLE", "/nonexistent/codex")
    assert runner.main([]) == runner.EXIT_CODEX
    assert "WARDIAN_E2E_CODEX_EXECUTABLE=/nonexistent/codex (no such file)" in capsys.readouterr().err


def test_a_wrong_codex_version_exits_3(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Seed: WARDIAN_E2E_CODEX_EXPECTED_VERSION is checked before the run."""
    monkeypatch.delenv("WARDIAN_E2E_CODEX_EXECUTABLE", raising=False)
    monkeypatch.setenv("WARDIAN_E2E_CODEX_EXPECTED_VERSION", "0.0.1")
    from tests.codex.conftest import codex_or_skip

    codex_or_skip()
    assert runner.main([]) == runner.EXIT_CODEX
    assert "0.0.1" in capsys.readouterr().err


def test_bad_settings_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARDIAN_E2E_MESSAGING_V2_MODE", "sideways")
    assert runner.main([]) == runner.EXIT_SETTINGS
    monkeypatch.setenv("WARDIAN_E2E_MESSAGING_V2_MODE", "background")
    monkeypatch.setenv("WARDIAN_E2E_REAL_MESSAGING_V2", "1")
    monkeypatch.delenv("WARDIAN_E2E_CODEX_AUTH_HOME", raising=False)
    assert runner.main([]) == runner.EXIT_SETTINGS
