"""The approvals seam (`wardian.providers.approvals`): a reply is settled once, by the first answer or withdrawal,
so an answer reaches a provider at most once and a withdrawn request is never answered (docs/guide/approvals.md)."""

from __future__ import annotations

import anyio
import pytest

from wardian.model import PermissionOption
from wardian.providers.approvals import REDACTED, ApprovalAsk, ApprovalReply, Decision, redact

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


def test_redact_cuts_each_credential_out_of_the_summary_and_every_string_of_the_detail() -> None:
    """docs/guide/approvals.md#secrets: an approval is stored and shown, so the agent's key never travels in it."""
    key = "sk-canary-redact-0c4e9a"
    ask = ApprovalAsk("t1", "command", f"run `curl -H 'x: {key}' h` in /w",
                      {"command": f"curl -H 'x: {key}' h", "input": {"argv": ["curl", key]}, "n": 3},
                      (PermissionOption("ok", "Allow", "allow_once"),), "run_shell_command")
    cleaned = redact(ask, [key, "short"])
    assert key not in repr(cleaned)
    assert cleaned.summary == f"run `curl -H 'x: {REDACTED}' h` in /w"
    assert cleaned.detail == {"command": f"curl -H 'x: {REDACTED}' h", "input": {"argv": ["curl", REDACTED]}, "n": 3}
    assert (cleaned.options, cleaned.tool, cleaned.turn_id) == (ask.options, ask.tool, ask.turn_id)
    assert redact(ask, ["short"]) is ask  # too short to search for: ordinary words stay
