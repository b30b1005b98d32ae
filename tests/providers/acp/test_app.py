"""ACP agents (Qwen Code, Gemini CLI) driven by a real `wardian app run` home (docs/guide/acp.md): the app starts
the agent's CLI in ACP mode, gives it wardian's MCP server in `session/new`, waits for that server to connect, and
maps each task to one `session/prompt` whose `stopReason` becomes the reply. Each test runs on both agents."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.providers.acp.conftest import AcpApp, collect, settle, state_of
from wardian import errors
from wardian_harness.models.scripted_model import Hold, HttpError, Message, ToolCall


def test_information_never_starts_a_turn_and_a_task_is_one_prompt_whose_end_turn_text_is_the_reply(
        acp_app: AcpApp) -> None:
    """One agent start for both: information waits in the mailbox and starts no turn; then a task is one prompt, and
    its end-turn text is the reply."""
    world = acp_app
    _, lead, _ = world.agent("lead", start=False)
    _, worker, script = world.agent("worker")
    sent = world.app.call("message/send", {"session": lead, "target": "worker", "message": "FYI: the build is green"})
    assert sent["delivery"] == "admitted"
    (record,) = world.app.records_for(worker)
    assert (record["id"], record["text"]) == (sent["interaction_id"], "FYI: the build is green")
    assert script.requests == []
    assert world.row("worker")["status"] == "idle"
    script.add(ToolCall("list_agents", {}), Message("I see my peers. Done."))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "Look around."})
    (reply,) = world.app.records_for(lead)
    assert (reply["kind"], reply["status"], reply["request_id"], reply["text"]) == (
        "reply", "done", task["request_id"], "I see my peers. Done.")
    prompts = [r for r in script.requests if r.answered_by != "side"]
    assert task["request_id"] in json.dumps(prompts[0].body)
    outputs = [o for r in script.requests for o in r.function_call_outputs() if o.name == "list_agents"]
    assert outputs
    assert '"lead"' in outputs[0].text


def test_a_task_for_a_busy_agent_waits_for_the_turn_to_end_and_is_never_a_second_prompt(acp_app: AcpApp) -> None:
    """A second `session/prompt` would pre-empt the running turn (docs/guide/acp.md): the second task waits (on Qwen
    Code in the steering queue, for a tool boundary this turn never reaches; taken back when the turn ends)."""
    world = acp_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("first", text="first done")
    script.add(hold, Message("second done"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "first"})
    hold.wait_started(120)
    world.wait_status("worker", "active")
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "second"})
    assert state_of(world, second["request_id"]) in ("pending", "claimed")
    assert len([r for r in script.requests if r.answered_by != "side"]) == 1
    hold.release()
    got = {r["request_id"]: (r["status"], r["text"]) for r in collect(world, lead, 2)}
    assert got == {first["request_id"]: ("done", "first done"), second["request_id"]: ("done", "second done")}


def test_an_interrupt_cancels_the_exact_turn_and_the_requester_gets_a_blocked_notice(acp_app: AcpApp) -> None:
    world = acp_app
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


def test_after_an_app_restart_the_agent_loads_its_session_and_the_model_sees_the_history(acp_app: AcpApp) -> None:
    """Qwen Code loads its session (`session/load`) and replays it to the model. Gemini CLI 0.61.0 does too when it
    has written the turn to its chat file, which it often had not before it exited here; it then answers
    `session/load` with "No previous sessions found for this project", and the app starts a new session and records
    the replacement (docs/guide/acp.md#what-is-verified)."""
    world = acp_app
    _, lead, _ = world.agent("lead", start=False)
    worker, _, script = world.agent("worker")
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
    assert facts["claim_generation"] == 2
    if world.provider == "gemini" and facts["thread_id"] != session:
        managed = world.app.call("agent/list")["managed"][worker["uuid"]]
        assert (managed["previous_thread_id"], managed["thread_id"]) == (session, facts["thread_id"])
        return
    assert facts["thread_id"] == session
    history = json.dumps(script.requests[-1].body, ensure_ascii=False)
    assert "Remember a code word." in history
    assert "The code word is tangerine." in history


def test_a_wardian_tool_runs_only_when_granted_and_an_ungranted_one_is_refused(acp_app: AcpApp) -> None:
    """`session/request_permission` for wardian's tools is answered from the agent's `--approve-tools`: a granted
    tool runs; an ungranted one is rejected. Qwen Code then ends the turn (its task gets a `blocked` notice); Gemini
    CLI tells the model the call was refused and the turn goes on to its answer."""
    world = acp_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker", approve=["send_message"])
    _, _, other = world.agent("other", approve=[])
    script.add(ToolCall("send_message", {"target": "lead", "message": "hello from worker"}), Message("sent"))
    other.add(ToolCall("send_message", {"target": "lead", "message": "hello from other"}), Message("tried"))
    granted = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "greet the lead"})
    refused = world.app.call("task/followup", {"session": lead, "target": "other", "message": "greet the lead"})
    got = {(r["request_id"], r["kind"], r["status"], r["text"] if r["kind"] != "notice" else "")
           for r in collect(world, lead, 3)}
    ending = ("notice", "blocked", "") if world.provider == "qwen" else ("reply", "done", "tried")
    assert got == {(None, "information", None, "hello from worker"),
                   (granted["request_id"], "reply", "done", "sent"), (refused["request_id"], *ending)}
    outputs = [o.text for r in other.requests for o in r.function_call_outputs() if o.name == "send_message"]
    assert not any("interaction_id" in text for text in outputs)  # the tool never ran


def test_a_failed_model_request_fails_the_task_with_the_reason(acp_app: AcpApp) -> None:
    world = acp_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(*[HttpError(400, "scripted refusal of this request")] * 8)
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "fail please"})
    (notice,) = world.app.records_for(lead)
    assert (notice["request_id"], notice["status"]) == (task["request_id"], "failed")


def test_a_prompt_whose_agent_was_killed_mid_turn_stays_uncertain_and_is_never_resent(acp_app: AcpApp) -> None:
    """Durable and exact (docs/reliability.md): the prompt was written, its answer never came; the app marks the
    task uncertain, never sends it again, and the agent's next start serves the next task on the same session."""
    world = acp_app
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker")
    hold = Hold("working")
    script.add(hold, Message("the next task's answer"))
    lost = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "doomed"})
    hold.wait_started(120)
    world.wait_status("worker", "active")
    pid = int(world.app.home.provider_pid_path(world.provider, agent["uuid"]).read_text())
    os.killpg(pid, signal.SIGKILL)
    for _ in range(2400):
        if state_of(world, lost["request_id"]) == "uncertain":
            break
        settle()
    assert state_of(world, lost["request_id"]) == "uncertain"
    world.start("worker")
    after = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "next"})
    assert [(r["request_id"], r["text"]) for r in world.app.records_for(lead)] == [
        (after["request_id"], "the next task's answer")]
    first, last = (json.dumps(r.body) for r in (script.requests[0], script.requests[-1]))
    assert first.count(lost["request_id"]) == 1
    # At most in the loaded history (whether Qwen Code wrote the prompt before the kill varies): never resent.
    assert last.count(lost["request_id"]) <= 1
    assert after["request_id"] in last
    facts = [world.app.call("request/show", {"id": t["request_id"]})["task"]["facts"] for t in (lost, after)]
    if facts[1]["thread_id"] != facts[0]["thread_id"]:
        # Qwen Code had not saved the session before the kill: its load failed, and the replacement is recorded.
        managed = world.app.call("agent/list")["managed"][agent["uuid"]]
        assert (managed["previous_thread_id"], managed["thread_id"]) == (facts[0]["thread_id"],
                                                                         facts[1]["thread_id"])
    assert state_of(world, lost["request_id"]) == "uncertain"
