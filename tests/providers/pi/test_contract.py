"""The contract over Pi's RPC mode (docs/guide/pi.md#the-contract), each against the real Pi on the scripted model:
steering a busy agent, information that never starts a run, interrupts, failures and auto-retry."""

from __future__ import annotations

import json
import os
import signal

from tests.providers.pi.conftest import PiApp, collect, settle
from wardian_harness.models.scripted_model import Fail, Hold, HttpError, Message


def test_a_task_for_a_busy_agent_is_steered_into_the_run_whose_end_answers_both(pi_app: PiApp) -> None:
    """A `steer` joins the running run: the model reads the second task at its next request, in the same run."""
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("first", text="first done")
    script.add(hold, Message("both done"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "first"})
    hold.wait_started(120)
    world.wait_status("worker", "active")
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "second"})
    for _ in range(2400):
        if world.facts(second["request_id"]).get("turn_id"):
            break
        settle()
    assert world.facts(second["request_id"]).get("turn_id")  # steered, under an id of its own
    hold.release()
    got = {r["request_id"]: (r["status"], r["text"]) for r in collect(world, lead, 2)}
    assert got == {first["request_id"]: ("done", "both done"), second["request_id"]: ("done", "both done")}
    assert len(script.requests) == 2
    assert second["request_id"] in json.dumps(script.requests[1].body)


def test_information_while_busy_is_steered_in_and_while_idle_waits_for_the_next_run(pi_app: PiApp) -> None:
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    _, worker, script = world.agent("worker")
    idle = world.app.call("message/send", {"session": lead, "target": "worker", "message": "FYI while idle"})
    assert idle["delivery"] == "admitted"  # kept by the app until the next task (durable)
    hold = Hold("busy", text="busy done")
    script.add(hold, Message("saw both"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "work"})
    hold.wait_started(120)
    world.wait_status("worker", "active")
    busy = world.app.call("message/send", {"session": lead, "target": "worker", "message": "FYI while busy"})
    assert busy["delivery"] == "provider_visible"
    hold.release()
    (reply,) = world.app.records_for(lead)
    assert (reply["request_id"], reply["text"]) == (task["request_id"], "saw both")
    first, second = (json.dumps(r.body, ensure_ascii=False) for r in script.requests)
    assert "FYI while idle" in first  # no run of its own: it went with the task's prompt
    assert "FYI while busy" not in first
    assert "FYI while busy" in second
    page = world.app.call("mailbox/receive", {"session": worker, "limit": 10})
    assert page["records"] == []  # pushed: never also on the receive path


def test_an_interrupt_aborts_the_exact_run_and_the_requester_gets_a_blocked_notice(pi_app: PiApp) -> None:
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("long work")
    script.add(hold, Message("after the interrupt"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "long"})
    hold.wait_started(120)
    turn = world.wait_status("worker", "active")["active_turn_id"]
    assert world.app.call("agent/interrupt", {"session": lead, "target": "worker"})["turn_id"] == turn
    (notice,) = world.app.records_for(lead)
    assert (notice["kind"], notice["status"], notice["request_id"]) == ("notice", "blocked", task["request_id"])
    world.wait_status("worker", "idle")
    after = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "still there?"})
    assert [(r["request_id"], r["text"]) for r in world.app.records_for(lead)] == [
        (after["request_id"], "after the interrupt")]


def test_a_failed_model_request_fails_the_task_with_the_reason_and_is_not_retried(pi_app: PiApp) -> None:
    """Wardian turns Pi's auto-retry off: the run's `agent_end` with `stopReason: error` is the turn's end."""
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker", config=["retry.provider.maxRetries=0"])
    script.add(HttpError(500, "scripted outage"), Message("not reached"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "fail please"})
    (notice,) = world.app.records_for(lead)
    assert (notice["request_id"], notice["status"]) == (task["request_id"], "failed")
    assert "500" in notice["text"]
    assert len(script.requests) == 1


def test_with_auto_retry_turned_on_a_failed_run_is_waited_out_until_the_retry_answers(pi_app: PiApp) -> None:
    """`-c retry.enabled=true`: `agent_end` with an error is followed by `auto_retry_start`; the retried run's end
    is the turn's (docs/guide/pi.md#auto-retry)."""
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker", config=["retry.enabled=true", "retry.baseDelayMs=10",
                                                      "retry.provider.maxRetries=0"])
    script.add(HttpError(500, "scripted outage"), Message("answered on the retry"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "try hard"})
    (reply,) = world.app.records_for(lead)
    assert (reply["request_id"], reply["status"], reply["text"]) == (
        task["request_id"], "done", "answered on the retry")
    assert len(script.requests) == 2


def test_with_auto_retry_on_a_failure_no_retry_follows_still_fails_the_task(pi_app: PiApp) -> None:
    """A request Pi does not retry (HTTP 400) ends the turn once Pi answers a later command without a retry."""
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker", config=["retry.enabled=true"])
    script.add(Fail("scripted refusal"), Message("not reached"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "refuse please"})
    (notice,) = world.app.records_for(lead)
    assert (notice["request_id"], notice["status"]) == (task["request_id"], "failed")
    assert len(script.requests) == 1


def test_information_for_an_idle_agent_survives_a_pi_restart_and_reaches_the_next_run_once(pi_app: PiApp) -> None:
    """Information never starts a run; while the agent is idle it waits in the app (durable, `admitted`), not in
    Pi's memory, and goes to Pi with the next task, into its first model request (docs/guide/pi.md).
    """
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    agent, worker, script = world.agent("worker")
    script.add(Message("saw it"))
    info = world.app.call("message/send", {"session": lead, "target": "worker", "message": "FYI kept by the app"})
    assert info["delivery"] == "admitted"
    os.killpg(int(world.app.home.provider_pid_path("pi", agent["uuid"]).read_text()), signal.SIGKILL)
    world.wait_status("worker", "off")
    world.start("worker")
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "work"})
    (reply,) = world.app.records_for(lead)
    assert (reply["request_id"], reply["text"]) == (task["request_id"], "saw it")
    (request,) = script.requests  # the information joined the task's run: no run of its own
    assert json.dumps(request.body, ensure_ascii=False).count("FYI kept by the app") == 1
    assert world.app.call("mailbox/receive", {"session": worker, "limit": 10})["records"] == []
