"""Task deadlines and the loop guard through a real running app, on both stores (docs/guide/teams.md): a queued task
ends at its deadline and is never delivered, a late reply is refused, an app down at a deadline settles it when it
starts again, and a chain too deep or too long is refused with the limit and its root."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import pytest

from tests.conftest import AppHandle, start_app
from wardian import errors
from wardian.model import now_ms
from wardian.protocol import methods as proto

BOTH_STORES = True


def err(app: AppHandle, method: str, params: dict[str, Any]) -> errors.WardianError:
    with pytest.raises(errors.WardianError) as exc:
        app.call(method, params)
    return exc.value


def agents(app: AppHandle, count: int) -> list[tuple[dict[str, Any], str]]:
    return [app.add_agent() for _ in range(count)]


def task(app: AppHandle, token: str, target: dict[str, Any], **extra: Any) -> dict[str, Any]:
    receipt = app.call("task/followup", {"session": token, "target": target["name"], "message": "work", **extra})
    proto.validate_result("task/followup", receipt)
    return receipt


def take(app: AppHandle, token: str) -> list[dict[str, Any]]:
    """The caller's next page of records (received, so its tasks are claimed: the caller works on them)."""
    return list(app.call("mailbox/receive", {"session": token, "limit": 100})["records"])


def until_past(deadline_at: int) -> None:
    """Return once the wall clock is past `deadline_at` (bounded: the deadlines here are seconds away)."""
    for _ in range(2000):
        if now_ms() > deadline_at:
            return
        threading.Event().wait(0.01)
    raise AssertionError("the clock never passed the deadline")


def test_a_queued_task_ends_failed_at_its_deadline_wakes_its_sender_and_is_never_delivered(app: AppHandle) -> None:
    """A task still queued at its deadline is never delivered: its sender gets one `failed` notice from Wardian, and
    the task records reason deadline_exceeded. The timer is re-armed by the admission: an earlier deadline admitted
    while it sleeps towards a later one still ends first."""
    (_, ta), (b, tb) = agents(app, 2)
    later = task(app, ta, b, deadline_ms=3_600_000)
    sent = task(app, ta, b, deadline_ms=1_000)
    assert sent["deadline_at"] == sent["created_at"] + 1_000
    notices = app.records_for(ta, rounds=300)
    assert [(r["kind"], r["status"], r["request_id"], r["sender_kind"]) for r in notices] == [
        ("notice", "failed", sent["request_id"], "wardian")]
    story = app.call("request/show", {"id": sent["request_id"]})
    assert story["task"]["facts"]["state"] == "completed"
    assert story["task"]["facts"]["reply_status"] == "failed"
    assert story["task"]["deadline"] == {"deadline_at": sent["deadline_at"], "end_reason": "deadline_exceeded"}
    # Never delivered: the recipient's mailbox holds only the task whose deadline is still ahead.
    assert [r["request_id"] for r in take(app, tb)] == [later["request_id"]]
    assert app.call("request/show", {"id": later["request_id"]})["task"]["deadline"]["end_reason"] is None


def test_a_reply_after_the_deadline_is_refused_with_deadline_exceeded(app: AppHandle) -> None:
    """A late reply is refused (deadline_exceeded, the task's deadline and its notice named) and writes nothing; the
    sender has the one notice."""
    (_, ta), (b, tb) = agents(app, 2)
    sent = task(app, ta, b, deadline_ms=3_000)
    assert [r["request_id"] for r in take(app, tb)] == [sent["request_id"]]  # taken: the recipient works on it
    notices = app.records_for(ta)
    assert [(r["kind"], r["status"]) for r in notices] == [("notice", "failed")]
    late = err(app, "task/reply", {"session": tb, "request_id": sent["request_id"], "status": "done",
                                   "message": "done, a bit late"})
    assert isinstance(late, errors.DeadlineExceeded)
    assert late.code == "deadline_exceeded"
    assert late.details["deadline_at"] == sent["deadline_at"]
    assert late.details["reply_id"] == notices[0]["id"]
    assert app.call("mailbox/wait", {"session": ta, "timeout_ms": 0})["woke"] is False


BAD_DEADLINES = (0, -1, 999, 7 * 24 * 3600 * 1000 + 1, 10**15, "10m", 1.5, True)


def test_a_bad_deadline_is_refused_and_admits_nothing(shared_app: AppHandle) -> None:
    """0, negative, under a second, over seven days, absurd, or not an integer: invalid_arguments naming deadline_ms
    and what is allowed; nothing is admitted."""
    app = shared_app
    (_, ta), (b, _) = agents(app, 2)
    before = len(app.call("mailbox/records", {"limit": 100_000})["records"])
    for bad in BAD_DEADLINES:
        for method, params in (("task/followup", {"session": ta}), ("operator/followup", {})):
            e = err(app, method, {**params, "target": b["name"], "message": "x", "deadline_ms": bad})
            assert (e.code, e.field) == ("invalid_arguments", "deadline_ms"), bad
            assert e.allowed is not None
            assert "1000" in e.allowed
    assert len(app.call("mailbox/records", {"limit": 100_000})["records"]) == before


def test_the_team_deadline_applies_to_a_task_given_none(app: AppHandle) -> None:
    """`team/policy` sets the default deadline; a task's own deadline_ms wins over it."""
    (_, ta), (b, _) = agents(app, 2)
    set_to = app.call("team/policy", {"task_deadline_ms": 1_800_000})
    proto.validate_result("team/policy", set_to)
    assert set_to == {"task_deadline_ms": 1_800_000, "max_task_depth": 8, "max_chain_tasks": 64}
    default = task(app, ta, b)
    own = task(app, ta, b, deadline_ms=60_000)
    operator = app.call("operator/followup", {"target": b["name"], "message": "w", "deadline_ms": 5_000})
    assert default["deadline_at"] == default["created_at"] + 1_800_000
    assert own["deadline_at"] == own["created_at"] + 60_000
    assert operator["deadline_at"] == operator["created_at"] + 5_000
    app.call("team/policy", {})
    assert task(app, ta, b)["deadline_at"] is None


def test_an_app_down_at_a_deadline_settles_it_when_it_starts(app: AppHandle, store_url: str | None) -> None:
    """Deadlines are durable: the app is killed, the deadline passes, and the next start ends the task (its sender's
    mailbox has the notice; its recipient never gets it)."""
    (_, ta), (b, tb) = agents(app, 2)
    sent = task(app, ta, b, deadline_ms=1_000)
    os.kill(app.proc.pid, signal.SIGKILL)
    app.proc.wait(timeout=30)
    until_past(sent["deadline_at"])
    app.proc = start_app(app.home.root, store_url=store_url)
    notices = app.records_for(ta)
    assert [(r["kind"], r["status"], r["request_id"]) for r in notices] == [("notice", "failed", sent["request_id"])]
    assert app.call("request/show", {"id": sent["request_id"]})["task"]["deadline"]["end_reason"] == "deadline_exceeded"
    assert take(app, tb) == []


# --- the loop guard ---------------------------------------------------------------------------------------------


def test_a_chain_deeper_than_max_task_depth_is_refused_naming_the_limit_and_its_root(app: AppHandle) -> None:
    """A task made while its sender works on a task is that task's child; one more level than max_task_depth is
    task_depth_exceeded (limit, root ask_ id), and nothing is admitted."""
    app.call("team/policy", {"max_task_depth": 3})
    (a, ta), (b, tb), (c, tc), (d, _) = agents(app, 4)
    root = task(app, ta, b)
    take(app, tb)
    second = task(app, tb, a)  # a ping-pong: B hands work back to A
    take(app, ta)
    third = task(app, ta, c)
    take(app, tc)
    story = app.call("request/show", {"id": third["request_id"]})["task"]["chain"]
    assert story == {"parent_request_id": second["request_id"], "root_request_id": root["request_id"], "depth": 3}
    before = len(app.call("mailbox/records", {"limit": 1000})["records"])
    refused = err(app, "task/followup", {"session": tc, "target": d["name"], "message": "deeper"})
    assert isinstance(refused, errors.TaskDepthExceeded)
    assert refused.details["limit"] == 3
    assert refused.details["root_request_id"] == root["request_id"]
    assert refused.details["parent_request_id"] == third["request_id"]
    assert refused.delivery == "not_admitted"
    assert len(app.call("mailbox/records", {"limit": 1000})["records"]) == before
    # Information is no task: it still goes, and an answered task no longer makes its recipient's tasks children.
    app.call("message/send", {"session": tc, "target": d["name"], "message": "fyi"})
    app.call("task/reply", {"session": tc, "request_id": third["request_id"], "status": "done", "message": "ok"})
    fresh = task(app, tc, d)
    assert app.call("request/show", {"id": fresh["request_id"]})["task"]["chain"]["depth"] == 1


def test_a_chain_over_max_chain_tasks_is_refused_naming_the_limit_and_its_root(app: AppHandle) -> None:
    app.call("team/policy", {"max_chain_tasks": 3})
    (_, ta), (b, tb), (c, _) = agents(app, 3)
    root = task(app, ta, b)
    take(app, tb)
    task(app, tb, c)
    task(app, tb, c)
    refused = err(app, "task/followup", {"session": tb, "target": c["name"], "message": "one more"})
    assert isinstance(refused, errors.ChainBudgetExceeded)
    assert (refused.details["limit"], refused.details["tasks"]) == (3, 3)
    assert refused.details["root_request_id"] == root["request_id"]
    # The operator's task starts a chain of its own.
    assert app.call("operator/followup", {"target": c["name"], "message": "x"})["request_id"]


BAD_POLICIES = ({"max_task_depth": 0}, {"max_chain_tasks": -1}, {"task_deadline_ms": 5}, {"max_task_depth": "8"},
                {"max_chain_tasks": 100_001}, {"limit": 3})


def test_a_bad_policy_is_refused_and_changes_nothing(app: AppHandle) -> None:
    app.call("team/policy", {"max_task_depth": 1})
    for params in BAD_POLICIES:
        e = err(app, "team/policy", params)
        assert (e.code, e.field) == ("invalid_arguments", next(iter(params))), params
    (_, ta), (b, tb), (c, _) = agents(app, 3)
    task(app, ta, b)
    take(app, tb)
    assert err(app, "task/followup", {"session": tb, "target": c["name"], "message": "x"}).code == (
        "task_depth_exceeded")
