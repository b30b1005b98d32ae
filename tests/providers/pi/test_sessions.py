"""A Pi agent's session is kept with the agent (its thread) and resumed after app and agent restarts; a prompt lost
in a crash is settled from Pi's session file when the file has its answer, else it stays uncertain, never resent
(docs/guide/pi.md#sessions-and-crashes)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from tests.conftest import start_app
from tests.providers.pi.conftest import PiApp, settle
from wardian.providers.base import Finding, LostDelivery
from wardian.providers.pi import sessions
from wardian_harness.models.scripted_model import Hold, Message


def wait_state(world: PiApp, rid: str, state: str) -> dict[str, Any]:
    for _ in range(2400):
        facts = world.facts(rid)
        if facts["state"] == state:
            return facts
        settle()
    raise AssertionError(f"task {rid} never became {state}")


def session_dir(world: PiApp, agent: dict[str, Any]) -> Path:
    return world.app.home.agent_dir(agent["uuid"]) / "pi" / "sessions"


def test_after_an_app_restart_the_agent_resumes_its_session_and_the_model_sees_the_history(pi_app: PiApp) -> None:
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(Message("The code word is tangerine."))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "Remember a word."})
    assert [r["text"] for r in world.app.records_for(lead)] == ["The code word is tangerine."]
    world.restart_app()
    script.add(Message("It was tangerine."))
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "What was it?"})
    assert [r["text"] for r in world.app.records_for(lead)] == ["It was tangerine."]
    before, after = world.facts(first["request_id"]), world.facts(second["request_id"])
    assert (after["claim_generation"], after["thread_id"]) == (2, before["thread_id"])
    history = json.dumps(script.requests[-1].body, ensure_ascii=False)
    assert "Remember a word." in history
    assert "The code word is tangerine." in history


def warm_up(world: PiApp, lead: str) -> None:
    """One task answered: Pi writes a session's file at its first answer, and appends each message from then on."""
    world.app.call("task/followup", {"session": lead, "target": "worker", "message": "warm up"})
    assert [r["text"] for r in world.app.records_for(lead)] == ["warm"]


def test_a_prompt_whose_pi_was_killed_mid_run_stays_uncertain_and_is_never_resent(pi_app: PiApp) -> None:
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker")
    hold = Hold("working")
    script.add(Message("warm"), hold, Message("the next task's answer"))
    warm_up(world, lead)
    lost = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "doomed"})
    hold.wait_started(120)
    world.wait_status("worker", "active")
    os.killpg(int(world.app.home.provider_pid_path("pi", agent["uuid"]).read_text()), signal.SIGKILL)
    wait_state(world, lost["request_id"], "uncertain")
    world.start("worker")
    after = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "next"})
    assert [(r["request_id"], r["text"]) for r in world.app.records_for(lead)] == [
        (after["request_id"], "the next task's answer")]
    last = json.dumps(script.requests[-1].body)
    assert last.count(lost["request_id"]) == 1  # in the resumed history once: never sent again
    assert world.facts(after["request_id"])["thread_id"] == world.facts(lost["request_id"])["thread_id"]
    assert world.facts(lost["request_id"])["state"] == "uncertain"


def test_an_answer_pi_wrote_before_the_app_was_killed_is_recovered_from_the_session_file(pi_app: PiApp) -> None:
    """The app is frozen (SIGSTOP) while Pi answers and writes the answer to its session file, then killed: the next
    app start finds the answer there and publishes it as the task's reply, once."""
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker")
    hold = Hold("recovered", text="recovered answer")
    script.add(Message("warm"), hold)
    warm_up(world, lead)
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "q"})
    hold.wait_started(120)
    world.wait_status("worker", "active")
    thread = world.facts(task["request_id"])["thread_id"]
    os.kill(world.app.proc.pid, signal.SIGSTOP)
    hold.release()
    for _ in range(2400):
        found = sessions.session_file(session_dir(world, agent), thread)
        if found is not None and "recovered answer" in found.read_text(encoding="utf-8"):
            break
        settle()
    os.kill(world.app.proc.pid, signal.SIGKILL)
    world.app.proc.wait(60)
    world.app.proc = start_app(world.app.home.root, world.env)
    (reply,) = world.app.records_for(lead)
    assert (reply["request_id"], reply["status"], reply["text"]) == (task["request_id"], "done", "recovered answer")
    assert len(script.requests) == 2


def test_a_prompt_without_an_answer_in_the_session_file_stays_uncertain_after_the_app_was_killed(
        pi_app: PiApp) -> None:
    world = pi_app
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker")
    hold = Hold("never answered")
    script.add(Message("warm"), hold)
    warm_up(world, lead)
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "q"})
    hold.wait_started(120)
    world.wait_status("worker", "active")
    os.kill(world.app.proc.pid, signal.SIGKILL)
    world.app.proc.wait(60)
    world.app.proc = start_app(world.app.home.root, world.env)
    facts = wait_state(world, task["request_id"], "uncertain")
    lost = LostDelivery(task["request_id"], facts["thread_id"], None, "worker",
                        world.app.home.agent_dir(agent["uuid"]), Path("."), Path("pid"))
    (recovery,) = sessions.recover(session_dir(world, agent), [lost])
    assert recovery.finding is Finding.TAKEN
    assert len(script.requests) == 2
