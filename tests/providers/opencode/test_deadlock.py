"""The deadlock guard on real OpenCode agents (the scripted model), a provider that cannot take a task into a running
loop: two agents that each hold the other's task and wait for their own are told so, answer, and both tasks end
(docs/guide/teams.md)."""

from __future__ import annotations

import threading

import pytest

from tests.providers.deadlock_kit import Player
from tests.providers.opencode.conftest import MixedWorld
from tests.providers.opencode.test_runtime import records_for, settle

# A hang guard, not a measure: each test starts two real OpenCode agents and runs their turns, which took 58-144 s
# at a load average of about 22 on a 2-core machine, past the suite's default 120 s.
pytestmark = pytest.mark.timeout(300)


def test_two_opencode_agents_waiting_on_each_others_tasks_are_told_deadlock_and_both_tasks_end(
        mixed_world: MixedWorld) -> None:
    """Each agent assigns the other a task and waits for its answer; the peer's task, queued behind the running loop,
    wakes the wait as mailbox activity, and the model takes it (receive), sets it aside (acknowledges it) and waits
    again. Then each holds what the other waits for: both waits end with `deadlock`, naming both agents and tasks,
    each model answers the task it holds, and both get their answers."""
    world = mixed_world
    _, human, _ = world.agent("human", start=False)
    _, _, a_script = world.agent("a")
    _, _, b_script = world.agent("b")
    both = threading.Barrier(2)  # both loops run their own task before either assigns one: each queues behind
    a, b = Player("a", "b", 15_000, gate=both), Player("b", "a", 15_000, gate=both)
    a_script.add(*a.steps())
    b_script.add(*b.steps())
    for name in ("a", "b"):
        world.app.call("task/followup", {"session": human, "target": name, "message": f"work, {name}"})
    answers: list[str] = []
    while len(answers) < 2:
        answers += [r["text"] for r in records_for(world, human, 1200)]
    assert sorted(answers) == [f"a done: b answers {a.mine}", f"b done: a answers {b.mine}"], (a, b)
    for me, peer in ((a, b), (b, a)):
        (deadlock,) = [w["deadlock"] for w in me.waits if w["wake_reason"] == "deadlock"]
        assert deadlock["agents"] == ["a", "b"]
        assert (deadlock["holding"], deadlock["waiting_for"]) == ([peer.mine], [me.mine])
        assert sorted((t["request_id"], t["requester"], t["recipient"]) for t in deadlock["tasks"]) == sorted(
            [(a.mine, "a", "b"), (b.mine, "b", "a")])
        assert me.seen == {peer.mine}  # it had taken the task it was told it holds
        story = world.app.call("request/show", {"id": me.mine})["task"]
        assert story["facts"]["state"] == "completed"


def test_an_agent_asking_back_the_agent_whose_task_it_works_on_is_told_deadlock_with_it(
        mixed_world: MixedWorld) -> None:
    """a assigns b a task and waits; b's turn starts with it, and b asks a back and waits; a takes b's question and
    waits again. a's task is held by b (its running turn started with it), b's by a (a receive took it): both waits end
    with `deadlock`, b answers a's task by reply, a answers b's, and a's turn ends with b's answer."""
    world = mixed_world
    _, human, _ = world.agent("human", start=False)
    _, _, a_script = world.agent("a")
    _, _, b_script = world.agent("b")
    a, b = Player("a", "b", 15_000), Player("b", "a", 15_000)
    a_script.add(*a.steps())
    b_script.add(*b.steps())
    world.app.call("task/followup", {"session": human, "target": "a", "message": "work, a"})
    assert [r["text"] for r in records_for(world, human, 1200)] == [f"a done: b answers {a.mine}"], (a, b)
    for me, peer in ((a, b), (b, a)):
        (deadlock,) = [w["deadlock"] for w in me.waits if w["wake_reason"] == "deadlock"]
        assert (deadlock["holding"], deadlock["waiting_for"]) == ([peer.mine], [me.mine])
    assert b.seen == set()  # b never received a's task: its turn started with it
    story = world.app.call("request/show", {"id": a.mine})["task"]
    assert (story["facts"]["state"], story["facts"]["reply_status"]) == ("completed", "done")
    wait_idle(world, "b")  # b's turn ends too (its final answer goes nowhere: a's task was answered by reply)


def wait_idle(world: MixedWorld, name: str) -> None:
    for _ in range(1200):
        if next(a for a in world.app.call("agent/list")["agents"] if a["name"] == name)["status"] == "idle":
            return
        settle()
    raise AssertionError(f"{name} never became idle")
