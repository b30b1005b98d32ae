"""The deadlock guard's other side on real Codex agents (the scripted model): two agents that each assign the other a
task and wait are not deadlocked, because Codex takes each task into the running turn (`turn/steer`), and its model
reads it once its wait returns (docs/guide/teams.md)."""

from __future__ import annotations

import threading

import pytest

from tests.providers.codex.conftest import CodexWorld
from tests.providers.codex.test_runtime import wait_reply
from tests.providers.deadlock_kit import Player

TOOLS = ("followup_task", "receive_messages", "reply")

# A hang guard, not a measure: starting two real Codex agents and running their turns took 13-22 s at a load average
# of about 22 on a 2-core machine; the OpenCode pair of tests/providers/opencode/test_deadlock.py took up to 144 s.
pytestmark = pytest.mark.timeout(300)


def test_two_codex_agents_waiting_on_each_others_tasks_are_not_called_deadlocked(codex_world: CodexWorld) -> None:
    """Each agent assigns the other a task and waits for its answer; the peer's task is steered into the waiting turn
    (it is not mailbox activity), so no wait is ended with `deadlock`: each model finds the steered task in its
    conversation when its wait returns, answers it, and gets its own answer."""
    _, human, _ = codex_world.agent("human", start=False)
    _, _, a_script = codex_world.agent("a", approve=TOOLS)
    _, _, b_script = codex_world.agent("b", approve=TOOLS)
    both = threading.Barrier(2)  # both turns run before either assigns its task: each task is steered
    a, b = Player("a", "b", 4_000, patience=5, gate=both), Player("b", "a", 4_000, patience=5, gate=both)
    a_script.add(*a.steps())
    b_script.add(*b.steps())
    for name in ("a", "b"):
        codex_world.app.call("task/followup", {"session": human, "target": name, "message": f"work, {name}"})
    answers: list[str] = []
    while len(answers) < 2:
        answers += [r["text"] for r in wait_reply(codex_world, human)]
    assert sorted(answers) == [f"a done: b answers {a.mine}", f"b done: a answers {b.mine}"]
    for me in (a, b):
        assert [w for w in me.waits if w["wake_reason"] == "deadlock"] == []
        story = codex_world.app.call("request/show", {"id": me.mine})["task"]
        assert story["facts"]["turn_id"] is not None  # steered into the peer's running turn
