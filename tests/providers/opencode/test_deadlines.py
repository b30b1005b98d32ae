"""Task deadlines on a real OpenCode agent (the scripted model), a provider that cannot take a task into a running
loop: a task queued behind the loop ends at its deadline and is never delivered, and the loop's own task is answered
as usual (docs/guide/teams.md)."""

from __future__ import annotations

from tests.providers.opencode.conftest import MixedWorld
from tests.providers.opencode.test_runtime import records_for, wait_active
from wardian_harness.models.scripted_model import Hold, Message


def test_a_task_queued_behind_a_running_loop_ends_at_its_deadline_undelivered(mixed_world: MixedWorld) -> None:
    world = mixed_world
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("first", text="first answer", timeout_s=120)
    script.add(hold, Message("never asked"))
    running = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "first"})
    hold.wait_started(120)
    wait_active(world, "worker")
    queued = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "second, queued",
                                              "deadline_ms": 1_000})
    notices = records_for(world, lead)
    assert [(r["kind"], r["status"], r["request_id"], r["sender_kind"]) for r in notices] == [
        ("notice", "failed", queued["request_id"], "wardian")]
    story = world.app.call("request/show", {"id": queued["request_id"]})["task"]
    assert (story["deadline"]["end_reason"], story["facts"]["submitted_at"]) == ("deadline_exceeded", None)
    hold.release()
    replies = records_for(world, lead)
    assert [(r["kind"], r["status"], r["request_id"], r["text"]) for r in replies] == [
        ("reply", "done", running["request_id"], "first answer")]
    assert not any("second, queued" in t for req in script.requests for t in req.user_texts())  # never delivered
