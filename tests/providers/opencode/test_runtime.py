"""OpenCode agents driven by the app (docs/providers/opencode.md): the real `opencode serve` on the scripted model's
chat dialect."""

from __future__ import annotations

import threading
from typing import Any

import psutil

from tests.providers.opencode.conftest import MixedWorld
from wardian_harness.models.scripted_model import Hold, Message


def records_for(world: MixedWorld, token: str, rounds: int = 600) -> list[dict[str, Any]]:
    """Wait (bounded, on the mailbox) for records of the caller, acknowledge them, and return them."""
    return world.app.records_for(token, rounds)


def test_an_idle_agent_takes_information_without_a_model_request_answers_a_task_and_stops_leaving_no_process(
        mixed_world: MixedWorld) -> None:
    """One agent start for three facts. DLV-1: information for an idle OpenCode agent is a `noReply` message: receipt
    provider_visible, no model request (the scripted model's log proves it), off the receive path, and in the
    history of the next turn. DLV-2, DLV-9: a task for the idle agent is a prompt_async with a structured
    wardian_task_delivery part under the msg_ id the app chose and persisted; the loop's final assistant text comes
    back as reply `done`. A stop then leaves none of the agent's processes."""
    world = mixed_world
    _, lead, _ = world.agent("lead", start=False)
    _, worker, script = world.agent("worker")
    children = {p.pid for p in psutil.Process(world.app.proc.pid).children(recursive=True)}
    assert children, "opencode serve is not a child of the app"
    receipt = world.app.call("message/send", {"session": lead, "target": "worker", "message": "FYI: main is green"})
    assert receipt["delivery"] == "provider_visible"
    assert script.requests == []
    waited = world.app.call("mailbox/wait", {"session": worker, "timeout_ms": 0})
    assert waited["wake_reason"] == "provider_context_available"
    assert world.app.call("mailbox/receive", {"session": worker})["records"] == []
    script.add(Message("The answer is 42."))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "What is 6 x 7?"})
    replies = records_for(world, lead)
    assert [(r["kind"], r["status"], r["request_id"], r["text"]) for r in replies] == [
        ("reply", "done", task["request_id"], "The answer is 42.")]
    story = world.app.call("request/show", {"id": task["request_id"]})
    message_id = story["task"]["provider_message_id"]
    assert message_id.startswith("msg_")
    assert story["task"]["facts"]["turn_id"] == message_id
    assert story["task"]["facts"]["thread_id"].startswith("ses_")
    sent = script.requests[0].user_texts()
    assert any("wardian_task_delivery" in t and "What is 6 x 7?" in t and task["request_id"] in t for t in sent)
    assert any("wardian_inbox_delivery" in t and "FYI: main is green" in t for t in sent)
    assert world.app.call("agent/stop", {"agent": "worker"}, timeout_s=60)["stopped"] is True
    assert not [p for p in psutil.Process(world.app.proc.pid).children(recursive=True) if p.pid in children]


def test_a_task_for_a_busy_agent_waits_and_gets_its_own_turn(mixed_world: MixedWorld) -> None:
    """DLV-2: OpenCode has no turn-fenced steer: a task admitted while a loop runs waits for session.idle and then
    starts its own turn (its own msg_, its own reply)."""
    world = mixed_world
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("first", text="first answer")
    script.add(hold, Message("second answer"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "first"})
    hold.wait_started(120)
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "second"})
    assert world.app.call("request/show", {"id": second["request_id"]})["task"]["facts"]["state"] == "pending"
    assert len(script.requests) == 1
    hold.release()
    got: dict[str, str] = {}
    while len(got) < 2:
        for r in records_for(world, lead):
            got[r["request_id"]] = r["text"]
    assert got == {first["request_id"]: "first answer", second["request_id"]: "second answer"}
    turns = {world.app.call("request/show", {"id": rid})["task"]["facts"]["turn_id"] for rid in got}
    assert len(turns) == 2
    assert "second" not in " ".join(script.requests[0].user_texts())  # not folded into the first loop


def test_an_interrupt_aborts_the_exact_loop_and_the_requester_gets_a_blocked_notice(mixed_world: MixedWorld) -> None:
    world = mixed_world
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("long work")
    script.add(hold)
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "long"})
    hold.wait_started(120)
    turn_id = wait_active(world, "worker")
    result = world.app.call("agent/interrupt", {"session": lead, "target": "worker"})
    assert result["turn_id"] == turn_id
    notices = records_for(world, lead)
    assert [(r["kind"], r["status"], r["request_id"], r["sender_kind"]) for r in notices] == [
        ("notice", "blocked", task["request_id"], "wardian")]
    assert hold.wait_finished() == "disconnected"


def settle() -> None:
    """The interval of a bounded poll (60 s at most over 1,200 rounds), not a synchronisation point."""
    threading.Event().wait(0.05)


def wait_active(world: MixedWorld, name: str) -> str:
    for _ in range(1200):
        row = next(a for a in world.app.call("agent/list")["agents"] if a["name"] == name)
        if row["status"] == "active" and row["active_turn_id"]:
            return str(row["active_turn_id"])
        settle()
    raise AssertionError(f"{name} never became active")


def test_a_new_generation_resumes_the_same_session_and_recalls_earlier_results(mixed_world: MixedWorld) -> None:
    """Restart: the next start (after the app restarted) resumes the agent's one session; the earlier answer is
    in the history the model is given."""
    world = mixed_world
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(Message("The code word is tangerine."))
    world.app.call("task/followup", {"session": lead, "target": "worker", "message": "Remember a code word."})
    records_for(world, lead)
    first = world.app.call("request/show", {"id": records_for_ids(world)[0]})["task"]["facts"]["thread_id"]
    world.restart_app()
    script.add(Message("It was tangerine."))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "What was it?"})
    replies = records_for(world, lead)
    assert [r["text"] for r in replies] == ["It was tangerine."]
    facts = world.app.call("request/show", {"id": task["request_id"]})["task"]["facts"]
    assert facts["thread_id"] == first
    assert facts["claim_generation"] == 2
    assert any("tangerine" in str(m.get("content")) for m in script.requests[-1].body["messages"]
               if m.get("role") == "assistant")


def records_for_ids(world: MixedWorld) -> list[str]:
    return [r["id"] for r in world.app.call("mailbox/records", {"limit": 100})["records"] if r["kind"] == "task"]
