"""Tool grants are kept with an app-owned Codex agent: an app restart starts it again with the tools it was granted,
and a later start with other grants replaces them (docs/guide/codex.md#tool-approval). Real Codex, scripted model."""

from __future__ import annotations

from typing import Any

import pytest

from tests.providers.codex.conftest import CodexWorld
from tests.providers.codex.test_runtime import agent_row, wait_reply
from wardian_harness.models.scripted_model import AgentScript, Message, ToolCall

pytestmark = pytest.mark.codex

# Codex's refusal of an MCP call it would have to ask about under approval_policy = "never" (docs/providers/codex.md).
APPROVAL_REFUSAL = "requires approval"


def probe_turn(world: CodexWorld, script: AgentScript, token: str, word: str) -> tuple[str, str]:
    """One task whose turn calls send_message (to bob) and followup_task (to bob); returns each call's output."""
    script.add(ToolCall("send_message", {"target": "bob", "message": f"note {word}"}),
               ToolCall("followup_task", {"target": "bob", "message": f"task {word}"}),
               Message(f"probed {word}", phase="final_answer"))
    before = len(script.requests)
    task = world.app.call("task/followup", {"session": token, "target": "lead", "message": f"probe {word}"})
    replies = wait_reply(world, token)
    assert [(r["request_id"], r["status"], r["text"]) for r in replies] == [
        (task["request_id"], "done", f"probed {word}")]
    after_send, after_followup = script.requests[before + 1], script.requests[before + 2]
    return after_send.function_call_outputs()[-1].text, after_followup.function_call_outputs()[-1].text


def grants(world: CodexWorld, name: str) -> list[str]:
    listing = world.app.call("agent/list", {})
    [uuid] = [a["uuid"] for a in listing["agents"] if a["name"] == name]
    return list(listing["managed"][uuid]["approve_tools"])


def texts_to_bob(world: CodexWorld) -> list[str]:
    records: list[dict[str, Any]] = world.app.call("mailbox/records", {"limit": 1000})["records"]
    return [r["text"] for r in records if r["recipient"]["name"] == "bob" and r["kind"] == "information"]


def test_grants_survive_an_app_restart_and_a_new_start_replaces_them(codex_world: CodexWorld) -> None:
    _, _, script = codex_world.agent("lead", approve=("send_message",))
    codex_world.app.add_agent("bob")
    _, human = codex_world.app.add_agent("human")

    sent, followed = probe_turn(codex_world, script, human, "one")
    assert APPROVAL_REFUSAL not in sent
    assert APPROVAL_REFUSAL in followed
    before = agent_row(codex_world, "lead")
    assert grants(codex_world, "lead") == ["send_message"]

    # The app restarts: it starts the agent it was running again, with the grants it was given.
    app = codex_world.restart_app()
    for _ in range(500):
        row = agent_row(codex_world, "lead")
        if row["status"] == "idle" and row["generation"] > before["generation"]:
            break
        app.call("mailbox/wait", {"session": human, "timeout_ms": 20})
    assert grants(codex_world, "lead") == ["send_message"]
    sent, followed = probe_turn(codex_world, script, human, "two")
    assert APPROVAL_REFUSAL not in sent
    assert APPROVAL_REFUSAL in followed

    # A start with other grants replaces them: send_message is no longer granted, followup_task is.
    codex_world.start("lead", script, ("followup_task",))
    sent, followed = probe_turn(codex_world, script, human, "three")
    assert APPROVAL_REFUSAL in sent
    assert APPROVAL_REFUSAL not in followed
    assert texts_to_bob(codex_world) == ["note one", "note two"]
