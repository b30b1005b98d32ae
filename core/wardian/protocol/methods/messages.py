"""Messages: `message/send` (information to one agent) and the send receipt every send and follow-up returns."""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator, with_config
from typing_extensions import TypedDict

from wardian.model import InteractionKind, Receipt
from wardian.protocol.methods.base import (
    CLOSED,
    Delivery,
    MessageField,
    PartyResult,
    SessionParams,
    TargetField,
    check_target,
    check_text,
    party_result,
)


class MessageSendParams(SessionParams):
    target: TargetField
    message: MessageField

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        return check_target(v)

    @field_validator("message")
    @classmethod
    def _message(cls, v: str) -> str:
        return check_text(v)


@with_config(CLOSED)
class SendResult(TypedDict):
    interaction_id: str
    kind: Literal["information", "task"]
    request_id: str | None
    sender: PartyResult
    target: PartyResult
    delivery: Delivery
    created_at: int
    deadline_at: int | None


def send_result(r: Receipt, delivery: Delivery) -> SendResult:
    kind: Literal["information", "task"] = "task" if r.kind is InteractionKind.TASK else "information"
    return {"interaction_id": r.interaction_id, "kind": kind, "request_id": r.request_id,
            "sender": party_result(r.sender), "target": party_result(r.recipient), "delivery": delivery,
            "created_at": r.created_at, "deadline_at": r.deadline_at}
