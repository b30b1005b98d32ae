"""The version gate (VER-2, DLV-5) on a real old Codex: 0.154.0 keeps idle delivery but gets no structured steering."""

from __future__ import annotations

from tests.providers.codex.conftest import CodexWorld
from tests.providers.codex.test_runtime import wait_active, wait_reply
from wardian_harness.models.scripted_model import Hold, Message


def test_codex_0_154_gets_idle_delivery_but_no_steering(oldest_codex_world: CodexWorld) -> None:
    """DLV-5, VER-2: structured steering requires stable Codex 0.159.2 or newer; older supported versions retain idle
    and information delivery. A task for an active 0.154.0 turn waits for the turn to end, then starts its own."""
    world = oldest_codex_world
    _, lead_token, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    started = world.app.call("agent/list")["agents"]
    assert any(a["name"] == "worker" and a["status"] == "idle" for a in started)
    hold = Hold("busy", text="first done", phase="final_answer")
    script.add(hold, Message("second done", phase="final_answer"))
    first = world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "one"})
    hold.wait_started()
    turn = wait_active(world, "worker")
    second = world.app.call("task/followup", {"session": lead_token, "target": "worker", "message": "two"})
    hold.release()
    replies = wait_reply(world, lead_token)
    while len(replies) < 2:
        replies += wait_reply(world, lead_token)
    assert {(r["request_id"], r["text"]) for r in replies} == {(first["request_id"], "first done"),
                                                               (second["request_id"], "second done")}
    turns = [r.turn_id for r in script.requests]
    assert turns[0] == turn
    assert turns[-1] != turn  # the second task got a turn of its own, not a steer into the first
