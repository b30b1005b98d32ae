"""Sending information and tasks: the store operation that admits one (also what the benchmark runs on the store
alone), and `message/send`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from wardian.app.service.registry import handlers
from wardian.model import InteractionKind, Receipt
from wardian.protocol.methods import MessageSendParams, OperatorSendParams, SendResult, send_result
from wardian.store import Store
from wardian.store.api import Pushable

if TYPE_CHECKING:
    from wardian.app.service.app import AppService


def admit_op(session: str, target: str, kind: InteractionKind, text: str,
             push: Pushable | None = None) -> Callable[[Store], Receipt]:
    """The store operation of a send or follow-up: authenticate the caller, resolve the exact target, admit
    (information for a recipient `push` says yes to is admitted for a push).

    Its reads come first and its writes are one atomic store method, so it may run bare in a batch. Also what
    `scripts/bench.py` runs on the store alone for the throughput ceiling.
    """
    def op(s: Store) -> Receipt:
        caller = s.authenticate(session)
        recipient = s.resolve_target(caller, target)
        pushing = kind is InteractionKind.INFORMATION and push is not None and push(recipient.uuid)
        return s.admit(caller, recipient, kind, text, push=pushing)

    return op


def operator_admit_op(target: str, kind: InteractionKind, text: str,
                      push: Pushable | None = None) -> Callable[[Store], Receipt]:
    """`admit_op` for the operator: the same target resolution and admission, with the operator as the caller (the
    control socket vouched for it; no session is involved)."""
    def op(s: Store) -> Receipt:
        caller = s.operator()
        recipient = s.resolve_target(caller, target)
        pushing = kind is InteractionKind.INFORMATION and push is not None and push(recipient.uuid)
        return s.admit(caller, recipient, kind, text, push=pushing)

    return op


async def admit(app: AppService, p: MessageSendParams | OperatorSendParams, kind: InteractionKind) -> SendResult:
    """Admit a send or follow-up of a session's caller or of the operator, then hand it to the runtime: a task to
    its dispatch, information to a push into the recipient's live conversation where it can take one."""
    runtime = app.runtime
    op = (admit_op(p.session, p.target, kind, p.message, runtime.can_push) if isinstance(p, MessageSendParams)
          else operator_admit_op(p.target, kind, p.message, runtime.can_push))
    receipt = await app.writer.call(op, bare=True)
    if kind is InteractionKind.TASK:
        runtime.task_admitted(receipt.recipient.uuid)
        app.signals.notify(receipt.recipient.uuid)
        return send_result(receipt, "admitted")
    if await runtime.deliver(receipt.recipient.uuid, receipt.interaction_id, receipt.pushing):
        return send_result(receipt, "provider_visible")  # already in the peer's live conversation
    return send_result(receipt, "admitted")


@handlers.serves("message/send")
async def send(app: AppService, p: MessageSendParams) -> SendResult:
    return await admit(app, p, InteractionKind.INFORMATION)
