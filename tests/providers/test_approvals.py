"""The approvals seam (`wardian.providers.approvals`): a reply is settled once, by the first answer or withdrawal,
so an answer reaches a provider at most once and a withdrawn request is never answered (docs/guide/approvals.md)."""

from __future__ import annotations

import anyio
import pytest

from wardian.providers.approvals import ApprovalReply, Decision

pytestmark = pytest.mark.anyio


async def test_the_first_answer_wins_and_later_answers_or_withdrawals_change_nothing() -> None:
    reply = ApprovalReply()
    assert reply.open
    assert reply.answer(Decision(allow=True, always=True))
    assert not reply.answer(Decision(allow=False, reason="too late"))
    assert not reply.withdraw()
    assert not reply.open
    assert not reply.withdrawn
    assert await reply.wait() == Decision(allow=True, always=True)


async def test_a_withdrawn_reply_wakes_its_waiter_with_none_and_takes_no_answer() -> None:
    reply = ApprovalReply()
    got: list[Decision | None] = []

    async def waiter() -> None:
        got.append(await reply.wait())

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert reply.withdraw()
    assert got == [None]
    assert reply.withdrawn
    assert not reply.answer(Decision(allow=True))
