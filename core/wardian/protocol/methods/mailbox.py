"""The mailbox: `mailbox/receive` (read and acknowledge), `mailbox/wait` (activity, no body) and `mailbox/records`
(every record, for the operator)."""

from __future__ import annotations

from typing import Annotated, NotRequired

from pydantic import Field, ValidationInfo, field_validator, with_config
from typing_extensions import TypedDict

from wardian.model import LogRecord, ReceivedRecord, ReceivePage, WaitReason, WakeReason
from wardian.protocol.methods.approvals import ApprovalResult
from wardian.protocol.methods.base import (
    CLOSED,
    CursorField,
    InteractionResult,
    LimitField,
    Params,
    SessionParams,
    TimeoutField,
    check_cursor,
    interaction_result,
    party_result,
    sender_kind,
)
from wardian.protocol.methods.tasks import TaskFactsResult, task_facts_result
from wardian.taskpolicy import Deadlock

DEADLOCK_NEXT = ("No reply can end these waits: each agent named waits for a task another one holds. Answer the tasks "
                 "in holding now (reply with their request_id: done, or blocked/failed to give up); waiting again "
                 "changes nothing.")


class MailboxReceiveParams(SessionParams):
    cursor: CursorField | None = None
    ack_cursor: CursorField | None = None
    limit: LimitField | None = None
    timeout_ms: TimeoutField | None = None

    @field_validator("cursor", "ack_cursor")
    @classmethod
    def _cursor(cls, v: str | None, info: ValidationInfo) -> str | None:
        return check_cursor(v, str(info.field_name))


class MailboxWaitParams(SessionParams):
    timeout_ms: TimeoutField | None = None


class MailboxRecordsParams(Params):
    limit: Annotated[int, Field(ge=1, le=100_000)] = 1000


@with_config(CLOSED)
class RecordResult(InteractionResult):
    new_work: bool
    task: TaskFactsResult | None


def record_result(r: ReceivedRecord) -> RecordResult:
    # Spelled out rather than built on `interaction_result`: this is every receive's per-record cost, and copying a
    # built dict into another costs a fifth more.
    i = r.interaction
    return {"id": i.id, "kind": i.kind.value, "sender": party_result(i.sender) if i.sender else None,
            "sender_kind": sender_kind(i.sender), "recipient": party_result(i.recipient),
            "text": i.text, "created_at": i.created_at, "request_id": i.request_id,
            "status": i.status.value if i.status else None, "new_work": r.new_work,
            "task": task_facts_result(r.task) if r.task else None}


@with_config(CLOSED)
class LogRecordResult(InteractionResult):
    acked: bool
    task: TaskFactsResult | None


def log_record_result(r: LogRecord) -> LogRecordResult:
    return {**interaction_result(r.interaction), "acked": r.interaction.acked,
            "task": task_facts_result(r.task) if r.task else None}


@with_config(CLOSED)
class ReceiveResult(TypedDict):
    records: list[RecordResult]
    cursor: str | None
    acked: int
    more: bool
    timed_out: bool
    wake_reason: WakeReason | None


def receive_result(p: ReceivePage, *, cursor: str | None, timed_out: bool,
                   wake_reason: WakeReason | None) -> ReceiveResult:
    return {"records": [record_result(r) for r in p.records], "cursor": cursor, "acked": p.acked, "more": p.more,
            "timed_out": timed_out, "wake_reason": wake_reason}


@with_config(CLOSED)
class DeadlockTaskResult(TypedDict):
    request_id: str
    requester: str
    recipient: str


@with_config(CLOSED)
class DeadlockResult(TypedDict):
    """Why the deadlock guard ended a wait (docs/guide/teams.md): the agents waiting on each other, the tasks each
    waits for that another holds, which of them the caller holds (`holding`) and assigned (`waiting_for`)."""

    agents: list[str]
    tasks: list[DeadlockTaskResult]
    holding: list[str]
    waiting_for: list[str]
    next: str


def deadlock_result(d: Deadlock) -> DeadlockResult:
    return {"agents": list(d.agents),
            "tasks": [{"request_id": t.request_id, "requester": t.requester, "recipient": t.recipient}
                      for t in d.tasks],
            "holding": list(d.holding), "waiting_for": list(d.waiting_for), "next": DEADLOCK_NEXT}


@with_config(CLOSED)
class WaitResult(TypedDict):
    woke: bool
    timed_out: bool
    wake_reason: WaitReason | None
    deadlock: NotRequired[DeadlockResult]
    """Only when the deadlock guard ended the wait (`wake_reason: "deadlock"`, `woke` and `timed_out` false)."""


@with_config(CLOSED)
class MailboxRecordsResult(TypedDict):
    records: list[LogRecordResult]
    approvals: list[ApprovalResult]
    """The newest approvals (at most `limit`), oldest first (docs/guide/approvals.md)."""
