"""The harness's Claude Code pieces: pointing an agent at the scripted model, finding the CLI, reading a
transcript, the teams `WARDIAN_E2E_MESSAGING_V2_PROVIDERS` and `wardian demo --providers` take, and reading Claude
Code's tool calls out of Messages requests for the evidence report."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest

from wardian_harness.acceptance.report import tool_calls
from wardian_harness.acceptance.settings import Settings, parse_providers
from wardian_harness.providers.claude_home import (
    DUMMY_KEY,
    ClaudeNotFound,
    ScriptedClaude,
    claude_overrides,
    find_claude,
    transcript_binding,
)

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[3]


def test_the_base_url_is_the_agents_script_without_v1_and_the_key_a_dummy() -> None:
    config = claude_overrides(ScriptedClaude("http://127.0.0.1:4321/agents/lead/v1"))
    assert config == ['env.ANTHROPIC_BASE_URL="http://127.0.0.1:4321/agents/lead"',
                      f'env.ANTHROPIC_API_KEY="{DUMMY_KEY}"']
    assert claude_overrides(ScriptedClaude("http://h/agents/x/v1", model="claude-haiku-5"))[-1] == \
        'model="claude-haiku-5"'


def test_find_claude_takes_wardian_claude_then_the_pinned_cli(tmp_path: Path) -> None:
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\necho '9.9.9 (Claude Code)'\n", encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert str(find_claude({"WARDIAN_CLAUDE": str(fake)}).version) == "9.9.9"
    with pytest.raises(ClaudeNotFound):
        find_claude({"WARDIAN_CLAUDE": str(tmp_path / "missing")})
    with pytest.raises(ClaudeNotFound):
        find_claude({"PATH": ""}, repo_root=tmp_path)
    if (REPO / "node_modules" / ".bin" / "claude").exists():
        assert str(find_claude({"PATH": ""}).version) == "2.1.328"


def test_a_binding_is_checked_against_the_sessions_transcript(tmp_path: Path) -> None:
    session, delivered, folded = "5b1d", "0c6e-delivered", "77aa-folded"
    transcript = tmp_path / "config" / "projects" / "-srv-ws" / f"{session}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("\n".join(json.dumps(e) for e in [
        {"type": "queue-operation", "operation": "enqueue"},
        {"type": "user", "uuid": delivered, "sessionId": session,
         "message": {"role": "user", "content": "<wardian_task_delivery> ask_1 ..."}},
        {"type": "attachment", "uuid": "x1", "sessionId": session,
         "attachment": {"type": "queued_command", "source_uuid": folded, "prompt": "... ask_2 ..."}},
        {"type": "user", "uuid": "9f00-foreign", "sessionId": "another", "message": {"content": "ask_5"}},
    ]) + "\n{\"partial", encoding="utf-8")
    found = transcript_binding(tmp_path, "ask_1", session, delivered)
    assert found["in_transcript"] is True
    assert found["holds_request"] is True
    assert found["transcript"] == str(transcript)
    assert found["transcript_sha256"] == hashlib.sha256(transcript.read_bytes()).hexdigest()
    folded_binding = transcript_binding(tmp_path, "ask_2", session, folded)
    assert (folded_binding["in_transcript"], folded_binding["holds_request"]) == (True, True)
    # The uuid is there, but its entry carries another request, or belongs to another session.
    assert transcript_binding(tmp_path, "ask_9", session, delivered)["holds_request"] is False
    assert transcript_binding(tmp_path, "ask_5", session, "9f00-foreign")["holds_request"] is False
    assert transcript_binding(tmp_path, "ask_3", session, "never-sent")["in_transcript"] is False
    assert transcript_binding(tmp_path, "ask_4", "other-session", delivered)["transcript"] is None


def test_claude_teams_run_in_background_on_the_scripted_model_with_the_senders_grant() -> None:
    for team in ("claude,codex", "codex,claude", "claude,opencode", "claude,claude"):
        lead, worker = parse_providers(team)
        settings = Settings.from_env({"WARDIAN_E2E_MESSAGING_V2_PROVIDERS": team})
        assert settings.providers == (lead, worker)
    settings = Settings.from_env({"WARDIAN_E2E_MESSAGING_V2_PROVIDERS": "claude,opencode"})
    assert settings.grants("lead") == ("followup_task",)  # Claude Code asks before ungranted tools, as Codex
    assert settings.grants("worker") == ()


def test_tool_calls_reads_claude_codes_tool_use_and_tool_result_blocks() -> None:
    body = {"messages": [
        {"role": "user", "content": "do it"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "ToolSearch", "input": {"query": "select:x"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Tool loaded."}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "asking"},
            {"type": "tool_use", "id": "toolu_2", "name": "mcp__wardian__followup_task",
             "input": {"target": "worker", "message": "hi"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2",
                                      "content": [{"type": "text", "text": '{"request_id":"ask_1"}'}]}]},
    ]}
    calls = tool_calls([body])
    assert [(c["namespace"], c["name"]) for c in calls] == [(None, "ToolSearch"), ("mcp__wardian", "followup_task")]
    assert json.loads(calls[1]["arguments"]) == {"target": "worker", "message": "hi"}
    assert calls[1]["output"] == '{"request_id":"ask_1"}'
