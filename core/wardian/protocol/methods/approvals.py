"""Approvals (docs/guide/approvals.md): `approval/list`, `approval/show` and `approval/answer` for a person,
`approval/answer` for a lead agent too (the `answer_approval` tool), and the approval records `mailbox/records` and
`agent/overview` carry."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, with_config
from typing_extensions import TypedDict

from wardian import errors
from wardian.approvals import ID_PREFIX, MAX_REASON_CHARS, POLICIES, Approval, ApprovalTally
from wardian.protocol.methods.base import CLOSED, LimitField, Params, PartyResult, Session, party_result

ApprovalIdField = Annotated[str, Field(min_length=1, max_length=64)]
PolicyName = Literal["person", "lead", "deny"]
assert set(POLICIES) == {"person", "lead", "deny"}


def check_approval_id(v: str) -> str:
    rest = v[len(ID_PREFIX):]
    if not v.startswith(ID_PREFIX) or not (rest.isascii() and rest.isalnum()):
        raise errors.InvalidArguments(f"{v[:80]!r} is no approval id", field="approval_id",
                                      allowed="an apr_ id of `wardian approval list`")
    return v


class ApprovalListParams(Params):
    pending: bool = True
    """Only the pending approvals (False: the newest of every end too)."""
    limit: LimitField | None = None


class ApprovalShowParams(Params):
    approval_id: ApprovalIdField

    @field_validator("approval_id")
    @classmethod
    def _id(cls, v: str) -> str:
        return check_approval_id(v)


class ApprovalAnswerParams(Params):
    """A person's answer (`wardian approval allow|deny`, the console: no session) or a lead agent's (the
    `answer_approval` tool: the session of the agent that may answer it)."""

    session: Session | None = None
    """The answering agent's session; None: a person."""
    approval_id: ApprovalIdField
    decision: Literal["allow", "deny"]
    always: bool | None = None
    """Allow always, when the provider offered it (only with `allow`); None: once."""
    reason: Annotated[str, Field(min_length=1, max_length=MAX_REASON_CHARS)] | None = None
    """Told to the model with a deny, when its provider can carry it; an empty one is refused (omit it)."""

    @field_validator("approval_id")
    @classmethod
    def _id(cls, v: str) -> str:
        return check_approval_id(v)


@with_config(CLOSED)
class PermissionOptionResult(TypedDict):
    option_id: str
    name: str
    kind: str


@with_config(CLOSED)
class ApprovalResult(TypedDict):
    """One approval: what the agent asked, who may answer, and its end (docs/guide/approvals.md)."""

    approval_id: str
    agent: PartyResult
    request_id: str | None
    """The task (`ask_…`) whose turn asked; None outside a task's turn."""
    turn_id: str | None
    kind: str
    tool: str | None
    summary: str
    detail: dict[str, Any]
    options: list[PermissionOptionResult]
    policy: PolicyName
    answerer: PartyResult | None
    """The lead agent that may answer it; None: a person."""
    deadline_at: int | None
    status: Literal["pending", "allowed", "denied", "expired", "withdrawn"]
    decided_by: str | None
    always: bool
    reason: str | None
    created_at: int
    ended_at: int | None


def approval_result(r: Approval) -> ApprovalResult:
    return {"approval_id": r.approval_id, "agent": party_result(r.agent), "request_id": r.request_id,
            "turn_id": r.turn_id, "kind": r.kind, "tool": r.tool, "summary": r.summary, "detail": dict(r.detail),
            "options": [{"option_id": o.option_id, "name": o.name, "kind": o.kind} for o in r.options],
            "policy": r.policy.value, "answerer": None if r.answerer is None else party_result(r.answerer),
            "deadline_at": r.deadline_at, "status": r.status.value, "decided_by": r.decided_by, "always": r.always,
            "reason": r.reason, "created_at": r.created_at, "ended_at": r.ended_at}


@with_config(CLOSED)
class ApprovalTallyResult(TypedDict):
    count: int
    pending: int
    last: ApprovalResult


def approval_tally_result(t: ApprovalTally | None) -> ApprovalTallyResult | None:
    return None if t is None else {"count": t.count, "pending": t.pending, "last": approval_result(t.last)}


@with_config(CLOSED)
class ApprovalListResult(TypedDict):
    approvals: list[ApprovalResult]
    """Oldest first."""
