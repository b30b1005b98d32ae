"""The deadlock guard through a real running app, on both stores (docs/guide/teams.md, rule WAIT-8 of
docs/design/contract.md): agents that each took a task of the next and wait for their own are told `deadlock` at
once, naming the agents and tasks; a chain that is not closed is never touched. The agents here are sessions without a
provider, waiting as `wardian message wait` does; tests/providers/*/test_deadlock.py show the same with models."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.conftest import AppHandle
from wardian.app.runtime.deadlocks import deadlocked
from wardian.protocol import methods as proto
from wardian.taskpolicy import OpenTask

BOTH_STORES = True


def hold(app: AppHandle, pairs: list[tuple[str, dict[str, Any], str]]) -> list[str]:
    """Each (requester token, recipient, recipient token): assign a task, then the recipient takes it (a receive
    claims it) and acknowledges it, as a model that sets a task aside does. Returns the request ids."""
    ids = []
    for token, recipient, recipient_token in pairs:
        ids.append(app.call("task/followup", {"session": token, "target": recipient["name"], "message": "work"})[
            "request_id"])
        page = app.call("mailbox/receive", {"session": recipient_token, "limit": 100})
        assert [r["request_id"] for r in page["records"]] == [ids[-1]]
        app.call("mailbox/receive", {"session": recipient_token, "ack_cursor": page["cursor"], "limit": 1})
    return ids


def wait_all(app: AppHandle, tokens: list[str], timeout_ms: int) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(len(tokens)) as pool:
        waits = [pool.submit(app.call, "mailbox/wait", {"session": t, "timeout_ms": timeout_ms}, timeout_s=90)
                 for t in tokens]
        results = [w.result() for w in waits]
    for r in results:
        proto.validate_result("mailbox/wait", r)
    return results


def test_three_agents_waiting_around_a_cycle_of_held_tasks_are_each_told_deadlock(shared_app: AppHandle) -> None:
    """x waits for y, y for z, z for x, each holding the task the previous one waits for: the last wait to begin
    closes the cycle, and all three end at once (long before their timeout) with `deadlock`."""
    (x, tx), (y, ty), (z, tz) = [shared_app.add_agent() for _ in range(3)]
    ids = hold(shared_app, [(tx, y, ty), (ty, z, tz), (tz, x, tx)])
    results = wait_all(shared_app, [tx, ty, tz], 60_000)
    names = sorted(a["name"] for a in (x, y, z))
    tasks = sorted([(ids[0], x["name"], y["name"]), (ids[1], y["name"], z["name"]), (ids[2], z["name"], x["name"])])
    for mine, held, result in zip(ids, [ids[2], ids[0], ids[1]], results, strict=True):
        assert (result["woke"], result["timed_out"], result["wake_reason"]) == (False, False, "deadlock")
        found = result["deadlock"]
        assert found["agents"] == names
        assert sorted((t["request_id"], t["requester"], t["recipient"]) for t in found["tasks"]) == tasks
        assert (found["holding"], found["waiting_for"]) == ([held], [mine])


def test_a_chain_that_ends_at_an_agent_waiting_for_nothing_is_never_called_a_deadlock(shared_app: AppHandle) -> None:
    """x waits for y and y for z, each holding the previous one's task, and z waits too but assigned nothing: no
    reply is impossible (z may answer), so every wait runs to its timeout."""
    (_, tx), (y, ty), (z, tz) = [shared_app.add_agent() for _ in range(3)]
    hold(shared_app, [(tx, y, ty), (ty, z, tz)])
    results = wait_all(shared_app, [tx, ty, tz], 1_500)
    assert [(r["woke"], r["timed_out"], r["wake_reason"]) for r in results] == [(False, True, None)] * 3


def test_a_cycle_whose_task_is_only_queued_wakes_the_wait_as_mailbox_activity(shared_app: AppHandle) -> None:
    """x and y each assigned the other a task, and x took y's but y did not take x's: x's task is still queued for y
    (y could take it), so y's wait returns at once with mailbox activity and nobody is told deadlock."""
    (x, tx), (y, ty) = [shared_app.add_agent() for _ in range(2)]
    hold(shared_app, [(ty, x, tx)])
    shared_app.call("task/followup", {"session": tx, "target": y["name"], "message": "work"})
    with ThreadPoolExecutor(1) as pool:
        x_wait = pool.submit(shared_app.call, "mailbox/wait", {"session": tx, "timeout_ms": 1_500}, timeout_s=90)
        assert shared_app.call("mailbox/wait", {"session": ty, "timeout_ms": 1_500})["wake_reason"] == \
            "mailbox_activity"
        assert x_wait.result()["timed_out"] is True


def _task(rid: str, requester: int, recipient: int) -> OpenTask:
    return OpenTask(rid, requester, f"a{requester}", recipient, f"a{recipient}", f"u{recipient}", True, None)


def test_the_deadlocked_set_is_every_waiting_agent_whose_every_task_is_held_by_another_of_the_set() -> None:
    """The waits-for graph's rule (app/runtime/deadlocks.py): a cycle of held tasks is deadlocked, with an agent that
    waits only on it; an agent with one task that may still be answered (not held, or held by an agent not waiting)
    leaves, and so does everyone who waits only on it."""
    cycle = [_task("t1", 1, 2), _task("t2", 2, 1)]
    hanger = _task("t3", 3, 1)
    assert deadlocked({1, 2, 3}, [*cycle, hanger], [*cycle, hanger]) == {1, 2, 3}
    queued = _task("t4", 2, 4)  # 2 also waits for 4's answer to a task 4 has not taken
    assert deadlocked({1, 2, 3, 4}, [*cycle, hanger], [*cycle, hanger, queued]) == set()
    assert deadlocked({1, 2}, cycle, [*cycle, _task("t5", 1, 5)]) == set()  # 5 does not wait: it may answer
    assert deadlocked({1, 2, 3}, [_task("t1", 1, 2), _task("t2", 2, 3)], [_task("t1", 1, 2), _task("t2", 2, 3)]) \
        == set()


def test_wardian_message_wait_says_deadlock_with_what_the_caller_holds(shared_app: AppHandle) -> None:
    """The CLI's wait ends like the tool's: a line naming the agents and the tasks the caller holds and waits for,
    and exit code 8 (nothing arrived)."""
    (x, tx), (y, ty) = [shared_app.add_agent() for _ in range(2)]
    mine, held = hold(shared_app, [(tx, y, ty), (ty, x, tx)])
    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(shared_app.call, "mailbox/wait", {"session": ty, "timeout_ms": 60_000}, timeout_s=90)
        done = shared_app.cli("message", "wait", "--timeout-ms", "60000", token=tx)
        assert other.result()["wake_reason"] == "deadlock"
    names = ", ".join(sorted([x["name"], y["name"]]))
    assert (done.returncode, done.stdout.decode()) == (
        8, f"deadlock: {names} wait for each other's replies; you hold {held}, you wait for {mine}\n")
