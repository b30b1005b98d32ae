"""Recording a permission request costs one store operation: the app routes and records it in one writer call, one
transaction and one commit (`store.approvals.ask`), so a request waits for one durable write before a person can see
it, not for one per lookup (docs/guide/approvals.md#speed). Through the in-process app and its real writer."""

from __future__ import annotations

from dataclasses import replace

import anyio
import pytest

from tests.app.inprocess import World, world
from wardian.approvals import Approval, Policy
from wardian.model import Party, PermissionOption, TaskState
from wardian.providers.approvals import ApprovalAsk, ApprovalAsked, ApprovalReply
from wardian.store import approvals, ledger, roster

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

OPTIONS = (PermissionOption("yes", "Allow", "allow_once"), PermissionOption("no", "Deny", "reject_once"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _quiet(w: World) -> tuple[int, int]:
    """The writer's operation and transaction counts once nothing else runs (every task blocked, no batch open)."""
    writer = w.service.writer
    with anyio.fail_after(10):
        while True:
            await anyio.wait_all_tasks_blocked()
            counts = (writer.operations, writer.batches)
            await anyio.wait_all_tasks_blocked()
            if counts == (writer.operations, writer.batches):
                return counts


async def _pending(w: World) -> list[Approval]:
    return approvals.listing(w.store, True, 10)


@pytest.mark.anyio
@pytest.mark.parametrize("policy", [Policy.PERSON, Policy.LEAD])
async def test_a_request_is_routed_and_recorded_by_one_store_operation(policy: Policy) -> None:
    """Our choice (docs/guide/approvals.md#speed): the agent's policy, the turn's task and its lead are read in the
    transaction that inserts the approval, so recording it is one writer call."""
    async with world() as w:
        await w.call("agent/start", agent="worker", approvals=policy.value)
        rid = (await w.call("task/followup", session=w.lead, target="worker", message="list the files"))["request_id"]
        fake = w.worker()
        await w.until(lambda: _true(ledger.task(w.store, rid).state is TaskState.SUBMITTED), "never bound")
        turn_id = ledger.task(w.store, rid).turn_id
        assert turn_id is not None
        before = await _quiet(w)
        ask = ApprovalAsk(turn_id, "command", "run `ls` in /w", {"command": "ls", "cwd": "/w"}, OPTIONS, tool="bash")
        fake.emit(ApprovalAsked(ask, ApprovalReply()))
        (got,) = await w.until(lambda: _pending(w), "the request was never recorded")
        after = await _quiet(w)
        # Under `lead`, telling the lead is a second operation: its information record, admitted once the approval
        # is already visible (`Approvals._tell_lead`), never before it.
        told = 1 if policy is Policy.LEAD else 0
        assert (after[0] - before[0], after[1] - before[1]) == (1 + told, 1 + told)
        lead = roster.resolve_agent(w.store, "lead")
        assert (got.request_id, got.turn_id, got.policy, got.answerer) == (
            rid, turn_id, policy, Party("lead", lead.uuid) if policy is Policy.LEAD else None)
        assert got.deadline_at is not None
        assert got.deadline_at > got.created_at


async def _true(value: bool) -> bool:
    return value


@pytest.mark.anyio
async def test_a_request_asked_before_the_app_bound_the_turn_s_task_is_recorded_with_that_task_and_its_lead() -> None:
    """A provider may ask as its turn starts, before the app has bound the task to the turn: the record waits for the
    binding (the dispatcher's submit lock), so it still names the task and, under `lead`, its lead."""
    async with world() as w:
        await w.call("agent/start", agent="worker", approvals="lead")
        fake = w.worker()
        ask = ApprovalAsk(None, "command", "run `ls` in /w", {"command": "ls", "cwd": "/w"}, OPTIONS, tool="bash")
        fake.ask_at_start = lambda turn_id: ApprovalAsked(replace(ask, turn_id=turn_id), ApprovalReply())
        rid = (await w.call("task/followup", session=w.lead, target="worker", message="list the files"))["request_id"]
        (got,) = await w.until(lambda: _pending(w), "the request was never recorded")
        lead = roster.resolve_agent(w.store, "lead")
        assert (got.request_id, got.turn_id, got.answerer) == (rid, ledger.task(w.store, rid).turn_id,
                                                               Party("lead", lead.uuid))


@pytest.mark.anyio
async def test_the_agent_s_answer_leaves_before_the_person_s_call_returns() -> None:
    """The agent is what waits on an answer (docs/guide/approvals.md#speed): the runtime's task that writes it to the
    provider, woken by the answer, has run by the time `approval/answer` returns to the person."""
    async with world() as w:
        await w.call("agent/start", agent="worker", approvals="person")
        await w.call("task/followup", session=w.lead, target="worker", message="list the files")
        fake = w.worker()
        await w.until(lambda: _true(fake.active_turn_id is not None), "the turn never started")
        reply = ApprovalReply()
        written: list[bool] = []

        async def provider_side() -> None:  # as a runtime's task answering its provider's request
            decision = await reply.wait()
            written.append(decision is not None and decision.allow)

        async with anyio.create_task_group() as tg:
            tg.start_soon(provider_side)
            ask = ApprovalAsk(fake.active_turn_id, "command", "run `ls` in /w", {"command": "ls"}, OPTIONS, tool="bash")
            fake.emit(ApprovalAsked(ask, reply))
            (got,) = await w.until(lambda: _pending(w), "the request was never recorded")
            await w.call("approval/answer", approval_id=got.approval_id, decision="allow")
            assert written == [True]


async def _asks_for_the_lead(w: World) -> Approval:
    """The worker (under `lead`) asks while it works on the lead's task; the request as recorded."""
    await w.call("agent/start", agent="worker", approvals="lead")
    rid = (await w.call("task/followup", session=w.lead, target="worker", message="list the files"))["request_id"]
    await w.until(lambda: _true(ledger.task(w.store, rid).turn_id is not None), "never bound")
    turn_id = ledger.task(w.store, rid).turn_id
    ask = ApprovalAsk(turn_id, "command", "run `ls` in /w", {"command": "ls", "cwd": "/w"}, OPTIONS, tool="bash")
    w.runtime_of("worker").emit(ApprovalAsked(ask, ApprovalReply()))
    (got,) = await w.until(lambda: _pending(w), "the request was never recorded")
    assert got.answerer is not None
    return got


@pytest.mark.anyio
async def test_a_lead_not_in_a_turn_is_told_and_the_person_too() -> None:
    """docs/guide/approvals.md#the-lead-answers: the record starts no turn, so a lead that is idle or stopped may not
    read it before the deadline; the person is told as well (the notify command's `approval_waiting`)."""
    async with world() as w:  # the lead is never started
        told: list[Approval] = []
        w.runtime.approvals.on_waiting = told.append
        got = await _asks_for_the_lead(w)
        await w.until(lambda: _true(bool(told)), "the person was never told")
        assert [a.approval_id for a in told] == [got.approval_id]


@pytest.mark.anyio
async def test_a_lead_in_a_turn_is_told_and_nobody_else() -> None:
    async with world(lead_provider="fake") as w:
        told: list[Approval] = []
        w.runtime.approvals.on_waiting = told.append
        await w.call("agent/start", agent="lead")
        await w.call("operator/followup", target="lead", message="lead the work")
        await w.until(lambda: _true(w.runtime_of("lead").active_turn_id is not None), "the lead's turn never began")
        got = await _asks_for_the_lead(w)
        await w.until(lambda: _told_lead(w, got), "the lead was never told")
        await anyio.wait_all_tasks_blocked()
        assert told == []


async def _told_lead(w: World, approval: Approval) -> bool:
    """The record from Wardian pushed into the lead's turn (the fake provider takes pushes while active)."""
    return any(approval.approval_id in r.text for r in w.runtime_of("lead").pushed)
