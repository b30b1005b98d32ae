"""Claude Code agents driven by a real `wardian app run` home: the delivery contract proven through the running app
(the app starts Claude Code, dispatches, observes and publishes), not only on the runtime (docs/providers/claude.md).
Correlation is always read from the app's own records and facts, never by counting replies."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest

from tests.providers.claude.conftest import ClaudeApp, records_for, settle
from wardian import errors
from wardian.model import MAX_MESSAGE_BYTES
from wardian_harness.models.scripted_model import AgentScript, Hold, Message, Step, ToolCall

JsonDict = dict[str, Any]

ECHO = ToolCall("Bash", {"command": "echo tool-ran", "description": "Print a word"}, namespace=None)
_ASK = re.compile(r'\\?"request_id\\?":\s*\\?"(ask_[A-Za-z0-9_-]+)')


def asks_in_prompt(body: JsonDict) -> list[str]:
    """The request ids of the tasks in the newest user message of a Messages request (the prompt of its turn)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user" and "wardian_task_delivery" in json.dumps(message):
            return sorted(set(_ASK.findall(json.dumps(message))))
    return []


def answer_naming_its_tasks(body: JsonDict) -> Step:
    """A step answering with the request ids its turn's prompt carried: a reply proves which turn it came from."""
    return Message("answered " + " ".join(asks_in_prompt(body)))


class Gate:
    """A step that answers with `step` only once the test opens the gate (`reached`: the request came)."""

    def __init__(self, step: Step) -> None:
        self.step = step
        self.reached = threading.Event()
        self.open = threading.Event()

    def __call__(self, body: JsonDict) -> Step:
        self.reached.set()
        self.open.wait(120)
        return self.step


def collect(world: ClaudeApp, token: str, count: int) -> dict[str, dict[str, Any]]:
    """Replies and notices for the caller of `token`, by the request id they answer, until `count` arrived."""
    got: dict[str, dict[str, Any]] = {}
    while len(got) < count:
        for record in records_for(world, token):
            assert record["request_id"] not in got, f"a second answer to {record['request_id']}"
            got[record["request_id"]] = record
    return got


def row(world: ClaudeApp, name: str) -> dict[str, Any]:
    return next(a for a in world.app.call("agent/list")["agents"] if a["name"] == name)


def wait_active(world: ClaudeApp, name: str) -> str:
    for _ in range(2400):
        agent = row(world, name)
        if agent["status"] == "active" and agent["active_turn_id"]:
            return str(agent["active_turn_id"])
        settle()
    raise AssertionError(f"{name} never became active")


def wait_idle(world: ClaudeApp, name: str, script: AgentScript, served: int) -> None:
    """Until the model has answered `served` requests and the agent's turn ended (the app read its result)."""
    for _ in range(2400):
        if len(script.requests) >= served and row(world, name)["status"] != "active":
            return
        settle()
    raise AssertionError(f"{name} never went idle after {served} model requests")


def test_after_an_app_restart_the_agent_resumes_its_session_and_the_model_sees_the_history(
        claude_app: ClaudeApp) -> None:
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(Message("The code word is tangerine."))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "Remember a code word."})
    assert [r["text"] for r in records_for(world, lead)] == ["The code word is tangerine."]
    session = world.app.call("request/show", {"id": first["request_id"]})["task"]["facts"]["thread_id"]
    world.restart_app()
    script.add(Message("It was tangerine."))
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "What was it?"})
    assert [(r["request_id"], r["text"]) for r in records_for(world, lead)] == [
        (second["request_id"], "It was tangerine.")]
    facts = world.app.call("request/show", {"id": second["request_id"]})["task"]["facts"]
    assert (facts["thread_id"], facts["claim_generation"]) == (session, 2)
    history = json.dumps(script.requests[-1].body["messages"], ensure_ascii=False)
    assert "Remember a code word." in history
    assert "The code word is tangerine." in history


def test_interrupting_a_running_turn_gives_the_requester_an_attributed_blocked_notice(claude_app: ClaudeApp) -> None:
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("long work")
    script.add(hold, Message("after the interrupt"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "long"})
    hold.wait_started(120)
    turn = wait_active(world, "worker")
    assert turn == world.app.call("request/show", {"id": task["request_id"]})["task"]["facts"]["turn_id"]
    receipt = world.app.call("agent/interrupt", {"session": lead, "target": "worker"})
    assert (receipt["target"]["name"], receipt["turn_id"]) == ("worker", turn)
    (notice,) = records_for(world, lead)
    assert (notice["kind"], notice["status"], notice["request_id"], notice["sender_kind"]) == (
        "notice", "blocked", task["request_id"], "wardian")
    assert "interrupted" in notice["text"]
    assert hold.wait_finished(60) == "disconnected"
    for _ in range(2400):  # the process lives on: idle again, and an interrupt now has nothing to stop
        if row(world, "worker")["status"] == "idle":
            break
        settle()
    with pytest.raises(errors.WardianError) as caught:
        world.app.call("agent/interrupt", {"session": lead, "target": "worker"})
    assert caught.value.code == "not_active"
    after = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "still there?"})
    assert [(r["request_id"], r["text"]) for r in records_for(world, lead)] == [
        (after["request_id"], "after the interrupt")]


def test_three_tasks_queued_at_once_get_three_replies_each_from_the_turn_that_carried_it(
        claude_app: ClaudeApp) -> None:
    """The first task's turn is held while two more arrive: Claude Code runs them after it (queued together, they may
    share one turn). Each reply must come from the turn whose prompt carried its task: the model's answer names the
    request ids it was given, and each task's turn id is its own message uuid in Claude Code's result."""
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("first", text="first answer")
    script.add(hold, answer_naming_its_tasks, answer_naming_its_tasks)
    one = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "one"})["request_id"]
    hold.wait_started(120)
    wait_active(world, "worker")
    two = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "two"})["request_id"]
    three = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "three"})["request_id"]
    for _ in range(2400):  # both submitted (Claude Code queued them) before the first turn may end
        if all(world.app.call("request/show", {"id": r})["task"]["facts"]["state"] == "submitted"
               for r in (two, three)):
            break
        settle()
    hold.release()
    replies = collect(world, lead, 3)
    assert replies[one]["text"] == "first answer"
    for rid in (two, three):
        assert (replies[rid]["kind"], replies[rid]["status"]) == ("reply", "done")
        assert rid in replies[rid]["text"].split(), replies[rid]["text"]
        assert one not in replies[rid]["text"]
    facts = {r: world.app.call("request/show", {"id": r})["task"] for r in (one, two, three)}
    assert len({f["facts"]["turn_id"] for f in facts.values()}) == 3  # each its own message uuid
    assert script.exhausted_requests == []


def test_a_task_for_a_busy_agent_is_folded_into_the_running_turn_and_answered(claude_app: ClaudeApp) -> None:
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    gate = Gate(ECHO)
    script.add(gate, Message("both answered"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "first"})["request_id"]
    assert gate.reached.wait(120)
    wait_active(world, "worker")
    second = world.app.call("task/followup", {"session": lead, "target": "worker",
                                              "message": "second, mid-turn"})["request_id"]
    for _ in range(2400):
        if world.app.call("request/show", {"id": second})["task"]["facts"]["state"] == "submitted":
            break
        settle()
    gate.open.set()
    replies = collect(world, lead, 2)
    assert {r: (v["status"], v["text"]) for r, v in replies.items()} == {
        first: ("done", "both answered"), second: ("done", "both answered")}
    assert len(script.requests) == 2
    assert second in json.dumps(script.requests[1].body["messages"])
    assert second not in json.dumps(script.requests[0].body["messages"])


def test_information_makes_no_model_request_and_is_in_the_next_turn(claude_app: ClaudeApp) -> None:
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    _, worker, script = world.agent("worker")
    receipt = world.app.call("message/send", {"session": lead, "target": "worker", "message": "FYI: main is green"})
    assert receipt["delivery"] == "provider_visible"
    waited = world.app.call("mailbox/wait", {"session": worker, "timeout_ms": 0})
    assert waited["wake_reason"] == "provider_context_available"
    assert world.app.call("mailbox/receive", {"session": worker})["records"] == []
    assert row(world, "worker")["status"] == "idle"
    assert script.requests == []
    script.add(Message("noted"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "Anything new?"})
    assert [(r["request_id"], r["text"]) for r in records_for(world, lead)] == [(task["request_id"], "noted")]
    assert len(script.requests) == 1
    history = script.requests[0].user_texts()
    assert any("wardian_inbox_delivery" in t and "FYI: main is green" in t for t in history)


def test_the_attached_mode_is_unsupported_with_the_reason(claude_app: ClaudeApp) -> None:
    world = claude_app
    world.agent("worker", start=False)
    with pytest.raises(errors.WardianError) as caught:
        world.start("worker", mode="attached")
    assert caught.value.code == "unsupported"
    assert "attached mode" in caught.value.message
    assert "session" in caught.value.message  # why: a second process on the session would diverge
    assert row(world, "worker")["status"] in ("off", "registered")


def test_an_explicit_reply_committed_first_wins_over_the_turns_result(claude_app: ClaudeApp) -> None:
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker", approve=["reply"])

    def reply_first(body: JsonDict) -> Step:
        (rid,) = asks_in_prompt(body)
        return ToolCall("reply", {"request_id": rid, "status": "blocked", "message": "explicit: need the key"})

    script.add(reply_first, Message("the turn's own final text"), Message("next answer"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "open the safe"})
    (reply,) = records_for(world, lead)
    assert (reply["kind"], reply["status"], reply["request_id"], reply["text"]) == (
        "reply", "blocked", task["request_id"], "explicit: need the key")
    # The next task goes in only once the first turn ended: sent while it still runs, Claude folds it into that
    # turn, whose result then rightly answers it (docs/providers/claude.md).
    wait_idle(world, "worker", script, served=2)
    # The app observes the agent's turns in order: once the next task is answered, the first turn's own result
    # was read too, and it published nothing.
    later = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "next"})
    assert [(r["request_id"], r["text"]) for r in records_for(world, lead)] == [(later["request_id"], "next answer")]
    assert "the turn's own final text" in json.dumps(script.requests[-1].body["messages"])
    story = world.app.call("request/show", {"id": task["request_id"]})
    assert (story["answer"]["id"], story["task"]["facts"]["state"]) == (reply["id"], "completed")
    answers = [r for r in world.app.call("mailbox/records", {"limit": 1000})["records"]
               if r["request_id"] == task["request_id"] and r["kind"] != "task"]
    assert [a["id"] for a in answers] == [reply["id"]]


@pytest.mark.parametrize(("answers", "why"), [
    # Claude Code asks the model once more after an empty answer; a second empty one ends the turn without text.
    (("", ""), "without final text"),
    (("x" * (MAX_MESSAGE_BYTES + 1),), "reply limit")])
def test_a_turn_without_text_or_over_64_kib_is_a_blocked_notice(claude_app: ClaudeApp, answers: tuple[str, ...],
                                                                 why: str) -> None:
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(*(Message(a) for a in answers))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "answer"})
    (notice,) = records_for(world, lead)
    assert (notice["kind"], notice["status"], notice["request_id"], notice["sender_kind"]) == (
        "notice", "blocked", task["request_id"], "wardian")
    assert why in notice["text"]
    assert len(script.requests) == len(answers)
    assert script.exhausted_requests == []


def test_a_65536_byte_task_and_its_answer_pass_through_the_app_byte_exact(claude_app: ClaudeApp) -> None:
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    unit = "☃ é\n\ttab \"quoted\" \\ \u2028 "
    text = (unit * 4000).encode()[:MAX_MESSAGE_BYTES].decode("utf-8", "ignore")
    text += "x" * (MAX_MESSAGE_BYTES - len(text.encode()))
    answer = "réponse ☃\nligne deux\r\n\ttab\n" * 100
    script.add(Message(answer))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": text})
    assert [(r["request_id"], r["text"]) for r in records_for(world, lead)] == [(task["request_id"], answer)]
    delivered = next(t for t in script.requests[0].user_texts() if t.startswith("wardian_task_delivery"))
    assert json.loads(delivered.split("\n", 1)[1])["text"] == text


def test_credentials_the_model_refuses_fail_the_task_and_show_the_agent_signed_out(claude_app: ClaudeApp) -> None:
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    # Claude Code retries a refused request with backoff unless told not to (an agent setting like any other).
    _, _, script = world.agent("worker", config=['env.CLAUDE_CODE_MAX_RETRIES="0"'])
    script.require_key("a-key-the-agent-does-not-have")
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "hi"})
    (notice,) = records_for(world, lead)
    assert (notice["kind"], notice["status"], notice["request_id"], notice["sender_kind"]) == (
        "notice", "failed", task["request_id"], "wardian")
    assert "rejected the agent's credentials" in notice["text"]
    assert script.unauthorized_requests
    assert row(world, "worker")["status"] == "signed_out"
