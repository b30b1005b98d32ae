"""The operator (SES-4): the person running the agents is a participant of its own, never an agent's identity. It sends
information and tasks through the same validation as an agent, receives the replies to its tasks in its own mailbox
(`wardian message receive --operator`), and no listing, target, name or session resolves to it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import AppHandle
from wardian import errors
from wardian.cli import EXIT_NOT_FOUND, EXIT_NOTHING, EXIT_USAGE
from wardian.model import OPERATOR_NAME, OPERATOR_UUID
from wardian.protocol import methods as proto
from wardian.store import history, open_sqlite, roster
from wardian.store.sqlite import migrations as sqlite_backend
from wardian.store.sqlite.migrations import MIGRATIONS

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def test_the_operator_is_no_agent(app: AppHandle) -> None:
    app.add_agent("worker")
    listed = app.call("agent/list")["agents"]
    assert [a["name"] for a in listed] == ["worker"]
    assert app.call("app/status")["agents"] == 1
    assert [o["agent"]["name"] for o in app.call("agent/overview")["agents"]] == ["worker"]
    for name in (OPERATOR_NAME, OPERATOR_UUID):
        with pytest.raises(errors.UnknownAgent):
            app.call("agent/session", {"agent": name})  # no session can speak for the operator
        with pytest.raises(errors.UnknownAgent):
            app.call("agent/remove", {"agent": name})
        with pytest.raises(errors.UnknownAgent):
            app.call("agent/start", {"agent": name})


@pytest.mark.parametrize("name", ["operator", "Operator", "OPERATOR"])
def test_no_agent_may_take_the_operators_name(app: AppHandle, name: str) -> None:
    with pytest.raises(errors.InvalidAgentName) as caught:
        app.call("agent/add", {"name": name, "provider": "codex"})
    assert "operator" in (caught.value.allowed or "")
    assert app.call("agent/list")["agents"] == []


@pytest.mark.parametrize("target", [OPERATOR_NAME, OPERATOR_UUID])
def test_an_agent_cannot_address_or_impersonate_the_operator(app: AppHandle, target: str) -> None:
    _, token = app.add_agent("lead")
    before = app.call("mailbox/records")["records"]
    for method in ("message/send", "task/followup"):
        with pytest.raises(errors.UnknownTarget):
            app.call(method, {"session": token, "target": target, "message": "hi"})
    with pytest.raises(errors.InvalidArguments):  # there is no sender argument to forge
        app.call("message/send", {"session": token, "target": "lead", "message": "hi", "sender": OPERATOR_UUID})
    assert app.call("mailbox/records")["records"] == before


def test_the_operators_task_and_its_reply_travel_like_any_participants(app: AppHandle) -> None:
    worker, worker_token = app.add_agent("worker")
    task = app.call("operator/followup", {"target": "worker", "message": "Check the loop"})
    proto.validate_result("operator/followup", task)
    assert (task["sender"], task["target"]["uuid"], task["kind"]) == (
        {"name": OPERATOR_NAME, "uuid": OPERATOR_UUID}, worker["uuid"], "task")
    info = app.call("operator/send", {"target": worker["uuid"], "message": "FYI"})
    page = app.call("mailbox/receive", {"session": worker_token})
    assert [(r["id"], r["sender_kind"], r["sender"]["uuid"]) for r in page["records"]] == [
        (task["request_id"], "operator", OPERATOR_UUID), (info["interaction_id"], "operator", OPERATOR_UUID)]
    app.call("mailbox/receive", {"session": worker_token, "ack_cursor": page["cursor"]})
    reply = app.call("task/reply", {"session": worker_token, "request_id": task["request_id"], "status": "done",
                                    "message": "Fine"})
    assert reply["requester"] == {"name": OPERATOR_NAME, "uuid": OPERATOR_UUID}

    # `wardian message receive --operator`: the reply, then acknowledged, then nothing.
    got = app.cli("message", "receive", "--operator", "--json")
    assert got.returncode == 0, got.stderr
    page = json.loads(got.stdout)
    assert [(r["id"], r["request_id"], r["text"]) for r in page["records"]] == [
        (reply["reply_id"], task["request_id"], "Fine")]
    acked = app.cli("message", "receive", "--operator", "--ack-cursor", page["cursor"], "--json")
    assert json.loads(acked.stdout)["acked"] == 1
    assert app.call("operator/receive", {})["records"] == []
    # An agent's session still reads its own mailbox, never the operator's.
    assert app.call("mailbox/receive", {"session": worker_token})["records"] == []


def test_operator_receive_waits_for_the_reply(app: AppHandle) -> None:
    _, worker_token = app.add_agent("worker")
    task = app.call("operator/followup", {"target": "worker", "message": "x"})
    empty = app.call("operator/receive", {"timeout_ms": 1}, timeout_s=10)
    assert (empty["records"], empty["timed_out"]) == ([], True)
    app.call("task/reply", {"session": worker_token, "request_id": task["request_id"], "status": "blocked",
                            "message": "no"})
    woke = app.call("operator/receive", {"timeout_ms": 60_000}, timeout_s=90)
    assert [r["status"] for r in woke["records"]] == ["blocked"]


def test_the_operator_cli_sends_tasks_and_information(app: AppHandle) -> None:
    app.add_agent("worker")
    sent = app.cli("message", "task", "--operator", "--to", "worker", "--json", "Look")
    assert sent.returncode == 0, sent.stderr
    receipt = json.loads(sent.stdout)
    assert receipt["sender"]["uuid"] == OPERATOR_UUID
    info = app.cli("message", "send", "--operator", "--to", "worker", "FYI")
    assert info.returncode == 0, info.stderr
    # The same validation as an agent's: an unknown target and a broadcast are refused, nothing admitted.
    before = app.call("mailbox/records")["records"]
    assert app.cli("message", "task", "--operator", "--to", "nobody", "x").returncode == EXIT_NOT_FOUND
    assert app.cli("message", "task", "--operator", "--to", "*", "x").returncode == EXIT_USAGE
    assert app.cli("message", "send", "--operator", "--to", "worker", "   ").returncode == EXIT_USAGE
    assert app.call("mailbox/records")["records"] == before


def test_an_operator_interrupt_needs_an_active_turn(app: AppHandle) -> None:
    app.add_agent("worker")
    with pytest.raises(errors.NotActive):
        app.call("operator/interrupt", {"target": "worker"})
    assert app.cli("message", "interrupt", "--operator", "worker").returncode == EXIT_NOTHING


@pytest.mark.parametrize(("params", "code"), [
    ({"target": "worker", "message": "x", "session": "wsn1_x"}, "invalid_arguments"),  # no session argument
    ({"target": "worker"}, "empty_message"),
    ({"message": "x"}, "invalid_target"),
    ({"target": "worker", "message": "\x00"}, "invalid_text"),
])
def test_operator_send_params_are_checked_like_an_agents(app: AppHandle, params: dict[str, str], code: str) -> None:
    app.add_agent("worker")
    with pytest.raises(errors.WardianError) as caught:
        app.call("operator/send", params)
    assert caught.value.code == code


def test_an_agent_named_operator_from_before_the_operator_existed_stays_an_agent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Migration 6 adds the operator beside an existing agent named `operator`: that agent keeps its name, its
    records and its place as a target; the reserved operator is a different participant."""
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", MIGRATIONS[:5])
    open_sqlite(tmp_path / "w.db").close()
    # The rows a version-5 app wrote (today's operations write today's columns, so the old rows are made here).
    with sqlite3.connect(tmp_path / "w.db") as db:
        for name, uuid in (("operator", "00000000-0000-4000-8000-00000000000a"),
                           ("lead", "00000000-0000-4000-8000-00000000000b")):
            db.execute("INSERT INTO agents (uuid, name, provider, created_at) VALUES (?, ?, 'codex', 1)", (uuid, name))
        db.execute("INSERT INTO interactions (public_id, kind, sender_id, recipient_id, body, created_at) VALUES "
                   "('msg_legacy', 'information', (SELECT id FROM agents WHERE name = 'lead'), "
                   "(SELECT id FROM agents WHERE name = 'operator'), 'for the legacy agent', 2)")
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", MIGRATIONS)
    store = open_sqlite(tmp_path / "w.db")
    try:
        legacy, lead = (roster.resolve_agent(store, u) for u in ("00000000-0000-4000-8000-00000000000a",
                                                                 "00000000-0000-4000-8000-00000000000b"))
        caller = roster.authenticate(store, roster.create_session(store, lead.id))
        assert [a.uuid for a in roster.list_agents(store)] == [lead.uuid, legacy.uuid]  # by name: lead, operator
        assert roster.resolve_target(store, caller, "operator").uuid == legacy.uuid
        me = roster.operator(store)
        assert (me.agent.uuid, me.agent.name) == (OPERATOR_UUID, OPERATOR_NAME)
        assert me.agent.id not in (legacy.id, lead.id)
        page = history.exchange(store, participant=legacy.id, kind=None, uncertain=False, before=None, limit=10)
        assert [r.interaction.text for r in page.records] == ["for the legacy agent"]
        assert history.exchange(store, participant=me.agent.id, kind=None, uncertain=False, before=None,
                                limit=10).records == ()
    finally:
        store.close()
