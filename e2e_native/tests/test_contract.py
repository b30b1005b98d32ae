"""Inert contract tests of the native acceptance: they run on a direct `pytest e2e_native`, start no Codex."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e_native import conftest
from wardian_harness.acceptance.report import SecretInReport, write_report
from wardian_harness.acceptance.settings import SIX_TOOLS, Settings


def test_the_acceptance_runs_only_when_opted_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """ACC-3: direct invocation is only for the inert contract tests, with the real-provider opt-in unset."""
    monkeypatch.delenv("WARDIAN_E2E_REAL_MESSAGING_V2", raising=False)
    monkeypatch.delenv(conftest.RUNNER_SCRIPTED_ENV, raising=False)
    assert conftest.acceptance_enabled() is False
    monkeypatch.setenv("WARDIAN_E2E_REAL_MESSAGING_V2", "1")
    assert conftest.acceptance_enabled() is True


def test_settings_read_the_seeds_variables() -> None:
    """ACC-3, ACC-5, ACC-6, ACC-7: the runner honours the mode, lifecycle, trust and approval variables."""
    env = {"WARDIAN_E2E_MESSAGING_V2_MODE": "attached_tui", "WARDIAN_E2E_MESSAGING_V2_LIFECYCLE": "1",
           "WARDIAN_E2E_MESSAGING_V2_TRUST_FIXTURE_WORKSPACES": "0", "WARDIAN_E2E_MESSAGING_V2_APPROVE_TOOLS": "1",
           "WARDIAN_E2E_MESSAGING_CLI": "/opt/w/wardian", "WARDIAN_E2E_CODEX_AUTH_HOME": "/secret/home"}
    s = Settings.from_env(env)
    assert (s.mode, s.lifecycle, s.trust, s.approve_all, s.real) == ("attached_tui", True, False, True, False)
    assert s.cli == ("/opt/w/wardian",)
    assert s.app == s.cli  # one frozen build serves as app and CLI unless WARDIAN_NATIVE_APP says otherwise
    assert Settings.from_env({}).mode == "background"
    assert Settings.from_env({}).trust is True
    with pytest.raises(ValueError, match="MODE"):
        Settings.from_env({"WARDIAN_E2E_MESSAGING_V2_MODE": "tui"})


def test_the_grants_are_the_minimum_by_default_and_six_named_tools_on_request() -> None:
    """ACC-6: WARDIAN_E2E_MESSAGING_V2_APPROVE_TOOLS=1 grants only the six named tools; by default only the
    sender's followup_task (our choice: the one open-world call the scripted exchange makes)."""
    assert Settings().grants("lead") == ("followup_task",)
    assert Settings().grants("worker") == ()
    assert Settings(approve_all=True).grants("worker") == SIX_TOOLS
    assert len(SIX_TOOLS) == 6
    assert "interrupt_agent" not in SIX_TOOLS


def test_a_report_never_holds_authentication_material(tmp_path: Path) -> None:
    """ACC-8: authentication is never included in the report; the writer refuses and writes nothing."""
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"tokens": {"access_token": "eyJhbGciOi-very-secret-token"}}), encoding="utf-8")
    report = {"run": {"mode": "background", "codex": {"version": "0", "path": "c", "sha256": "x"}},
              "input": {"text": "hi", "counts": {"character_count": 2, "word_count_whitespace_separated": 1}},
              "note": "eyJhbGciOi-very-secret-token"}
    with pytest.raises(SecretInReport):
        write_report(report, tmp_path / "r", auth_files=[auth])
    with pytest.raises(SecretInReport):
        write_report({**report, "note": "wsn1_abc_def_ghi"}, tmp_path / "r")
    assert not (tmp_path / "r").exists()
    json_path, md_path = write_report({**report, "note": "clean"}, tmp_path / "r", auth_files=[auth])
    assert "not tokens" in md_path.read_text(encoding="utf-8")
    assert json.loads(json_path.read_text(encoding="utf-8"))["note"] == "clean"
