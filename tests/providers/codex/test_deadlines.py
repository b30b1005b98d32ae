"""A task's deadline on a real Codex agent (the scripted model): at the deadline the app interrupts the exact turn
working on the task, and the task fails with reason deadline_exceeded (docs/guide/teams.md)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.providers.codex.conftest import CodexWorld
from tests.providers.codex.test_runtime import agent_row, wait_active, wait_reply
from wardian import errors
from wardian_harness.models.scripted_model import Hold, Message, ToolCall, function_call_outputs


def test_at_its_deadline_the_exact_turn_is_interrupted_and_the_task_fails(codex_world: CodexWorld) -> None:
    """A task steered into a running turn reaches its deadline: Codex interrupts that exact turn (the model's stream
    is cut), the task gets one `failed` notice from Wardian, the turn's first task the interrupted turn's `blocked`
    notice, and the worker's late reply is refused. The turn runs before the deadline starts, so how long a turn
    takes to start cannot decide the outcome."""
    _, lead, _ = codex_world.agent("lead", start=False)
    _, worker, script = codex_world.agent("worker")
    first, steered = Hold("long work", timeout_s=120), Hold("still working", timeout_s=120)
    script.add(first, steered)
    running = codex_world.app.call("task/followup", {"session": lead, "target": "worker", "message": "long"})
    first.wait_started()
    turn_id = wait_active(codex_world, "worker")
    due = codex_world.app.call("task/followup", {"session": lead, "target": "worker", "message": "and this",
                                                 "deadline_ms": 3_000})
    steered.wait_started()  # the steer landed: Codex asked the model again, inside the same turn
    got: dict[str, tuple[str, str, str]] = {}
    while len(got) < 2:
        records = wait_reply(codex_world, lead)
        assert records, "no answer came"
        got |= {r["request_id"]: (r["kind"], r["status"], r["sender_kind"]) for r in records}
    assert got == {due["request_id"]: ("notice", "failed", "wardian"),
                   running["request_id"]: ("notice", "blocked", "wardian")}
    assert steered.wait_finished() == "disconnected"  # the turn was cut where it stood
    story = codex_world.app.call("request/show", {"id": due["request_id"]})["task"]
    assert (story["facts"]["turn_id"], story["deadline"]["end_reason"]) == (turn_id, "deadline_exceeded")
    with pytest.raises(errors.DeadlineExceeded):
        codex_world.app.call("task/reply", {"session": worker, "request_id": due["request_id"], "status": "done",
                                            "message": "finished after all"})
    for _ in range(500):  # the interrupted turn's end is observed (idle follows its outcome)
        if agent_row(codex_world, "worker")["status"] == "idle":
            break
        codex_world.app.call("mailbox/wait", {"session": lead, "timeout_ms": 20})
    assert codex_world.app.call("mailbox/wait", {"session": lead, "timeout_ms": 0})["woke"] is False


def test_a_model_delegating_past_max_task_depth_reads_task_depth_exceeded_and_can_answer(
        codex_world: CodexWorld) -> None:
    """The loop guard as a model meets it: a Codex agent working on a task calls followup_task, the chain would be
    deeper than max_task_depth, and the tool result is an error naming task_depth_exceeded and the chain's root; the
    model then answers its own task, and the peer never got one."""
    codex_world.app.call("team/policy", {"max_task_depth": 1})
    _, _, lead_script = codex_world.agent("lead", approve=("followup_task",))
    _, worker, _ = codex_world.agent("worker", start=False)
    outputs: list[str] = []

    def after_followup(body: dict[str, Any]) -> Any:
        outputs.append(function_call_outputs(body)[-1].text)
        return Message("I will do it myself: done.", phase="final_answer")

    lead_script.add(ToolCall("followup_task", {"target": "worker", "message": "help me"}), after_followup)
    _, human = codex_world.app.add_agent("human")
    task = codex_world.app.call("task/followup", {"session": human, "target": "lead", "message": "do it"})
    replies = wait_reply(codex_world, human)
    assert [(r["kind"], r["status"], r["text"]) for r in replies] == [("reply", "done", "I will do it myself: done.")]
    (output,) = outputs
    assert "task_depth_exceeded" in output
    assert task["request_id"] in output  # the chain's root
    assert codex_world.app.call("mailbox/receive", {"session": worker})["records"] == []
