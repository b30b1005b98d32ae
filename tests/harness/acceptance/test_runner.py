"""harness/runner.py (`run-native-e2e`): clear, non-zero exits before anything starts when Codex is unusable."""

from __future__ import annotations

import pytest

from wardian_harness.acceptance import runner


def test_a_missing_codex_exits_3_with_a_clear_message(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """ACC-3: run-native-e2e exits non-zero with a clear message when Codex is missing."""
    monkeypatch.setenv("WARDIAN_E2E_CODEX_EXECUTABLE", "/nonexistent/codex")
    assert runner.main([]) == runner.EXIT_CODEX
    assert "WARDIAN_E2E_CODEX_EXECUTABLE=/nonexistent/codex (no such file)" in capsys.readouterr().err


def test_a_wrong_codex_version_exits_3(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """ACC-4: WARDIAN_E2E_CODEX_EXPECTED_VERSION is checked before the run."""
    monkeypatch.delenv("WARDIAN_E2E_CODEX_EXECUTABLE", raising=False)
    monkeypatch.setenv("WARDIAN_E2E_CODEX_EXPECTED_VERSION", "0.0.1")
    from tests.providers.codex.conftest import codex_or_skip

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


@pytest.mark.parametrize(("env", "says"), [
    ({"WARDIAN_E2E_MESSAGING_V2_PROVIDERS": "codex,gemini"}, "allowed: codex, opencode, claude"),
    ({"WARDIAN_E2E_MESSAGING_V2_PROVIDERS": "opencode"}, "the lead's and the worker's provider"),
    ({"WARDIAN_E2E_MESSAGING_V2_PROVIDERS": "codex,opencode", "WARDIAN_E2E_MESSAGING_V2_MODE": "attached_tui"},
     "needs WARDIAN_E2E_MESSAGING_V2_MODE=background"),
    ({"WARDIAN_E2E_MESSAGING_V2_PROVIDERS": "opencode,codex", "WARDIAN_E2E_REAL_MESSAGING_V2": "1",
      "WARDIAN_E2E_CODEX_AUTH_HOME": "/nonexistent"}, "OpenCode agents run on the scripted model"),
    ({"WARDIAN_E2E_MESSAGING_V2_PROVIDERS": "claude,codex", "WARDIAN_E2E_MESSAGING_V2_MODE": "attached_tui"},
     "Claude Code agents have no attached TUI"),
    ({"WARDIAN_E2E_MESSAGING_V2_PROVIDERS": "codex,claude", "WARDIAN_E2E_REAL_MESSAGING_V2": "1",
      "WARDIAN_E2E_CODEX_AUTH_HOME": "/nonexistent"}, "Claude Code agents run on the scripted model"),
])
def test_a_team_the_run_cannot_do_exits_2_and_says_why(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], env: dict[str, str],
                                                       says: str) -> None:
    """docs/guide/native-acceptance.md: WARDIAN_E2E_MESSAGING_V2_PROVIDERS=lead,worker names two providers; OpenCode
    agents run in background mode on the scripted model."""
    for name in ("WARDIAN_E2E_MESSAGING_V2_MODE", "WARDIAN_E2E_REAL_MESSAGING_V2"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert runner.main([]) == runner.EXIT_SETTINGS
    assert says in capsys.readouterr().err


def test_a_missing_opencode_exits_3_naming_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from tests.providers.codex.conftest import codex_or_skip

    codex_or_skip()
    monkeypatch.delenv("WARDIAN_E2E_MESSAGING_V2_MODE", raising=False)
    monkeypatch.delenv("WARDIAN_E2E_REAL_MESSAGING_V2", raising=False)
    monkeypatch.setenv("WARDIAN_E2E_MESSAGING_V2_PROVIDERS", "codex,opencode")
    monkeypatch.setenv("WARDIAN_OPENCODE", "/nonexistent/opencode")
    assert runner.main([]) == runner.EXIT_CODEX
    assert "WARDIAN_OPENCODE" in capsys.readouterr().err
