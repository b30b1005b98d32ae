"""One request's whole story by id (decision 0015): `wardian message show ID [--json]` (app method `request/show`)
prints every fact the app holds about an ask_, msg_, rep_ or ntc_ record; `request/status` lets the agent that sent a
task look its own request up, and nobody else's; the operator log shows each task's facts."""

from __future__ import annotations

import json

import pytest

from tests.conftest import AppHandle
from wardian import errors
from wardian.cli import EXIT_NOT_FOUND
from wardian.protocol import methods as proto

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def test_a_tasks_story_follows_it_from_admission_to_its_reply(app: AppHandle) -> None:
    lead, lead_token = app.add_agent("lead")
    worker, worker_token = app.add_agent("worker")
    task = app.call("task/followup", {"session": lead_token, "target": "worker", "message": "Check the loop"})
    rid = task["request_id"]
    pending = app.call("request/show", {"id": rid})
    proto.validate_result("request/show", pending)
    assert (pending["task"]["facts"]["state"], pending["task"]["requester"]["uuid"]) == ("pending", lead["uuid"])
    assert (pending["sender"]["uuid"], pending["recipient"]["uuid"]) == (lead["uuid"], worker["uuid"])

    page = app.call("mailbox/receive", {"session": worker_token})
    reply = app.call("task/reply", {"session": worker_token, "request_id": rid, "status": "done", "message": "Fine"})
    app.call("mailbox/receive", {"session": worker_token, "ack_cursor": page["cursor"]})
    done = app.call("request/show", {"id": rid})
    facts = done["task"]["facts"]
    assert (facts["state"], facts["claimed_by"], facts["reply_id"], facts["reply_status"]) == (
        "completed", "receive", reply["reply_id"], "done")
    assert done["delivery"]["received_at"] is not None
    assert done["delivery"]["acked_at"] is not None
    assert (done["answer"]["id"], done["answer"]["text"]) == (reply["reply_id"], "Fine")

    answer = app.call("request/show", {"id": reply["reply_id"]})  # a reply's story names the task it answers
    assert (answer["kind"], answer["request_id"], answer["task"]["facts"]["state"]) == ("reply", rid, "completed")
    assert answer["delivery"]["received_at"] is None  # not read yet

    shown = app.cli("message", "show", rid)
    assert shown.returncode == 0, shown.stderr
    for fact in (rid, "completed", "claimed    by receive", reply["reply_id"], "Check the loop", "Fine"):
        assert fact.encode() in shown.stdout, fact
    as_json = app.cli("message", "show", rid, "--json")
    assert json.loads(as_json.stdout) == app.call("request/show", {"id": rid})

    log = app.cli("message", "log")
    assert f"task completed, claimed by receive, answered done by {reply['reply_id']}".encode() in log.stdout


def test_information_shows_how_it_travelled(app: AppHandle) -> None:
    _, lead_token = app.add_agent("lead")
    _, worker_token = app.add_agent("worker")
    sent = app.call("message/send", {"session": lead_token, "target": "worker", "message": "FYI"})
    story = app.call("request/show", {"id": sent["interaction_id"]})
    assert story["task"] is None
    assert story["delivery"] == {"received_at": None, "acked_at": None, "push": None, "pushed_at": None,
                                 "push_note": None}
    app.call("mailbox/receive", {"session": worker_token})
    assert app.call("request/show", {"id": sent["interaction_id"]})["delivery"]["received_at"] is not None


def test_an_agent_sees_the_status_of_its_own_requests_only(app: AppHandle) -> None:
    _, lead_token = app.add_agent("lead")
    _, worker_token = app.add_agent("worker")
    _, other_token = app.add_agent("other")
    rid = app.call("task/followup", {"session": lead_token, "target": "worker", "message": "x"})["request_id"]
    info = app.call("message/send", {"session": lead_token, "target": "worker", "message": "i"})["interaction_id"]
    mine = app.call("request/status", {"session": lead_token, "request_id": rid})
    proto.validate_result("request/status", mine)
    assert mine["task"]["facts"]["state"] == "pending"
    for token, asked in ((other_token, rid), (worker_token, rid), (lead_token, info), (lead_token, "ask_nope")):
        with pytest.raises(errors.UnknownRequest):
            app.call("request/status", {"session": token, "request_id": asked})


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["message", "show", "ask_nope"], EXIT_NOT_FOUND, b"unknown_request"),
    (["message", "show", "x" * 200], EXIT_NOT_FOUND, b"unknown_request"),
    (["message", "show"], 2, b"required"),
])
def test_a_bad_id_is_a_clear_error(app: AppHandle, args: list[str], code: int, needle: bytes) -> None:
    out = app.cli(*args)
    assert out.returncode == code, out.stderr
    assert needle in out.stderr
