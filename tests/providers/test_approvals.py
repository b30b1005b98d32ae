"""The approvals seam (`wardian.providers.approvals`): a reply is settled once, by the first answer or withdrawal,
so an answer reaches a provider at most once and a withdrawn request is never answered (docs/guide/approvals.md)."""

from __future__ import annotations

from dataclasses import replace

import anyio
import pytest

from wardian.model import PermissionOption
from wardian.providers.approvals import REDACTED, ApprovalAsk, ApprovalAsked, ApprovalReply, Decision, redact
from wardian.providers.asking import OpenAsks
from wardian.providers.base import ProviderEvent

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


def _ask(turn_id: str | None = "t1") -> ApprovalAsk:
    return ApprovalAsk(turn_id, "command", "run `true` in /w", {"command": "true"},
                       (PermissionOption("ok", "Allow", "allow_once"),), "bash")


async def test_open_hands_the_request_to_the_app_at_once_and_decision_returns_its_answer() -> None:
    """A reader hands a request over without awaiting (`OpenAsks.open`): the app may record it before the task that
    waits for its answer has started (docs/guide/approvals.md#speed)."""
    emitted: list[ProviderEvent] = []
    asks = OpenAsks(emitted.append, ["sk-canary-open-5d1e"])
    asked = asks.open(replace(_ask(), summary="run `echo sk-canary-open-5d1e`"), key="k1")
    assert asked is not None
    (event,) = emitted
    assert isinstance(event, ApprovalAsked)
    assert event.reply is asked.reply
    assert event.ask.summary == f"run `echo {REDACTED}`"
    assert asks.count == 1
    assert event.reply.answer(Decision(allow=True))
    assert await asks.decision(asked) == Decision(allow=True)
    assert asks.count == 0
    assert not asks.cancelled("k1")  # settled and forgotten


async def test_a_request_opened_in_a_turn_that_ends_before_its_waiter_starts_is_withdrawn() -> None:
    """The turn ending withdraws what it asked even while nobody awaits the answer yet; the waiter then gets None and
    refuses (`OpenAsks` module docstring)."""
    emitted: list[ProviderEvent] = []
    asks = OpenAsks(emitted.append)
    asked = asks.open(_ask("t1"), key="k1")
    other = asks.open(_ask("t2"))
    assert asked is not None
    assert other is not None
    asks.turn_ended("t1")
    assert asked.reply.withdrawn
    assert other.reply.open
    assert await asks.decision(asked) is None
    assert asks.count == 1
    asks.end()
    assert await asks.decision(other) is None
    assert asks.count == 0


async def test_after_the_runtime_ended_open_asks_nothing_and_the_decision_is_none() -> None:
    emitted: list[ProviderEvent] = []
    asks = OpenAsks(emitted.append)
    asks.end()
    assert asks.open(_ask()) is None
    assert emitted == []
    assert await asks.decision(None) is None


async def test_a_cancelled_waiter_withdraws_the_request_it_opened() -> None:
    """Its provider went away: the app's pending approval must end (withdrawn), never stay open."""
    asks = OpenAsks(lambda _: None)
    asked = asks.open(_ask(), key="k1")
    assert asked is not None
    async with anyio.create_task_group() as tg:
        tg.start_soon(asks.decision, asked)
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert asked.reply.withdrawn
    assert asks.count == 0
    assert not asks.cancelled("k1")
