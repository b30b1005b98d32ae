"""Tasks: `task/followup` (assign work) and `task/reply` (complete it), and the task facts other results carry."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, with_config
from typing_extensions import TypedDict

from wardian.durations import check_deadline_ms
from wardian.model import MAX_REQUEST_ID_CHARS, ReplyReceipt, TaskFacts
from wardian.protocol.methods.base import (
    CLOSED,
    Delivery,
    MessageField,
    PartyResult,
    ReplyStatusName,
    SessionParams,
    check_text,
    party_result,
)
from wardian.protocol.methods.messages import MessageSendParams


class TaskFollowupParams(MessageSendParams):
    deadline_ms: int | None = None
    """How long the recipient has (from admission) before the app ends the task as failed (deadline_exceeded);
    None: the team's `task_deadline`, else none."""

    @field_validator("deadline_ms")
    @classmethod
    def _deadline(cls, v: int | None) -> int | None:
        return check_deadline_ms(v)


class TaskReplyParams(SessionParams):
    request_id: Annotated[str, Field(min_length=1, max_length=MAX_REQUEST_ID_CHARS)]
    status: ReplyStatusName
    message: MessageField

    @field_validator("message")
    @classmethod
    def _message(cls, v: str) -> str:
        return check_text(v)


@with_config(CLOSED)
class TaskFactsResult(TypedDict):
    state: Literal["pending", "claimed", "submitted", "uncertain", "completed"]
    claimed_by: Literal["receive", "dispatch", "reply"] | None
    claim_generation: int | None
    claimed_at: int | None
    submitted_at: int | None
    thread_id: str | None
    turn_id: str | None
    uncertain_at: int | None
    completed_at: int | None
    reply_status: ReplyStatusName | None
    reply_id: str | None
    lookup: Literal["confirmed", "not_found"] | None


def task_facts_result(f: TaskFacts) -> TaskFactsResult:
    return {"state": f.state.value, "claimed_by": f.claimed_by.value if f.claimed_by else None,
            "claim_generation": f.claim_generation, "claimed_at": f.claimed_at, "submitted_at": f.submitted_at,
            "thread_id": f.thread_id, "turn_id": f.turn_id, "uncertain_at": f.uncertain_at,
            "completed_at": f.completed_at, "reply_status": f.reply_status.value if f.reply_status else None,
            "reply_id": f.reply_id, "lookup": f.lookup}


@with_config(CLOSED)
class ReplyResult(TypedDict):
    reply_id: str
    request_id: str
    status: ReplyStatusName
    requester: PartyResult
    delivery: Delivery
    created_at: int


def reply_result(r: ReplyReceipt, delivery: Delivery) -> ReplyResult:
    return {"reply_id": r.reply_id, "request_id": r.request_id, "status": r.status.value,
            "requester": party_result(r.requester), "delivery": delivery, "created_at": r.created_at}
