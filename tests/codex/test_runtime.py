"""Automatic task delivery into real Codex agents (seed: "Automatic task delivery")."""

from __future__ import annotations

from typing import Any

from tests.codex.conftest import CodexWorld
from wardian_harness.scripted_model import Fail, Hold, Message, Response


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
    """Seed: an observed idle owner receives turn/start with a structured wardian_task_delivery item; an exact
    completed turn returns its final assistant item as done."""
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
    """Seed: an active owner with an exact turn ID receives turn/steer, fenced by expectedTurnId, with literal
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
    """Seed: information reaches a capable Codex session through thread/inject_items as wardian_inbox_delivery,
    without starting a turn; it is visible in the next model request."""
    _, lead_token, _ = codex_world.agent("lead", start=False)
    _, worker_token, script = codex_world.agent("worker")
    script.add(Message("ack", phase="final_answer"))
    receipt = codex_world.app.call("message/send", {"session": lead_token, "target": "worker",
                                                    "message": "FYI: the build is green."})
    assert receipt["delivery"] == "provider_visible"  # the actual delivery state reached
    # Already on the provider delivery path: receive returns no duplicate body, and wait has nothing new.
    assert codex_world.app.call("mailbox/receive", {"session": worker_token})["records"] == []
    assert codex_world.app.call("mailbox/wait", {"session": worker_token, "timeout_ms": 0})["woke"] is False
    assert script.requests == []  # no turn was started
    assert agent_row(codex_world, "worker")["status"] == "idle"
    codex_world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "go"})
    wait_reply(codex_world, lead_token)
    texts = "\n".join(script.requests[0].user_texts())
    assert "wardian_inbox_delivery" in texts
    assert "FYI: the build is green." in texts


def test_interrupt_stops_the_exact_turn_and_the_task_gets_a_blocked_notice(codex_world: CodexWorld) -> None:
    """Seed: interruption of the current turn; an interrupted turn returns an attributed Wardian blocked notice."""
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
    """Seed: a failed turn returns failed."""
    _, lead_token, _ = codex_world.agent("lead", start=False)
    _, _, script = codex_world.agent("worker")
    script.add(Fail("mock failure"))
    task = codex_world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "x"})
    replies = wait_reply(codex_world, lead_token)
    assert [(r["kind"], r["status"], r["request_id"]) for r in replies] == [("notice", "failed", task["request_id"])]
    assert "mock failure" in replies[0]["text"]


def test_a_final_answer_over_64_kib_becomes_a_blocked_notice(codex_world: CodexWorld) -> None:
    """Seed: output exceeding the 64 KiB reply limit returns an attributed blocked notice."""
    _, lead_token, _ = codex_world.agent("lead", start=False)
    _, _, script = codex_world.agent("worker")
    script.add(Message("x" * (64 * 1024 + 1), phase="final_answer"))
    task = codex_world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "big"})
    replies = wait_reply(codex_world, lead_token)
    assert [(r["kind"], r["status"], r["request_id"]) for r in replies] == [("notice", "blocked", task["request_id"])]
    assert "65536" in replies[0]["text"]


def test_an_explicit_reply_suppresses_the_automatic_one(codex_world: CodexWorld) -> None:
    """Seed: a committed explicit reply suppresses automatic final-result publication."""
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
