"""A prompt whose outcome a killed app lost is settled from the history the agent replays when its session is
loaded again (`session/load`; docs/guide/acp.md#durable-and-exact): an answered turn's text becomes the task's
`done` reply; a turn the history shows cut off stays `uncertain`; nothing is ever prompted again. Against the real
Qwen Code, with the app killed (kill -9, or its named crash point right after the agent answered)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator

import pytest

from tests.conftest import app_on_root, pinned_npm_tool, short_home
from tests.providers.acp.conftest import REPO, AcpApp, settle, state_of
from wardian.app.outcomes import RESTART_LOST, RESTART_NOT_FOUND, RESTART_TAKEN
from wardian.faults import ENV as CRASHPOINT
from wardian_harness.models.scripted_model import Hold, Message, ScriptedModel


@pytest.fixture
def crashing_qwen() -> Iterator[AcpApp]:
    """A Qwen Code home whose app dies (as after kill -9) once a prompt's answer reaches it; restarted without."""
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "qwen", "qwen CLI")
    env = {"WARDIAN_QWEN": str(cli)}
    crashing = {**env, CRASHPOINT: "after_provider_answer_before_outcome"}
    with ScriptedModel() as model, app_on_root(short_home("wql"), crashing) as handle:
        yield AcpApp(handle, model, env, "qwen")


@pytest.fixture
def qwen() -> Iterator[AcpApp]:
    cli = pinned_npm_tool(REPO / "node_modules" / ".bin" / "qwen", "qwen CLI")
    env = {"WARDIAN_QWEN": str(cli)}
    with ScriptedModel() as model, app_on_root(short_home("wqk"), env) as handle:
        yield AcpApp(handle, model, env, "qwen")


def exited(world: AcpApp) -> int:
    for _ in range(2400):
        code = world.app.proc.poll()
        if code is not None:
            return code
        settle()
    raise AssertionError("the app did not die at its crash point")


def prompts_of(world: AcpApp, request_id: str, since_ns: int = 0) -> int:
    """How many of the agent's model requests carried the task as a new prompt (the last user message), received
    after `since_ns` (`time.time_ns`, the scripted model's clock)."""
    script = world.model.agent("worker")
    return sum(1 for r in script.requests if r.answered_by != "side" and r.received_at_ns > since_ns
               and request_id in json.dumps((r.body.get("messages") or [{}])[-1]))


def test_a_turn_the_history_shows_answered_settles_its_lost_task_done(crashing_qwen: AcpApp) -> None:
    world = crashing_qwen
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    script.add(Message("the answer that outlived the app"))
    task = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "answer me"})
    assert exited(world) == 137
    world.restart_app()
    (reply,) = world.app.records_for(lead)
    assert (reply["request_id"], reply["kind"], reply["status"], reply["text"]) == (
        task["request_id"], "reply", "done", "the answer that outlived the app")
    assert state_of(world, task["request_id"]) == "completed"
    assert prompts_of(world, task["request_id"]) == 1


def test_a_turn_the_history_shows_cut_off_stays_uncertain_and_is_never_resent(qwen: AcpApp) -> None:
    world = qwen
    _, lead, _ = world.agent("lead", start=False)
    _, _, script = world.agent("worker")
    hold = Hold("working")
    script.add(hold, Message("the next task's answer"))
    lost = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "doomed"})
    hold.wait_started(120)
    world.wait_status("worker", "active")
    os.kill(world.app.proc.pid, signal.SIGKILL)
    world.app.proc.wait(30)
    world.restart_app()  # it ends the Qwen Code the killed app left, its model stream still held
    restarted_ns = time.time_ns()
    world.wait_status("worker", "idle")
    hold.release()
    # The history shows the prompt taken and never answered (at times with the text Qwen Code had when it was
    # ended, which its record does not mark finished), or not at all: uncertain either way, the reason restated.
    task = world.app.call("request/show", {"id": lost["request_id"]})["task"]
    for _ in range(2400):
        if task["uncertain_reason"] != RESTART_LOST:
            break
        settle()
        task = world.app.call("request/show", {"id": lost["request_id"]})["task"]
    assert (task["facts"]["state"], task["uncertain_reason"]) in (
        ("uncertain", RESTART_TAKEN), ("uncertain", RESTART_NOT_FOUND))
    after = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "next"})
    assert [(r["request_id"], r["text"]) for r in world.app.records_for(lead)] == [
        (after["request_id"], "the next task's answer")]
    # Sent once by the app. Under load the Qwen Code the killed app left was seen to send the held prompt's
    # request a second time before the new app ended it (its own doing, not the app's); a resend by the app could
    # only come through the new Qwen Code, after the restart.
    assert prompts_of(world, lost["request_id"]) >= 1
    assert prompts_of(world, lost["request_id"], since_ns=restarted_ns) == 0
    assert state_of(world, lost["request_id"]) == "uncertain"
