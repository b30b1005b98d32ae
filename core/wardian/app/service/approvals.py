"""Approvals (docs/guide/approvals.md): `approval/list`, `approval/show`, and `approval/answer` for a person or for
the lead agent an approval is routed to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wardian.app.service.registry import handlers
from wardian.model import DEFAULT_RECEIVE_LIMIT
from wardian.protocol.methods.approvals import (
    ApprovalAnswerParams,
    ApprovalListParams,
    ApprovalListResult,
    ApprovalResult,
    ApprovalShowParams,
    approval_result,
)
from wardian.providers.approvals import Decision
from wardian.store import approvals, roster

if TYPE_CHECKING:
    from wardian.app.service.app import AppService

PERSON = "person"


@handlers.serves("approval/list")
async def list_approvals(app: AppService, p: ApprovalListParams) -> ApprovalListResult:
    found = await app.writer.call(approvals.listing, p.pending, p.limit or DEFAULT_RECEIVE_LIMIT)
    return {"approvals": [approval_result(a) for a in found]}


@handlers.serves("approval/show")
async def show_approval(app: AppService, p: ApprovalShowParams) -> ApprovalResult:
    return approval_result(await app.writer.call(approvals.get, p.approval_id))


@handlers.serves("approval/answer")
async def answer_approval(app: AppService, p: ApprovalAnswerParams) -> ApprovalResult:
    """A person's answer, or with a session the answer of the lead the approval is routed to (`decided_by` its name).

    Raises: UnknownApproval, ApprovalEnded (nothing changed), NotRecipient (the session's agent is not the
    approval's lead: nothing changed), InvalidArguments, what `roster.authenticate` raises."""
    allow = p.decision == "allow"
    decision = Decision(allow=allow, always=allow and bool(p.always), reason=None if allow else p.reason)
    if p.session is None:
        return approval_result(await app.runtime.approvals.answer(p.approval_id, decision, PERSON))
    caller = await app.writer.call(roster.authenticate, p.session)
    ended = await app.runtime.approvals.answer(p.approval_id, decision, caller.agent.name, caller.agent.id)
    return approval_result(ended)
