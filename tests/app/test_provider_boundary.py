"""The provider boundary is real (decision 0014): a second provider that is not Codex, speaking only through
`wardian.providers.base`, takes a task, completes it and is interrupted through the app's provider-neutral runtime
and its operations (the same `AppService` the control socket serves), with the ledger's facts on the way."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.app.inprocess import World, world
from wardian import errors
from wardian.model import ReplyStatus, TaskState
from wardian.providers.base import Capabilities, OutcomeStatus
from wardian.store import ledger

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def lead_records(w: World) -> list[dict[str, Any]]:
    return (await w.call("mailbox/receive", session=w.lead, limit=100))["records"]


@pytest.mark.anyio
async def test_a_second_provider_takes_a_task_and_its_turns_answer_is_the_reply() -> None:
    """DLV-4, CMP-1, RPL-5, through a provider that is not Codex: idle -> a new turn with the task;
    the turn's final text comes back to the requester as reply `done`; the binding and completion are recorded."""
    async with world() as w:
        started = await w.call("agent/start", agent="worker")
        assert started["agent"]["status"] == "idle"
        assert started["provider_version"] == "1.0.0"
        receipt = await w.call("task/followup", session=w.lead, target="worker", message="Sum 2 and 2")
        rid = receipt["request_id"]
        fake = w.worker()
        await w.until(lambda: _true(bool(fake.turns_started)), "the task never reached the fake provider")
        turn_id, delivered = fake.turns_started[0]
        assert (delivered.request_id, delivered.text, delivered.sender.name) == (rid, "Sum 2 and 2", "lead")
        await w.until(lambda: _true(ledger.task(w.store, rid).state is TaskState.SUBMITTED),
                      "the binding was never stored")
        facts = ledger.task(w.store, rid)
        assert (facts.state, facts.turn_id, facts.claimed_by) == (TaskState.SUBMITTED, turn_id, "dispatch")
        await w.until(lambda: _worker_active(w), "the runtime never recorded the turn as active")
        listed = await w.call("agent/list")
        assert [(a["name"], a["status"], a["active_turn_id"]) for a in listed["agents"] if a["name"] == "worker"] \
            == [("worker", "active", turn_id)]

        fake.end_turn(OutcomeStatus.DONE, "4")
        records = await w.until(lambda: lead_records(w), "no reply reached the lead")
        assert [(r["kind"], r["request_id"], r["status"], r["text"], r["sender"]["name"]) for r in records] == [
            ("reply", rid, "done", "4", "worker")]
        assert ledger.task(w.store, rid).reply_status is ReplyStatus.DONE


@pytest.mark.anyio
async def test_without_steer_a_task_for_a_busy_agent_waits_for_its_own_turn() -> None:
    """The runtime reads capabilities, not names: no `steer`, so a task admitted during a turn starts a turn of its
    own once that turn has ended, never a steer."""
    async with world() as w:
        await w.call("agent/start", agent="worker")
        fake = w.worker()
        first = (await w.call("task/followup", session=w.lead, target="worker", message="one"))["request_id"]
        await w.until(lambda: _true(len(fake.turns_started) == 1), "the first task never started a turn")
        second = (await w.call("task/followup", session=w.lead, target="worker", message="two"))["request_id"]
        await anyio.sleep(0.05)
        assert len(fake.turns_started) == 1
        assert ledger.task(w.store, second).state is TaskState.PENDING
        fake.end_turn(OutcomeStatus.DONE, "first answer")
        await w.until(lambda: _true(len(fake.turns_started) == 2), "the second task never got its own turn")
        assert [t.request_id for _, t in fake.turns_started] == [first, second]


@pytest.mark.anyio
async def test_an_interrupt_reaches_the_exact_turn_and_the_requester_gets_a_blocked_notice() -> None:
    """INT-1, CMP-2: interrupt_agent interrupts the exact observed active turn; an interrupted turn returns an
    attributed Wardian blocked notice."""
    async with world() as w:
        await w.call("agent/start", agent="worker")
        fake = w.worker()
        rid = (await w.call("task/followup", session=w.lead, target="worker", message="long job"))["request_id"]
        await w.until(lambda: _true(bool(fake.turns_started)), "the task never started a turn")
        turn_id = fake.turns_started[0][0]
        await w.until(lambda: _worker_active(w), "the runtime never recorded the turn as active")
        result = await w.call("agent/interrupt", session=w.lead, target="worker")
        assert result["turn_id"] == turn_id
        assert fake.interrupted == [turn_id]
        records = await w.until(lambda: lead_records(w), "no notice reached the lead")
        assert [(r["kind"], r["request_id"], r["status"], r["sender_kind"]) for r in records] == [
            ("notice", rid, "blocked", "wardian")]
        with pytest.raises(errors.NotActive):
            await w.call("agent/interrupt", session=w.lead, target="worker")


@pytest.mark.anyio
async def test_information_is_pushed_when_the_provider_can_inject() -> None:
    """DLV-7, RCPT-1: information reaches a capable session without a turn; its receipt says provider_visible."""
    async with world() as w:
        await w.call("agent/start", agent="worker")
        receipt = await w.call("message/send", session=w.lead, target="worker", message="FYI")
        assert receipt["delivery"] == "provider_visible"
        assert [r.text for r in w.worker().pushed] == ["FYI"]
        assert w.worker().turns_started == []


@pytest.mark.anyio
async def test_without_an_exact_completion_boundary_the_recipient_must_reply() -> None:
    """RPL-5: providers without an exact native completion boundary still require explicit reply; what a provider
    cannot do (inject, interrupt) is refused or left on the receive path, by capability."""
    caps = Capabilities(steer=False, inject=False, interrupt=False, exact_completion=False)
    async with world(caps) as w:
        await w.call("agent/start", agent="worker")
        fake = w.worker()
        rid = (await w.call("task/followup", session=w.lead, target="worker", message="job"))["request_id"]
        await w.until(lambda: _true(bool(fake.turns_started)), "the task never started a turn")
        await w.until(lambda: _worker_active(w), "the runtime never recorded the turn as active")
        with pytest.raises(errors.Unsupported):
            await w.call("agent/interrupt", session=w.lead, target="worker")
        fake.end_turn(OutcomeStatus.DONE, "said in the turn")
        await anyio.sleep(0.05)
        assert await lead_records(w) == []
        assert ledger.task(w.store, rid).state is TaskState.SUBMITTED
        receipt = await w.call("message/send", session=w.lead, target="worker", message="FYI")
        assert receipt["delivery"] == "admitted"  # no inject: it stays on the receive path
        assert fake.pushed == []


async def _true(value: bool) -> bool:
    return value


async def _worker_active(w: World) -> bool:
    agents = (await w.call("agent/list"))["agents"]
    return any(a["name"] == "worker" and a["status"] == "active" for a in agents)
