"""The app itself killed (SIGKILL) while a Claude Code agent's task ran: at the next `wardian app run` on the same
home, each lost delivery is settled from the session transcript before the agent starts again (docs/providers/
claude.md#the-app-killed). Found with its answer -> the task's `done` reply, published once; taken but never
answered, or not in the transcript (missing, corrupt) -> uncertain, never resent, and the app starts anyway.

The answer-in-the-transcript window is held with a blocking `Stop` hook, as in `test_app_lost_result`."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import start_app
from tests.providers.claude.conftest import ClaudeApp, records_for, settle, state_of
from tests.providers.claude.test_app_lost_result import blocking_stop_hook, wait_for, wait_for_answer
from wardian.app import outcomes
from wardian.providers.claude import transcript
from wardian_harness.models.scripted_model import AgentScript, Hold, Message
from wardian_harness.providers.claude_home import find_transcript

ANSWER = "recovered ☃ answer\nline two"


def kill_app(world: ClaudeApp, agent: dict[str, Any], *, orphan: bool) -> int:
    """SIGKILL the app; unless `orphan`, its agent's Claude Code process group too (else it is left running, for
    the next app start to end). Returns the Claude Code group leader's pid."""
    pid = int(world.app.home.provider_pid_path("claude", agent["uuid"]).read_text())
    os.kill(world.app.proc.pid, signal.SIGKILL)
    world.app.proc.wait(60)
    if not orphan:
        os.killpg(pid, signal.SIGKILL)
    return pid


def restart(world: ClaudeApp) -> None:
    world.app.proc = start_app(world.app.home.root, world.env)


def task_of(world: ClaudeApp, rid: str) -> dict[str, Any]:
    return dict(world.app.call("request/show", {"id": rid})["task"])


def wait_state(world: ClaudeApp, rid: str, state: str) -> None:
    for _ in range(2400):
        if state_of(world, rid) == state:
            return
        settle()
    raise AssertionError(f"task {rid} never became {state} (it is {state_of(world, rid)})")


@dataclass
class Held:
    """A worker's task whose answer is in the session transcript while a blocking Stop hook holds its turn open."""

    lead: str
    agent: dict[str, Any]
    script: AgentScript
    first: str
    facts: dict[str, Any]
    claude_dir: Path
    gate: Path


def held_answer(world: ClaudeApp) -> Held:
    gate = world.app.home.root / "gate"
    gate.mkdir()
    (gate / "block").touch()
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker", config=[blocking_stop_hook(gate)])
    script.add(Message(ANSWER), Message("fresh answer"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "q"})["request_id"]
    wait_for(gate / "reached")
    facts = task_of(world, first)["facts"]
    claude_dir = world.app.home.agent_dir(agent["uuid"]) / "claude"
    wait_for_answer(claude_dir, facts["thread_id"], ANSWER)
    return Held(lead, agent, script, first, facts, claude_dir, gate)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


@pytest.mark.parametrize("orphan", [False, True], ids=["claude-killed-too", "claude-left-running"])
def test_an_answer_in_the_transcript_when_the_app_was_killed_is_the_tasks_reply_once(
        claude_app: ClaudeApp, orphan: bool) -> None:
    world = claude_app
    held = held_answer(world)
    lead, agent, script, first, facts, gate = held.lead, held.agent, held.script, held.first, held.facts, held.gate
    assert state_of(world, first) == "submitted"
    pid = kill_app(world, agent, orphan=orphan)
    (gate / "block").unlink()  # the hook lets later turns end
    restart(world)
    (reply,) = records_for(world, lead)
    assert (reply["kind"], reply["status"], reply["request_id"], reply["text"]) == ("reply", "done", first, ANSWER)
    assert state_of(world, first) == "completed"
    assert gone(pid)  # the process the killed app left was ended before the transcript was read
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "next"})["request_id"]
    assert [(r["request_id"], r["text"]) for r in records_for(world, lead)] == [(second, "fresh answer")]
    later = task_of(world, second)["facts"]
    assert later["thread_id"] == facts["thread_id"]
    assert later["claim_generation"] > facts["claim_generation"]
    assert len(script.requests) == 2
    assert sum(first in t for t in script.requests[-1].user_texts()) == 1  # in the history once, never resent


def test_a_task_taken_but_unanswered_when_the_app_was_killed_stays_uncertain_and_is_never_resent(
        claude_app: ClaudeApp) -> None:
    world = claude_app
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker")
    hold = Hold("working")
    script.add(hold, Message("fresh answer"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "doomed"})["request_id"]
    hold.wait_started(120)
    # Claude Code writes its transcript lazily: wait (bounded) until the message is there, so it was taken.
    facts = task_of(world, first)["facts"]
    claude_dir = world.app.home.agent_dir(agent["uuid"]) / "claude"
    for _ in range(2400):
        if transcript.look_up(find_transcript(claude_dir, facts["thread_id"]), facts["turn_id"]) is not None:
            break
        settle()
    kill_app(world, agent, orphan=False)
    restart(world)
    wait_state(world, first, "uncertain")
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "fresh"})["request_id"]
    assert [(r["request_id"], r["text"]) for r in records_for(world, lead)] == [(second, "fresh answer")]
    task = task_of(world, first)
    assert (task["uncertain_reason"], task["facts"]["lookup"]) == (outcomes.RESTART_TAKEN, None)
    assert len(script.requests) == 2
    assert sum("doomed" in t for t in script.requests[-1].user_texts()) <= 1  # in the history once, never resent


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_lost_delivery_whose_transcript_is_missing_or_corrupt_stays_uncertain_and_the_app_starts(
        claude_app: ClaudeApp, damage: str) -> None:
    world = claude_app
    held = held_answer(world)
    lead, agent, script, first, facts, gate = held.lead, held.agent, held.script, held.first, held.facts, held.gate
    claude_dir = held.claude_dir
    kill_app(world, agent, orphan=False)
    (gate / "block").unlink()
    transcript = find_transcript(claude_dir, facts["thread_id"])
    assert transcript is not None
    if damage == "missing":
        transcript.unlink()
    else:
        transcript.write_bytes(b"\x00\xff{not json\n" * 64)
    restart(world)
    wait_state(world, first, "uncertain")
    task = task_of(world, first)
    assert (task["uncertain_reason"], task["facts"]["lookup"]) == (outcomes.RESTART_NOT_FOUND, "not_found")
    # The app serves, the lost task got no reply, and the model never saw it again.
    assert world.app.call("mailbox/receive", {"session": lead, "limit": 100, "timeout_ms": 0})["records"] == []
    assert len(script.requests) == 1
