"""A Claude Code turn whose `result` line the app never read, settled from Claude Code's own transcript through a
real `wardian app run` home (docs/providers/claude.md).

The state is produced with the real binary, not a fake: Claude Code writes a turn's final assistant message to the
session's transcript as soon as the model's message ends, then runs the agent's `Stop` hooks, and only then prints the
turn's `result`. A `Stop` hook in the agent's own settings (`-c hooks.Stop=...`) that blocks holds the turn in
exactly that window: the transcript has the answer, stdout has no result yet. Killing the process group there loses
the result for good (a killed process prints nothing more). The loss one step earlier (the answer not in the
transcript: the task stays uncertain, never resent) is `test_delivery_app`'s kill mid-turn."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.providers.claude.conftest import ClaudeApp, records_for, settle, state_of
from wardian_harness.models.scripted_model import Message
from wardian_harness.providers.claude_home import find_transcript


def blocking_stop_hook(gate: Path) -> str:
    """`-c` setting of a `Stop` hook that, while `gate/block` exists, says so (`gate/reached`) and blocks on a FIFO
    no one opens for writing (ended by the kill: the hook runs in Claude Code's process group)."""
    os.mkfifo(gate / "fifo")
    command = (f"sh -c 'if [ -e {gate}/block ]; then : > {gate}/reached; read x < {gate}/fifo; fi; exit 0'")
    hooks = [{"hooks": [{"type": "command", "command": command, "timeout": 600}]}]
    return f"hooks.Stop={json.dumps(hooks)}"


def wait_for(path: Path) -> None:
    for _ in range(2400):
        if path.exists():
            return
        settle()
    raise AssertionError(f"{path} never appeared")


def wait_for_answer(claude_dir: Path, session: str, answer: str) -> None:
    """Until the session's transcript holds `answer` as a turn's final assistant entry (bounded)."""
    for _ in range(2400):
        transcript = find_transcript(claude_dir, session)
        if transcript is not None and final_answers(transcript) == [answer]:
            return
        settle()
    raise AssertionError(f"the transcript of session {session} never held the answer")


def final_answers(transcript: Path) -> list[str]:
    """The texts of the transcript's assistant entries that end a turn (a line still being written is skipped)."""
    texts: list[str] = []
    for line in transcript.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # the line being written
        message = entry.get("message") or {}
        if entry.get("type") == "assistant" and message.get("stop_reason") == "end_turn":
            texts += [b["text"] for b in message.get("content") or [] if b.get("type") == "text"]
    return texts


def test_a_result_lost_after_the_answer_reached_the_transcript_is_recovered_from_it(claude_app: ClaudeApp) -> None:
    world = claude_app
    gate = world.app.home.root / "gate"
    gate.mkdir()
    (gate / "block").touch()
    _, lead, _ = world.agent("lead", start=False)
    agent, _, script = world.agent("worker", config=[blocking_stop_hook(gate)])
    script.add(Message("recovered ☃ answer\nline two"), Message("fresh answer"))
    first = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "q"})["request_id"]
    wait_for(gate / "reached")
    # The window: the answer is in the transcript (Claude Code writes it lazily: wait until it is there), the
    # result is not printed (the hook holds it), the task is still running.
    facts = world.app.call("request/show", {"id": first})["task"]["facts"]
    wait_for_answer(world.app.home.agent_dir(agent["uuid"]) / "claude", facts["thread_id"],
                    "recovered ☃ answer\nline two")
    assert state_of(world, first) == "submitted"
    pid = int(world.app.home.provider_pid_path("claude", agent["uuid"]).read_text())
    os.killpg(pid, signal.SIGKILL)
    (reply,) = records_for(world, lead)
    assert (reply["kind"], reply["status"], reply["request_id"], reply["text"]) == (
        "reply", "done", first, "recovered ☃ answer\nline two")
    assert state_of(world, first) == "completed"
    # The next task runs on a new process resuming the same session; the recovered turn is never sent again.
    (gate / "block").unlink()
    second = world.app.call("task/followup", {"session": lead, "target": "worker", "message": "next"})["request_id"]
    assert [(r["request_id"], r["text"]) for r in records_for(world, lead)] == [(second, "fresh answer")]
    later = world.app.call("request/show", {"id": second})["task"]["facts"]
    assert (later["thread_id"], later["claim_generation"]) == (facts["thread_id"], 2)
    assert len(script.requests) == 2
    assert sum(first in t for t in script.requests[-1].user_texts()) == 1

