"""Automatic task delivery into real Codex agents (docs/design/contract.md, DLV-4 ... CMP-5)."""

from __future__ import annotations

import json
from typing import Any

from tests.providers.codex.conftest import CodexWorld
from wardian_harness.models.scripted_model import Fail, Hold, Message, Response, ToolCall, function_call_outputs


def wait_reply(world: CodexWorld, token: str, timeout_ms: int = 60000) -> list[dict[str, Any]]:
    """Receive (and acknowledge) until a reply or notice arrives for this caller (bounded)."""
    got: list[dict[str, Any]] = []
    for _ in range(10):
        page = world.app.call("mailbox/receive", {"session": token, "timeout_ms": timeout_ms}, timeout_s=90)
        if page["records"]:
            world.app.call("mailbox/receive", {"session": token, "ack_cursor": page["cursor"], "limit": 1})
        got += [r for r in page["records"] if r["kind"] in ("reply", "notice")]
        if got:
            return got
        if page["timed_out"]:
            break
    return got


def test_an_idle_agent_gets_its_task_as_a_turn_and_the_final_answer_is_the_reply(codex_world: CodexWorld) -> None:
    """DLV-4, CMP-1, RPL-5: an observed idle owner receives turn/start with a structured wardian_task_delivery item; an
    exact completed turn returns its final assistant item as done."""
    _, lead_token, _ = codex_world.agent("lead", start=False)
    _, _, script = codex_world.agent("worker")
    script.add(Response([Message("thinking about it", phase="commentary"),
                         Message("The answer is 42.", phase="final_answer")]))
    receipt = codex_world.app.call("task/followup", {"session": lead_token, "target": "worker",
                                                     "message": "What is six times seven?\nReply briefly."})
    replies = wait_reply(codex_world, lead_token)
    assert [(r["kind"], r["status"], r["request_id"], r["text"]) for r in replies] == [
        ("reply", "done", receipt["request_id"], "The answer is 42.")]
    request = script.requests[0]
    delivered = "\n".join(request.user_texts())
    assert "wardian_task_delivery" in delivered
    assert receipt["request_id"] in delivered
    assert "What is six times seven?\\nReply briefly." in delivered
    worker = next(a for a in codex_world.app.call("agent/list")["agents"] if a["name"] == "worker")
    assert worker["status"] == "idle"


def agent_row(world: CodexWorld, name: str) -> dict[str, Any]:
    return next(a for a in world.app.call("agent/list")["agents"] if a["name"] == name)


def wait_active(world: CodexWorld, name: str) -> str:
    """The exact active turn id the app observed (bounded poll of the roster, which follows notifications)."""
    for _ in range(500):
        row = agent_row(world, name)
        if row["status"] == "active" and row["active_turn_id"]:
            return str(row["active_turn_id"])
        world.app.call("mailbox/wait", {"session": world.app.add_agent()[1], "timeout_ms": 20})
    raise AssertionError(f"{name} never became active")


def test_a_task_for_an_active_turn_is_steered_into_that_exact_turn(codex_world: CodexWorld) -> None:
    """DLV-5: an active owner with an exact turn ID receives turn/steer, fenced by expectedTurnId, with literal
    peer text as input; several tasks accepted into the same active turn each return its shared final result."""
    _, lead_token, _ = codex_world.agent("lead", start=False)
    _, _, script = codex_world.agent("worker")
    hold = Hold("working on the first task")
    script.add(hold, Message("Both done: 42 and 43.", phase="final_answer"))
    first = codex_world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "first"})
    hold.wait_started()
    turn_id = wait_active(codex_world, "worker")
    second = codex_world.app.call("task/followup", {"session": lead_token, "target": "worker",
                                                    "message": "second, literal ✓ text"})
    replies = wait_reply(codex_world, lead_token)
    while len(replies) < 2:
        replies += wait_reply(codex_world, lead_token)
    by_request = {r["request_id"]: r for r in replies}
    assert set(by_request) == {first["request_id"], second["request_id"]}
    assert {r["text"] for r in replies} == {"Both done: 42 and 43."}
    assert {r["status"] for r in replies} == {"done"}
    steered = script.requests[-1]
    assert steered.turn_id == turn_id
    assert "second, literal ✓ text" in steered.user_texts()  # the literal peer text is the input
    assert any(second["request_id"] in t for t in steered.developer_texts())  # routing in additionalContext
    facts = {r["id"]: r for r in codex_world.app.call("mailbox/records", {"limit": 1000})["records"]}
    assert facts[first["request_id"]]["acked"] is False


def test_information_is_injected_without_starting_a_turn(codex_world: CodexWorld) -> None:
    """DLV-7: information reaches a capable Codex session through thread/inject_items as wardian_inbox_delivery,
    without starting a turn; it is visible in the next model request."""
    _, lead_token, _ = codex_world.agent("lead", start=False)
    _, worker_token, script = codex_world.agent("worker")
    script.add(Message("ack", phase="final_answer"))
    receipt = codex_world.app.call("message/send", {"session": lead_token, "target": "worker",
                                                    "message": "FYI: the build is green."})
    assert receipt["delivery"] == "provider_visible"  # the actual delivery state reached
    # Already on the provider delivery path: receive returns no duplicate body, and wait has nothing new.
    assert codex_world.app.call("mailbox/receive", {"session": worker_token})["records"] == []
    # A wait reports the pushed context once (it may have landed just before the wait began), then sleeps.
    assert codex_world.app.call("mailbox/wait", {"session": worker_token, "timeout_ms": 0}) == {
        "woke": True, "timed_out": False, "wake_reason": "provider_context_available"}
    assert codex_world.app.call("mailbox/wait", {"session": worker_token, "timeout_ms": 0})["woke"] is False
    assert script.requests == []  # no turn was started
    assert agent_row(codex_world, "worker")["status"] == "idle"
    codex_world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "go"})
    wait_reply(codex_world, lead_token)
    texts = "\n".join(script.requests[0].user_texts())
    assert "wardian_inbox_delivery" in texts
    assert "FYI: the build is green." in texts


def test_interrupt_stops_the_exact_turn_and_the_task_gets_a_blocked_notice(codex_world: CodexWorld) -> None:
    """INT-1, CMP-2: interruption of the current turn; an interrupted turn returns an attributed Wardian blocked
    notice."""
    _, lead_token, _ = codex_world.agent("lead", start=False)
    _, _, script = codex_world.agent("worker")
    hold = Hold("long work")
    script.add(hold)
    task = codex_world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "long"})
    hold.wait_started()
    turn_id = wait_active(codex_world, "worker")
    result = codex_world.app.call("agent/interrupt", {"session": lead_token, "target": "worker"})
    assert result["turn_id"] == turn_id
    replies = wait_reply(codex_world, lead_token)
    assert [(r["kind"], r["status"], r["request_id"], r["sender_kind"]) for r in replies] == [
        ("notice", "blocked", task["request_id"], "wardian")]
    assert turn_id in replies[0]["text"]
    assert hold.wait_finished() == "disconnected"


def test_a_failed_model_stream_returns_failed(codex_world: CodexWorld) -> None:
    """CMP-2: a failed turn returns failed."""
    _, lead_token, _ = codex_world.agent("lead", start=False)
    _, _, script = codex_world.agent("worker")
    script.add(Fail("mock failure"))
    task = codex_world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "x"})
    replies = wait_reply(codex_world, lead_token)
    assert [(r["kind"], r["status"], r["request_id"]) for r in replies] == [("notice", "failed", task["request_id"])]
    assert "mock failure" in replies[0]["text"]


def test_a_final_answer_over_64_kib_becomes_a_blocked_notice(codex_world: CodexWorld) -> None:
    """CMP-2: output exceeding the 64 KiB reply limit returns an attributed blocked notice."""
    _, lead_token, _ = codex_world.agent("lead", start=False)
    _, _, script = codex_world.agent("worker")
    script.add(Message("x" * (64 * 1024 + 1), phase="final_answer"))
    task = codex_world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "big"})
    replies = wait_reply(codex_world, lead_token)
    assert [(r["kind"], r["status"], r["request_id"]) for r in replies] == [("notice", "blocked", task["request_id"])]
    assert "65536" in replies[0]["text"]


def test_an_explicit_reply_suppresses_the_automatic_one(codex_world: CodexWorld) -> None:
    """RPL-4: a committed explicit reply suppresses automatic final-result publication."""
    _, lead_token, _ = codex_world.agent("lead", start=False)
    _, worker_token, script = codex_world.agent("worker")
    hold = Hold("thinking")
    script.add(hold)
    task = codex_world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "q"})
    hold.wait_started()
    codex_world.app.call("task/reply", {"session": worker_token, "request_id": task["request_id"],
                                        "status": "blocked", "message": "explicit answer"})
    hold.release()
    replies = wait_reply(codex_world, lead_token)
    assert [(r["kind"], r["text"]) for r in replies] == [("reply", "explicit answer")]
    assert wait_reply(codex_world, lead_token, timeout_ms=1500) == []


def test_a_sender_agent_assigns_work_with_followup_task_and_consumes_the_reply(codex_world: CodexWorld) -> None:
    """ACC-1 (offline): the sender actually assigns work through followup_task, the
    receiver's turn answers that request, and the sender consumes the correlated reply before answering."""
    _, _, lead_script = codex_world.agent("lead", approve=("followup_task",))
    _, _, worker_script = codex_world.agent("worker")
    worker_script.add(Message("The capital of France is Paris.", phase="final_answer"))
    receipts: list[dict[str, Any]] = []

    def after_followup(body: dict[str, Any]) -> Any:
        out = [o for o in function_call_outputs(body)][-1]
        receipts.append(json.loads(out.text.split("Output:\n", 1)[-1]) if "Output:" in out.text else
                        json.loads(out.text))
        return ToolCall("receive_messages", {"timeout_ms": 60000})

    lead_script.add(ToolCall("followup_task", {"target": "worker", "message": "What is the capital of France?"}),
                    after_followup,
                    Message("The worker says: Paris.", phase="final_answer"))
    _, human_token = codex_world.app.add_agent("human")
    task = codex_world.app.call("task/followup", {"session": human_token, "target": "lead",
                                                  "message": "Ask the worker for the capital of France."})
    replies = wait_reply(codex_world, human_token, timeout_ms=60000)
    assert [(r["kind"], r["status"], r["request_id"], r["text"]) for r in replies] == [
        ("reply", "done", task["request_id"], "The worker says: Paris.")]
    assert lead_script.requests[0].offered_tools()  # the wardian tools were offered on the first turn
    (receipt,) = receipts
    ask = receipt["request_id"]
    assert ask.startswith("ask_")
    final_request = lead_script.requests[-1]
    # The sender's receive waited for the reply (the task it is itself working on is not new activity): it
    # either woke because the reply was pushed into its conversation, or (when the receive came between the
    # reply's commit and its push) returned the reply record itself.
    receive_output = final_request.function_call_outputs()[-1].text
    assert ('"wake_reason":"provider_context_available"' in receive_output
            or ("The capital of France is Paris." in receive_output and ask in receive_output))
    seen = "\n".join(final_request.user_texts()) + "\n".join(o.text for o in final_request.function_call_outputs())
    assert ask in seen
    assert "The capital of France is Paris." in seen


def test_a_new_generation_resumes_the_same_conversation_after_the_owner_exits(codex_world: CodexWorld) -> None:
    """ACC-7 (background mode): a later task after owner exit; a new generation resumes the same conversation
    and the model sees the earlier result without being given it again."""
    _, lead_token, _ = codex_world.agent("lead", start=False)
    _, _, script = codex_world.agent("worker")
    script.add(Message("The secret word is PLUM.", phase="final_answer"),
               Message("You told me PLUM earlier.", phase="final_answer"))
    codex_world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "Pick a word."})
    wait_reply(codex_world, lead_token)
    before = agent_row(codex_world, "worker")
    # The owner exits (an app restart ends every owner); the next app starts a new generation.
    app = codex_world.restart_app()
    for _ in range(500):
        row = agent_row(codex_world, "worker")
        if row["status"] == "idle" and row["generation"] > before["generation"]:
            break
        app.call("mailbox/wait", {"session": lead_token, "timeout_ms": 20})
    task = app.call("task/followup", {"session": lead_token, "target": "worker", "message": "Which word?"})
    replies = wait_reply(codex_world, lead_token)
    assert [(r["request_id"], r["text"]) for r in replies] == [(task["request_id"], "You told me PLUM earlier.")]
    later = script.requests[-1]
    assert later.body["prompt_cache_key"] == script.requests[0].body["prompt_cache_key"]  # same thread
    history = json.dumps(later.body["input"])
    assert "The secret word is PLUM." in history  # recalled from the resumed conversation, not re-sent
    assert "The secret word is PLUM." not in "\n".join(t for t in later.user_texts() if "Which word?" in t)
