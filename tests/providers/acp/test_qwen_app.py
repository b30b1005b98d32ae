"""Qwen Code agents driven by a real `wardian app run` home over ACP (docs/guide/acp.md): the app starts `qwen
--acp`, gives it wardian's MCP server in `session/new`, waits for that server to connect, and maps each task to one
`session/prompt` whose `stopReason` becomes the reply."""

from __future__ import annotations

import json

import pytest

from tests.providers.acp.conftest import QwenApp, collect, state_of
from wardian import errors
from wardian_harness.models.scripted_model import Hold, HttpError, Message, ToolCall


def test_a_task_is_one_prompt_and_its_end_turn_text_is_the_reply(qwen_app: QwenApp) -> None:
    world = qwen_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(ToolCall("list_agents", {}), Message("I see my peers. Done."))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "Look around."})
    (reply,) = world.app.records_for(lead)
    assert (reply["kind"], reply["status"], reply["request_id"], reply["text"]) == (
        "reply", "done", task["request_id"], "I see my peers. Done.")
    prompts = [r for r in script.requests if r.answered_by != "side"]
    assert task["request_id"] in json.dumps(prompts[0].body["messages"])
    outputs = [o for r in script.requests for o in r.function_call_outputs() if o.name == "list_agents"]
    assert outputs
    assert '"lead"' in outputs[0].text



def test_a_task_for_a_busy_agent_waits_for_the_turn_to_end_and_is_never_a_second_prompt(qwen_app: QwenApp) -> None:
    """A second `session/prompt` would pre-empt the running turn (docs/guide/acp.md): the second task waits."""
    world = qwen_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("first", text="first done")
    script.add(hold, Message("second done"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "first"})
    hold.wait_started(120)
    world.wait_status("worker", "active")
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "second"})
    assert state_of(world, second["request_id"]) == "pending"
    assert len([r for r in script.requests if r.answered_by != "side"]) == 1
    hold.release()
    got = {r["request_id"]: (r["status"], r["text"]) for r in collect(world, lead, 2)}
    assert got == {first["request_id"]: ("done", "first done"), second["request_id"]: ("done", "second done")}


def test_information_never_starts_a_turn_and_waits_in_the_mailbox(qwen_app: QwenApp) -> None:
    world = qwen_app
    _, lead, _ = world.agent("lead", start=False)
    _, worker, script = world.agent("worker")
    sent = world.app.call("message/send", {"session": lead, "target": "worker", "message": "FYI: the build is green"})
    (record,) = world.app.records_for(worker)
    assert (record["id"], record["text"]) == (sent["interaction_id"], "FYI: the build is green")
    assert script.requests == []
    assert world.row("worker")["status"] == "idle"


def test_an_interrupt_cancels_the_exact_turn_and_the_requester_gets_a_blocked_notice(qwen_app: QwenApp) -> None:
    world = qwen_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("long work")
    script.add(hold, Message("after the interrupt"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "long"})
    hold.wait_started(120)
    turn = world.wait_status("worker", "active")["active_turn_id"]
    assert turn == world.app.call("request/show", {"id": task["request_id"]})["task"]["facts"]["turn_id"]
    receipt = world.app.call("agent/interrupt", {"session": lead, "target": "worker"})
    assert receipt["turn_id"] == turn
    (notice,) = world.app.records_for(lead)
    assert (notice["kind"], notice["status"], notice["request_id"], notice["sender_kind"]) == (
        "notice", "blocked", task["request_id"], "wardian")
    world.wait_status("worker", "idle")
    with pytest.raises(errors.WardianError) as caught:
        world.app.call("agent/interrupt", {"session": lead, "target": "worker"})
    assert caught.value.code == "not_active"
    after = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "still there?"})
    assert [(r["request_id"], r["text"]) for r in world.app.records_for(lead)] == [
        (after["request_id"], "after the interrupt")]


def test_after_an_app_restart_the_agent_loads_its_session_and_the_model_sees_the_history(qwen_app: QwenApp) -> None:
    world = qwen_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(Message("The code word is tangerine."))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "Remember a code word."})
    assert [r["text"] for r in world.app.records_for(lead)] == ["The code word is tangerine."]
    session = world.app.call("request/show", {"id": first["request_id"]})["task"]["facts"]["thread_id"]
    world.restart_app()
    script.add(Message("It was tangerine."))
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "What was it?"})
    assert [(r["request_id"], r["text"]) for r in world.app.records_for(lead)] == [
        (second["request_id"], "It was tangerine.")]
    facts = world.app.call("request/show", {"id": second["request_id"]})["task"]["facts"]
    assert (facts["thread_id"], facts["claim_generation"]) == (session, 2)
    history = json.dumps(script.requests[-1].body["messages"], ensure_ascii=False)
    assert "Remember a code word." in history
    assert "The code word is tangerine." in history


def test_a_wardian_tool_runs_only_when_granted_and_an_ungranted_one_is_refused(qwen_app: QwenApp) -> None:
    """`session/request_permission` for wardian's tools is answered from the agent's `--approve-tools`: a granted
    tool runs; an ungranted one is rejected (Qwen Code then ends the turn, so its task gets a `blocked` notice)."""
    world = qwen_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker", approve=["send_message"])
    _, _, other = world.agent("other", approve=[])
    script.add(ToolCall("send_message", {"target": "lead", "message": "hello from worker"}), Message("sent"))
    other.add(ToolCall("send_message", {"target": "lead", "message": "hello from other"}), Message("tried"))
    granted = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "greet the lead"})
    refused = world.app.call("task/followup", {"session": lead, "target": "other", "message": "greet the lead"})
    got = {(r["request_id"], r["kind"], r["status"], r["text"] if r["kind"] != "notice" else "")
           for r in collect(world, lead, 3)}
    assert got == {(None, "information", None, "hello from worker"),
                   (granted["request_id"], "reply", "done", "sent"),
                   (refused["request_id"], "notice", "blocked", "")}
    assert [o for r in other.requests for o in r.function_call_outputs() if o.name == "send_message"] == []


def test_a_failed_model_request_fails_the_task_with_the_reason(qwen_app: QwenApp) -> None:
    world = qwen_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(*[HttpError(400, "scripted refusal of this request")] * 8)
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "fail please"})
    (notice,) = world.app.records_for(lead)
    assert (notice["request_id"], notice["status"]) == (task["request_id"], "failed")
