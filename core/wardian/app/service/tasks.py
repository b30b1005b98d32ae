"""Tasks: `task/followup` assigns one (admitted as a send is), `task/reply` completes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wardian.app.service.messages import admit
from wardian.app.service.registry import handlers
from wardian.model import InteractionKind, ReplyReceipt, ReplyStatus
from wardian.protocol.methods import ReplyResult, SendResult, TaskFollowupParams, TaskReplyParams, reply_result
from wardian.store import Store, ledger, roster
from wardian.store.api import Pushable

if TYPE_CHECKING:
    from wardian.app.service.app import AppService


@handlers.serves("task/followup")
async def followup(app: AppService, p: TaskFollowupParams) -> SendResult:
    return await admit(app, p, InteractionKind.TASK)


def reply_as(store: Store, session: str, request_id: str, status: ReplyStatus, text: str,
             push: Pushable) -> ReplyReceipt:
    """The session's caller replies to its task (`ledger.reply`): its reads come first and its writes are one atomic
    store function, so it may run bare in a batch."""
    return ledger.reply(store, roster.authenticate(store, session), request_id, status, text, push)


@handlers.serves("task/reply")
async def reply(app: AppService, p: TaskReplyParams) -> ReplyResult:
    status = ReplyStatus(p.status)
    pushes = app.runtime.pushes
    receipt = await app.writer.call(reply_as, p.session, p.request_id, status, p.message, pushes.can_push, bare=True)
    pushed = await pushes.deliver(receipt.requester.uuid, receipt.reply_id, receipt.pushing)
    return reply_result(receipt, "provider_visible" if pushed else "admitted")
