"""Claude Code agents driven by the app (`agent/add --provider claude`, `agent/start`): the real Claude Code CLI on
the scripted model's Messages dialect, through the provider's own `prepare` (docs/providers/claude.md)."""

from __future__ import annotations

import os
import signal

import psutil

from tests.providers.claude.conftest import ClaudeApp, records_for, settle, state_of
from wardian_harness.models.scripted_model import Hold, Message, ToolCall
from wardian_harness.providers.claude_home import find_transcript, transcript_uuids


def test_an_idle_claude_agent_answers_a_task_with_its_result_under_the_uuid_the_app_chose(
        claude_app: ClaudeApp) -> None:
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker")
    script.add(Message("The answer is 42 ☃\nexactly."))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "What is 6 x 7?"})
    replies = records_for(world, lead)
    assert [(r["kind"], r["status"], r["request_id"], r["text"]) for r in replies] == [
        ("reply", "done", task["request_id"], "The answer is 42 ☃\nexactly.")]
    facts = world.app.call("request/show", {"id": task["request_id"]})["task"]
    message_id, session = facts["provider_message_id"], facts["facts"]["thread_id"]
    assert facts["facts"]["turn_id"] == message_id
    transcript = find_transcript(world.app.home.agent_dir(agent["uuid"]) / "claude", session)
    assert transcript is not None
    assert message_id in transcript_uuids(transcript)


def test_ungranted_wardian_tools_are_refused_and_granted_ones_run(claude_app: ClaudeApp) -> None:
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    world.agent("peer", start=False)
    _, _, script = world.agent("worker")
    script.add(ToolCall("list_agents", {}), ToolCall("send_message", {"target": "peer", "message": "hi"}),
               Message("tried both"))
    world.app.call("task/followup", {"session": lead, "target": "worker", "message": "look around"})
    assert [r["text"] for r in records_for(world, lead)] == ["tried both"]
    outputs = [o for o in script.requests[-1].function_call_outputs() if o.namespace == "mcp__wardian"]
    assert [o.name for o in outputs] == ["list_agents", "send_message"]
    assert "peer" in outputs[0].text
    assert "haven't granted" in outputs[1].text
    _, _, granted = world.agent("granted", approve=["send_message"])
    granted.add(ToolCall("send_message", {"target": "peer", "message": "hello peer"}), Message("sent"))
    world.app.call("task/followup", {"session": lead, "target": "granted", "message": "tell peer"})
    assert [r["text"] for r in records_for(world, lead)] == ["sent"]
    ran = [o for r in granted.requests for o in r.function_call_outputs() if o.name == "send_message"]
    assert "haven't granted" not in ran[-1].text


def test_claude_killed_mid_turn_leaves_the_task_uncertain_and_the_next_task_runs_on_a_new_process(
        claude_app: ClaudeApp) -> None:
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker")
    hold = Hold("working")
    script.add(hold, Message("fresh answer"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "doomed"})["request_id"]
    hold.wait_started(120)
    pid_path = world.app.home.provider_pid_path("claude", agent["uuid"])
    pid = int(pid_path.read_text())
    os.killpg(pid, signal.SIGKILL)
    for _ in range(1200):
        if state_of(world, first) == "uncertain":
            break
        settle()
    assert state_of(world, first) == "uncertain"
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "fresh"})["request_id"]
    assert [(r["request_id"], r["text"]) for r in records_for(world, lead)] == [(second, "fresh answer")]
    assert world.app.call("request/show", {"id": second})["task"]["facts"]["claim_generation"] == 2
    assert int(pid_path.read_text()) != pid
    last = script.requests[-1]
    assert sum("doomed" in t for t in last.user_texts()) <= 1  # in the history once, never written again
    assert state_of(world, first) == "uncertain"


def test_stopping_a_claude_agent_leaves_no_process(claude_app: ClaudeApp) -> None:
    world = claude_app
    world.agent("worker")
    children = {p.pid for p in psutil.Process(world.app.proc.pid).children(recursive=True)}
    assert children, "Claude Code is not a child of the app"
    assert world.app.call("agent/stop", {"agent": "worker"}, timeout_s=60)["stopped"] is True
    assert not [p for p in psutil.Process(world.app.proc.pid).children(recursive=True) if p.pid in children]
