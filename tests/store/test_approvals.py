"""Approvals (`store.approvals`, docs/guide/approvals.md): kept with the agent and the task whose turn asked, ended
exactly once by a conditional update, read back by `mailbox/records` and tallied per agent; and the permission
requests an older store kept become approvals ended `denied` by the policy. On both backends."""

from __future__ import annotations

import json
import sqlite3

import psycopg
import pytest

from tests.store.conftest import Backend
from tests.store.test_receipts import undo_allow_rules, undo_approvals
from tests.store.test_restart_lost import _task, caller_for
from tests.store.test_usage import _bound
from wardian import errors
from wardian.approvals import (
    DEFAULT_TIMEOUT_MS,
    MAX_DETAIL_CHARS,
    MAX_REASON_CHARS,
    MAX_SUMMARY_CHARS,
    Approval,
    ApprovalStatus,
    Policy,
)
from wardian.model import InteractionKind, Party, PermissionOption
from wardian.store import Store, approvals, history, mailbox, roster

OPTIONS = (PermissionOption("proceed_once", "Allow", "allow_once"), PermissionOption("cancel", "Reject", "reject_once"))


def _open(store: Store, agent_id: int, request_id: str | None = "ask_1", summary: str = "run `mkdir x`") -> str:
    return approvals.open_approval(store, agent_id, request_id, "turn_1", "command", "run_shell_command", summary,
                                   {"command": "mkdir x", "cwd": "/w"}, OPTIONS, Policy.PERSON, None,
                                   123).approval_id


def test_an_approval_is_kept_pending_with_its_agent_task_ask_and_options(store: Store) -> None:
    a = roster.add_agent(store, "a", "qwen", None)
    approval_id = _open(store, a.id, summary="y" * 5000)
    got = approvals.get(store, approval_id)
    assert approval_id.startswith("apr_")
    assert (got.agent, got.request_id, got.turn_id, got.kind, got.tool, got.status, got.policy, got.deadline_at) == (
        Party("a", a.uuid), "ask_1", "turn_1", "command", "run_shell_command", ApprovalStatus.PENDING, Policy.PERSON,
        123)
    assert got.detail == {"command": "mkdir x", "cwd": "/w"}
    assert got.options == OPTIONS
    assert len(got.summary) == MAX_SUMMARY_CHARS
    assert [x.approval_id for x in approvals.listing(store, True, 10)] == [approval_id]


def test_an_approval_ends_once_and_a_second_end_is_refused_changing_nothing(store: Store) -> None:
    a = roster.add_agent(store, "a", "qwen", None)
    approval_id = _open(store, a.id)
    ended = approvals.end(store, approval_id, ApprovalStatus.ALLOWED, "person", True)
    assert (ended.status, ended.decided_by, ended.always) == (ApprovalStatus.ALLOWED, "person", True)
    with pytest.raises(errors.ApprovalEnded) as raised:
        approvals.end(store, approval_id, ApprovalStatus.DENIED, "deadline", False, "late")
    assert raised.value.details["status"] == "allowed"
    again = approvals.get(store, approval_id)
    assert (again.status, again.decided_by, again.reason, again.ended_at) == (
        ApprovalStatus.ALLOWED, "person", None, ended.ended_at)
    assert approvals.listing(store, True, 10) == []
    with pytest.raises(errors.UnknownApproval):
        approvals.get(store, "apr_nosuch")


def test_only_the_lead_named_may_answer_a_lead_s_approval(store: Store) -> None:
    a = roster.add_agent(store, "a", "qwen", None)
    lead = roster.add_agent(store, "lead", "codex", None)
    other = roster.add_agent(store, "other", "codex", None)
    approval_id = approvals.open_approval(store, a.id, None, None, "tool", None, "use x", {}, (), Policy.LEAD,
                                          lead.id, None).approval_id
    assert approvals.get(store, approval_id).answerer == Party("lead", lead.uuid)
    with pytest.raises(errors.NotRecipient):
        approvals.end(store, approval_id, ApprovalStatus.ALLOWED, "other", False, None, other.id)
    assert approvals.end(store, approval_id, ApprovalStatus.DENIED, "lead", False, "no", lead.id).reason == "no"


def test_withdrawing_ends_only_the_pending_ones_of_the_agent(store: Store) -> None:
    a = roster.add_agent(store, "a", "qwen", None)
    b = roster.add_agent(store, "b", "qwen", None)
    first, second, of_b = _open(store, a.id), _open(store, a.id), _open(store, b.id)
    approvals.end(store, first, ApprovalStatus.DENIED, "person")
    assert approvals.withdraw_pending(store, a.id, "provider") == [second]
    assert approvals.get(store, first).status is ApprovalStatus.DENIED
    assert approvals.get(store, of_b).status is ApprovalStatus.PENDING
    assert approvals.withdraw_pending(store, None, "restart") == [of_b]
    tallies = approvals.tallies(store)
    assert {k: (t.count, t.pending, t.last.approval_id) for k, t in tallies.items()} == {
        a.id: (2, 0, second), b.id: (1, 0, of_b)}


def _asked(store: Store, agent_id: int, turn_id: str | None, command: str = "git status") -> tuple[
        Approval, str | None, int]:
    return approvals.ask(store, agent_id, turn_id, "command", "Bash", f"run `{command}` in /w",
                         {"command": command, "cwd": "/w"}, OPTIONS)


def test_a_request_is_recorded_with_its_turn_s_task_and_routed_by_the_agent_s_policy(store: Store) -> None:
    """docs/guide/approvals.md: the task is the one the asking turn works on; under `lead` its sender may answer; the
    deadline is the agent's approval timeout from now. One operation (docs/guide/approvals.md#speed)."""
    lead, worker = caller_for(store, "lead"), caller_for(store, "worker")
    gen = roster.begin_generation(store, worker.agent.id)
    by_lead = _task(store, lead, worker, "check the tree")
    _bound(store, by_lead, gen, "turn_1")
    approvals.set_policy(store, worker.agent.id, "lead", 5000)
    record, rule, timeout_ms = _asked(store, worker.agent.id, "turn_1")
    assert (rule, timeout_ms) == (None, 5000)
    assert (record.request_id, record.turn_id, record.policy, record.answerer, record.status, record.tool) == (
        by_lead, "turn_1", Policy.LEAD, Party("lead", lead.agent.uuid), ApprovalStatus.PENDING, "Bash")
    assert record.deadline_at is not None
    assert 0 < record.deadline_at - record.created_at <= 5000
    assert approvals.get(store, record.approval_id) == record

    by_person = _task(store, roster.operator(store), worker, "and again")
    _bound(store, by_person, gen, "turn_2")
    of_person, _, _ = _asked(store, worker.agent.id, "turn_2")
    assert (of_person.request_id, of_person.answerer) == (by_person, None)  # a person's task: a person answers
    outside, _, _ = _asked(store, worker.agent.id, None)
    assert (outside.request_id, outside.answerer) == (None, None)


def test_a_request_an_allow_rule_matches_or_the_deny_policy_refuses_has_no_lead_and_no_deadline(
        store: Store) -> None:
    """docs/guide/approvals.md#allow-rules: a rule decides before any routing; under `deny` nobody answers."""
    lead, worker = caller_for(store, "lead"), caller_for(store, "worker")
    gen = roster.begin_generation(store, worker.agent.id)
    _bound(store, _task(store, lead, worker, "check the tree"), gen, "turn_1")
    approvals.set_policy(store, worker.agent.id, "lead", None, ["Bash(git status:*)"])
    ruled, rule, _ = _asked(store, worker.agent.id, "turn_1")
    assert (rule, ruled.answerer, ruled.deadline_at) == ("Bash(git status:*)", None, None)
    asked, rule, _ = _asked(store, worker.agent.id, "turn_1", "git push")
    assert (rule, asked.answerer is not None, asked.deadline_at is not None) == (None, True, True)
    approvals.set_policy(store, worker.agent.id, "deny", None)
    denied, rule, _ = _asked(store, worker.agent.id, "turn_1", "git push")
    assert (rule, denied.policy, denied.answerer, denied.deadline_at) == (None, Policy.DENY, None, None)


def test_an_agent_s_policy_is_kept_and_defaults_to_deny(store: Store) -> None:
    a = roster.add_agent(store, "a", "qwen", None)
    assert approvals.policy_of(store, a.id) == (Policy.DENY, DEFAULT_TIMEOUT_MS)
    approvals.set_policy(store, a.id, "person", None)
    approvals.set_policy(store, a.id, None, 5000)
    assert approvals.policy_of(store, a.id) == (Policy.PERSON, 5000)


def test_an_agent_s_allow_rules_are_kept_with_its_policy_and_an_older_store_s_agent_has_none(
        backend: Backend) -> None:
    """Migration 20 of the embedded store, 14 of the shared one: the rules are kept like the policy (None leaves
    them as they are); an agent of a store from before them has none (docs/guide/approvals.md#allow-rules)."""
    store = backend.open()
    a = roster.add_agent(store, "a", "claude", None)
    approvals.set_policy(store, a.id, "person", None, ["Bash(git status:*)", "edit"])
    approvals.set_policy(store, a.id, None, 5000)
    assert approvals.asking_of(store, a.id) == (Policy.PERSON, 5000, ("Bash(git status:*)", "edit"))
    assert roster.managed_agent(store, a.id).allow == ("Bash(git status:*)", "edit")
    backend.close_all()
    if backend.cluster is None:
        with sqlite3.connect(backend.tmp_path / "wardian.db") as db:
            undo_allow_rules(db)
            db.execute("PRAGMA user_version = 19")
    else:
        with psycopg.connect(backend.url, autocommit=True) as db:
            undo_allow_rules(db)
            db.execute("DELETE FROM wardian_schema WHERE version >= 14")
    migrated = backend.open()
    assert approvals.asking_of(migrated, a.id) == (Policy.PERSON, 5000, ())
    assert roster.managed_agent(migrated, a.id).allow == ()


def test_a_store_s_refused_permission_requests_become_approvals_denied_by_the_policy(backend: Backend) -> None:
    """Migration 19 of the embedded store, 13 of the shared one: one record kind."""
    store = backend.open()
    a = roster.add_agent(store, "a", "qwen", None)
    backend.close_all()
    row = (a.id, "ask_1", "turn_1", "run_shell_command", "mkdir x", json.dumps([list(o) for o in OPTIONS]),
           "rejected", 1_700_000_000_000)
    insert = ("INSERT INTO permission_requests (agent_id, request_id, turn_id, tool, title, options, answer, "
              "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
    if backend.cluster is None:
        with sqlite3.connect(backend.tmp_path / "wardian.db") as db:
            undo_approvals(db)
            db.execute("PRAGMA user_version = 18")
            db.execute(insert, row)
    else:
        with psycopg.connect(backend.url, autocommit=True) as db:
            undo_approvals(db)
            db.execute("DELETE FROM wardian_schema WHERE version >= 13")
            db.execute(insert.replace("?", "%s"), row)
    (got,) = approvals.listing(backend.open(), False, 10)
    assert got.approval_id.startswith("apr_")
    assert (got.agent.name, got.request_id, got.tool, got.summary, got.status, got.decided_by, got.policy) == (
        "a", "ask_1", "run_shell_command", "mkdir x", ApprovalStatus.DENIED, "policy", Policy.DENY)
    assert got.options == OPTIONS
    assert got.created_at == got.ended_at == 1_700_000_000_000


def test_a_lead_s_pending_approval_reaches_the_lead_s_mailbox_as_information_from_wardian(store: Store) -> None:
    """docs/guide/approvals.md#the-lead-answers: one information record from Wardian (no sender) for the lead, on its
    receive path unless the push says yes; nothing for an approval that ended or that a person answers."""
    a = roster.add_agent(store, "a", "claude", None)
    lead = roster.add_agent(store, "lead", "codex", None)
    approval_id = approvals.open_approval(store, a.id, "ask_1", None, "command", "Bash", "run `mkdir x`", {}, (),
                                          Policy.LEAD, lead.id, 123).approval_id
    asked: list[str] = []
    told = approvals.tell_lead(store, approval_id, f"approval {approval_id}", lambda uuid: asked.append(uuid) or False)
    assert told is not None
    record_id, lead_uuid, pushing = told
    assert (lead_uuid, pushing, asked) == (lead.uuid, False, [lead.uuid])
    record = history.interaction(store, record_id)
    assert (record.kind, record.sender, record.recipient, record.text, record.request_id) == (
        InteractionKind.INFORMATION, None, Party("lead", lead.uuid), f"approval {approval_id}", None)
    assert mailbox.has_unacked(store, lead.id)
    pushed = approvals.tell_lead(store, approval_id, "again", lambda uuid: True)
    assert pushed is not None
    assert history.interaction(store, pushed[0]).text == "again"
    assert pushed[2]  # admitted for a push: hidden from receive until the push settles
    approvals.end(store, approval_id, ApprovalStatus.ALLOWED, "person")
    assert approvals.tell_lead(store, approval_id, "too late") is None
    assert approvals.tell_lead(store, _open(store, a.id), "a person's") is None


def test_what_ask_and_end_return_is_what_the_store_reads_back(store: Store) -> None:
    """`ask` and `end` make the record they return from the values they wrote instead of reading it again (fewer
    statements while a person waits: docs/guide/approvals.md#speed): it must be the record `get` reads, cut where
    the store cuts (a long summary, tool, detail and reason) and with the options as the store keeps them."""
    worker = caller_for(store, "worker")
    approvals.set_policy(store, worker.agent.id, "person", 7000)
    detail = {"command": "x" * (MAX_DETAIL_CHARS + 10), "cwd": "/w", "n": 3}
    record, rule, _ = approvals.ask(store, worker.agent.id, None, "tool", "T" * (MAX_SUMMARY_CHARS + 5),
                                    "s" * (MAX_SUMMARY_CHARS + 5), detail, OPTIONS)
    assert rule is None
    assert record == approvals.get(store, record.approval_id)
    assert "trimmed" in record.detail
    plain, _, _ = approvals.ask(store, worker.agent.id, None, "other", None, "use x", {"path": "/w/é"}, ())
    assert plain == approvals.get(store, plain.approval_id)
    ended = approvals.end(store, record.approval_id, ApprovalStatus.DENIED, "person", False, "r" * 5000)
    assert ended == approvals.get(store, record.approval_id)
    assert ended.reason is not None
    assert len(ended.reason) == MAX_REASON_CHARS
    allowed = approvals.end(store, plain.approval_id, ApprovalStatus.ALLOWED, "person", True)
    assert allowed == approvals.get(store, plain.approval_id)
