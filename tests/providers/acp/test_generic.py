"""Any ACP agent (`--provider acp --command "CMD ARGS..."`; docs/guide/acp.md#any-acp-agent), here the real
`opencode acp` on the scripted model, driven by a real `wardian app run` home: the command is kept with the agent,
checked when it is added, and runs under the agent's private home."""

from __future__ import annotations

import pytest

from tests.conftest import AppHandle
from tests.providers.acp.conftest import AcpApp, collect
from wardian import errors
from wardian_harness.models.scripted_model import Hold, Message, ToolCall


def test_information_never_starts_a_turn_of_a_generic_acp_agent_and_a_task_is_answered_by_its_turn(
        generic_app: AcpApp) -> None:
    """One agent start for both: information waits in the mailbox and starts no turn; then a task is answered by the
    turn it starts."""
    world = generic_app
    _, lead, _ = world.agent("lead", start=False)
    worker, worker_token, script = world.agent("worker")
    world.app.call("message/send", {"session": lead, "target": "worker", "message": "FYI: the build is green"})
    (record,) = world.app.records_for(worker_token)
    assert record["text"] == "FYI: the build is green"
    assert script.requests == []
    assert world.row("worker")["status"] == "idle"
    script.add(ToolCall("list_agents", {}), Message("I see my peers. Done."))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "Look around."})
    (reply,) = world.app.records_for(lead)
    assert (reply["kind"], reply["status"], reply["request_id"], reply["text"]) == (
        "reply", "done", task["request_id"], "I see my peers. Done.")
    outputs = [o.text for r in script.requests for o in r.function_call_outputs() if "list_agents" in (o.name or "")]
    assert outputs
    assert '"lead"' in outputs[0]
    managed = world.app.call("agent/list")["managed"][worker["uuid"]]
    assert managed["command"] == world.command
    home = world.app.home.agent_dir(worker["uuid"]) / "acp"
    assert (home / "data" / "opencode").is_dir()  # OpenCode's data went to the agent's private XDG home


def test_an_interrupt_cancels_the_turn_of_a_generic_acp_agent(generic_app: AcpApp) -> None:
    world = generic_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("long work")
    script.add(hold, Message("after the interrupt"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "long"})
    hold.wait_started(120)
    turn = world.wait_status("worker", "active")["active_turn_id"]
    assert world.app.call("agent/interrupt", {"session": lead, "target": "worker"})["turn_id"] == turn
    (notice,) = collect(world, lead, 1)
    assert (notice["kind"], notice["status"], notice["request_id"]) == ("notice", "blocked", task["request_id"])
    world.wait_status("worker", "idle")
    after = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "still there?"})
    assert [(r["request_id"], r["text"]) for r in world.app.records_for(lead)] == [
        (after["request_id"], "after the interrupt")]


@pytest.mark.parametrize(("provider", "command", "code"), [
    ("acp", None, "invalid_arguments"),
    ("acp", [], "invalid_arguments"),
    ("acp", ["", "acp"], "invalid_arguments"),
    ("acp", ["no-such-acp-agent-on-path", "acp"], "unsupported"),
    ("qwen", ["qwen", "--acp"], "invalid_arguments"),
])
def test_a_missing_empty_unknown_or_misplaced_command_is_refused_and_adds_nothing(
        shared_app: AppHandle, provider: str, command: list[str] | None, code: str) -> None:
    """On one app for all the cases: each is refused at `agent/add`, so none adds an agent."""
    with pytest.raises(errors.WardianError) as caught:
        shared_app.add_agent("worker", provider, command)
    assert (caught.value.code, caught.value.field) == (code, "command")
    assert shared_app.call("agent/list")["agents"] == []
