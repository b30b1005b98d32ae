"""Tasks: `task/followup` assigns one (admitted as a send is), `task/reply` completes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wardian import errors
from wardian.app.service.messages import admit
from wardian.app.service.registry import handlers
from wardian.model import InteractionKind, ReplyReceipt, ReplyStatus
from wardian.protocol.methods import (
    ReplyResult,
    SendResult,
    TaskFollowupParams,
    TaskReplyParams,
    TeamPolicyParams,
    TeamPolicyResult,
    reply_result,
    team_policy_result,
)
from wardian.store import Store, chains, ledger, roster
from wardian.store.api import Pushable

if TYPE_CHECKING:
    from wardian.app.service.app import AppService


@handlers.serves("task/followup")
async def followup(app: AppService, p: TaskFollowupParams) -> SendResult:
    return await admit(app, p, InteractionKind.TASK)


def reply_as(store: Store, session: str, request_id: str, status: ReplyStatus, text: str,
             push: Pushable) -> ReplyReceipt:
    """The session's caller replies to its task (`ledger.reply`): its reads come first and its writes are one atomic
    store function, so it may run bare in a batch.

    Raises: what `ledger.reply` raises, and DeadlineExceeded for a task the app ended at its deadline."""
    caller = roster.authenticate(store, session)
    try:
        return ledger.reply(store, caller, request_id, status, text, push)
    except errors.AlreadyCompleted:
        late = chains.late_reply(store, request_id)
        if late is None:
            raise
        raise late from None


@handlers.serves("task/reply")
async def reply(app: AppService, p: TaskReplyParams) -> ReplyResult:
    status = ReplyStatus(p.status)
    pushes = app.runtime.pushes
    receipt = await app.writer.call(reply_as, p.session, p.request_id, status, p.message, pushes.can_push, bare=True)
    pushed = await pushes.deliver(receipt.requester.uuid, receipt.reply_id, receipt.pushing)
    return reply_result(receipt, "provider_visible" if pushed else "admitted")


@handlers.serves("team/policy")
async def team_policy(app: AppService, p: TeamPolicyParams) -> TeamPolicyResult:
    """The team's task deadline and loop-guard limits, replaced whole: they apply to tasks admitted from now on."""
    policy = await app.writer.call(chains.set_policy, p.to_record())
    app.runtime.deadlines.changed()
    return team_policy_result(policy)
