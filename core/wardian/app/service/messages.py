"""Sending information and tasks: the store operation that admits one (also what the benchmark runs on the store
alone), and `message/send`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wardian.app.service.registry import handlers
from wardian.model import Caller, InteractionKind, Receipt
from wardian.protocol.methods import (
    MessageSendParams,
    OperatorFollowupParams,
    OperatorSendParams,
    SendResult,
    TaskFollowupParams,
    send_result,
)
from wardian.store import Store, chains, mailbox, roster
from wardian.store.api import Pushable

if TYPE_CHECKING:
    from wardian.app.service.app import AppService


def caller_of(store: Store, session: str | None) -> Caller:
    """Who acts: the caller a session token resolves to, or the operator for `session` None (the control socket
    vouched for it: an operator method has no session parameter).

    Raises: what `roster.authenticate` raises."""
    return roster.operator(store) if session is None else roster.authenticate(store, session)


def admit_as(store: Store, session: str | None, target: str, kind: InteractionKind, text: str,
             push: Pushable | None = None, deadline_ms: int | None = None) -> Receipt:
    """The store operation of a send or follow-up: the caller (`caller_of`), the exact target, the admission
    (information for a recipient `push` says yes to is admitted for a push). A task gets its place in its chain
    (the loop guard) and its deadline: `deadline_ms`, else the team's `task_deadline`.

    Its reads come first and its writes are one atomic store function, so it may run bare in a batch. Also what
    `scripts/bench.py` runs on the store alone for the throughput ceiling.

    Raises: what `roster` raises; TaskDepthExceeded, ChainBudgetExceeded (nothing admitted).
    """
    caller = caller_of(store, session)
    recipient = roster.resolve_target(store, caller, target)
    if kind is InteractionKind.TASK:
        policy = chains.policy(store)
        line = chains.lineage(store, caller, policy)
        deadline = policy.task_deadline_ms if deadline_ms is None else deadline_ms
        return mailbox.admit(store, caller, recipient, kind, text, lineage=line, deadline_ms=deadline)
    pushing = push is not None and push(recipient.uuid)
    return mailbox.admit(store, caller, recipient, kind, text, push=pushing)


async def admit(app: AppService, p: MessageSendParams | OperatorSendParams, kind: InteractionKind) -> SendResult:
    """Admit a send or follow-up of a session's caller or of the operator, then hand it to the runtime: a task to
    its dispatch, information to a push into the recipient's live conversation where it can take one."""
    runtime = app.runtime
    session = p.session if isinstance(p, MessageSendParams) else None
    deadline = p.deadline_ms if isinstance(p, TaskFollowupParams | OperatorFollowupParams) else None
    receipt = await app.writer.call(admit_as, session, p.target, kind, p.message, runtime.pushes.can_push, deadline,
                                    bare=True)
    if kind is InteractionKind.TASK:
        if receipt.deadline_at is not None:
            runtime.deadlines.changed()
        runtime.launcher.task_admitted(receipt.recipient.uuid)
        app.signals.notify(receipt.recipient.uuid)
        return send_result(receipt, "admitted")
    if await runtime.pushes.deliver(receipt.recipient.uuid, receipt.interaction_id, receipt.pushing):
        return send_result(receipt, "provider_visible")  # already in the peer's live conversation
    return send_result(receipt, "admitted")


@handlers.serves("message/send")
async def send(app: AppService, p: MessageSendParams) -> SendResult:
    return await admit(app, p, InteractionKind.INFORMATION)
