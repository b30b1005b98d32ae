"""Tasks: `task/followup` assigns one (admitted as a send is), `task/reply` completes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wardian.app.service.messages import admit
from wardian.app.service.registry import handlers
from wardian.model import InteractionKind, ReplyStatus
from wardian.protocol.methods import ReplyResult, SendResult, TaskFollowupParams, TaskReplyParams, reply_result

if TYPE_CHECKING:
    from wardian.app.service.app import AppService


@handlers.serves("task/followup")
async def followup(app: AppService, p: TaskFollowupParams) -> SendResult:
    return await admit(app, p, InteractionKind.TASK)


@handlers.serves("task/reply")
async def reply(app: AppService, p: TaskReplyParams) -> ReplyResult:
    status = ReplyStatus(p.status)
    runtime = app.runtime
    receipt = await app.writer.call(
        lambda s: s.reply(s.authenticate(p.session), p.request_id, status, p.message, runtime.can_push), bare=True)
    pushed = await runtime.deliver(receipt.requester.uuid, receipt.reply_id, receipt.pushing)
    return reply_result(receipt, "provider_visible" if pushed else "admitted")
