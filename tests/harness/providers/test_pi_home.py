"""The harness's Pi pieces (docs/guide/pi.md): finding the pinned CLI, the team `wardian demo --providers` takes, and
the scripted model calling Pi's extension tools by the names Pi offers them under."""

from __future__ import annotations

import hashlib
import http.client
import json
import stat
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from wardian_harness.acceptance.settings import PROVIDERS, parse_providers
from wardian_harness.models.scripted_model import AgentScript, ScriptedModel, ToolCall
from wardian_harness.providers.pi_home import PiNotFound, find_pi, session_binding

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[3]


def test_find_pi_reads_the_version_pi_prints_on_stderr(tmp_path: Path) -> None:
    """Pi 0.73.1 prints `pi --version` on stderr, not stdout."""
    fake = tmp_path / "pi"
    fake.write_text("#!/bin/sh\necho 9.9.9 >&2\n", encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert str(find_pi({"WARDIAN_PI": str(fake)}).version) == "9.9.9"
    with pytest.raises(PiNotFound):
        find_pi({"PATH": ""}, repo_root=tmp_path)
    if (REPO / "node_modules" / ".bin" / "pi").exists():
        assert str(find_pi({"PATH": ""}).version) == "0.73.1"


@pytest.mark.parametrize("value", ["pi,codex", "codex,pi", "pi,claude"])
def test_the_demo_takes_a_team_with_a_pi_agent(value: str) -> None:
    assert parse_providers(value, PROVIDERS) == tuple(value.split(","))


def _called(model: ScriptedModel, agent: AgentScript, offered: list[str]) -> str:
    """The function name the scripted model calls in a Chat Completions answer to a request offering `offered`."""
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}],
            "tools": [{"type": "function", "function": {"name": n, "parameters": {}}} for n in offered]}
    parts = urlsplit(model.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("POST", urlsplit(agent.base_url).path + "/chat/completions", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        chunks = [json.loads(line.removeprefix("data: ")) for line in conn.getresponse().read().decode().splitlines()
                  if line.startswith("data: {")]
    finally:
        conn.close()
    (name,) = [c["function"]["name"] for chunk in chunks for choice in chunk["choices"]
               for c in choice["delta"].get("tool_calls") or []]
    return str(name)


@pytest.mark.parametrize(("offered", "called"), [
    (["read", "bash", "followup_task", "receive_messages"], "followup_task"),  # Pi: the extension's own names
    (["bash", "wardian_followup_task"], "wardian_followup_task"),  # OpenCode: <server>_<tool>
])
def test_a_wardian_tool_call_uses_the_name_the_agent_offers(offered: list[str], called: str) -> None:
    """Pi has no MCP: wardian's extension registers each tool under the MCP tool's own name (docs/guide/pi.md)."""
    with ScriptedModel() as model:
        lead = model.agent("lead", ToolCall("followup_task", {"target": "worker", "message": "hi"}))
        assert _called(model, lead, offered) == called


def test_a_tasks_binding_holds_when_a_user_message_of_its_session_file_carries_the_request(tmp_path: Path) -> None:
    """The demo's evidence: the prompt that carried a task is a user message of the session the app recorded (Pi's
    session file format: https://github.com/badlogic/pi-mono/blob/main/packages/coding-agent/docs/sessions.md)."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    entries = [{"type": "session", "id": "s1"},
               {"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": "ask_1 go"}]}},
               {"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": "ask_2"}]}}]
    path = sessions / "2026-12-05T05-00-00-000Z_s1.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries) + '{"cut', encoding="utf-8")
    found = session_binding(tmp_path, "ask_1", "s1")
    assert (found["session_file"], found["in_session"]) == (str(path), True)
    assert found["session_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert session_binding(tmp_path, "ask_2", "s1")["in_session"] is False  # only the model's own text names it
    assert session_binding(tmp_path, "ask_1", "s2") == {"request_id": "ask_1", "session_id": "s2",
                                                        "session_file": None, "session_sha256": None,
                                                        "in_session": False}
