"""How an ACP prompt's answer maps onto the contract (docs/guide/acp.md#how-the-contract-maps-onto-acp): the stop
reasons and errors a scripted model cannot make Qwen Code produce on demand, on the parser of the real wire shape."""

from __future__ import annotations

import pytest

from wardian.providers.acp.turns import Turn
from wardian.providers.base import OutcomeStatus


def chunk(text: str) -> dict[str, object]:
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


def test_end_turn_replies_with_the_text_after_the_last_tool_call() -> None:
    turn = Turn("turn_1")
    for update in (chunk("Let me look. "), {"sessionUpdate": "tool_call", "toolCallId": "c1"},
                   {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"},
                   chunk("All "), chunk("done ☃\nline two")):
        turn.update(update)
    outcome = turn.ended({"stopReason": "end_turn"})
    assert (outcome.turn_id, outcome.status, outcome.final_text) == ("turn_1", OutcomeStatus.DONE,
                                                                     "All done ☃\nline two")


def test_end_turn_without_text_after_the_last_tool_call_has_no_final_text() -> None:
    turn = Turn("turn_1")
    turn.update(chunk("before the tool"))
    turn.update({"sessionUpdate": "tool_call", "toolCallId": "c1"})
    turn.update(chunk("  "))
    assert turn.ended({"stopReason": "end_turn"}).final_text is None


@pytest.mark.parametrize("reason", ["max_tokens", "max_turn_requests", "refusal", "something_new"])
def test_every_other_stop_reason_fails_the_task_naming_it(reason: str) -> None:
    outcome = Turn("turn_1").ended({"stopReason": reason})
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error is not None
    assert reason in outcome.error


def test_cancelled_is_an_interruption() -> None:
    assert Turn("turn_1").ended({"stopReason": "cancelled"}).status is OutcomeStatus.INTERRUPTED


def test_an_error_answer_fails_the_task_and_after_a_cancel_is_an_interruption() -> None:
    failed = Turn("turn_1").refused("Internal error (code -32603)")
    assert (failed.status, failed.credentials_rejected) == (OutcomeStatus.FAILED, False)
    assert Turn("turn_1").refused("401 Incorrect API key provided").credentials_rejected
    cancelling = Turn("turn_1")
    cancelling.cancelling = True
    assert cancelling.refused("Internal error (code -32603)").status is OutcomeStatus.INTERRUPTED
