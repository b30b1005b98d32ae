"""The mailbox: `mailbox/receive` (read and acknowledge, optionally waiting for a record), `mailbox/wait` (wait for
activity, no body) and `mailbox/records` (every record, for the operator)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from wardian.app.service.messages import caller_of
from wardian.app.service.registry import handlers
from wardian.app.signals import CONNECTION, DEADLOCK, MAILBOX_ACTIVITY, PROVIDER_CONTEXT, ConnectionWaits, Waiter
from wardian.approvals import Approval
from wardian.model import (
    DEFAULT_RECEIVE_LIMIT,
    DEFAULT_WAIT_MS,
    Caller,
    LogRecord,
    ReceivePage,
    WakeReason,
)
from wardian.protocol.methods import (
    MailboxReceiveParams,
    MailboxRecordsParams,
    MailboxRecordsResult,
    MailboxWaitParams,
    OperatorReceiveParams,
    ReceiveResult,
    WaitResult,
    deadlock_result,
    log_record_result,
    receive_result,
)
from wardian.protocol.methods.approvals import approval_result
from wardian.store import Store, approvals, history, mailbox, roster

if TYPE_CHECKING:
    from wardian.app.service.app import AppService


def receive_page(store: Store, session: str | None, cursor: str | None, ack_cursor: str | None,
                 limit: int) -> ReceivePage:
    """One read of the caller's mailbox (`caller_of`; `mailbox.receive`): acknowledge `ack_cursor`'s page, then the
    page after `cursor`. Its reads come first and its writes are one atomic store function, so it may run bare."""
    return mailbox.receive(store, caller_of(store, session), cursor=cursor, ack_cursor=ack_cursor, limit=limit)


def _read_or_context(store: Store, session: str | None, cursor: str | None, ack_cursor: str | None, limit: int,
                     waiter: Waiter, me: int) -> tuple[ReceivePage, bool] | None:
    """A waiting receive's read: the page, and whether pushed context waited instead (taken, when the page is
    empty); None once the wait was abandoned (nothing read, nothing taken)."""
    if waiter.abandoned:
        return None
    page = receive_page(store, session, cursor, ack_cursor, limit)
    return page, (not page.records and not waiter.abandoned and mailbox.take_unseen_context(store, me))


@handlers.serves("mailbox/receive")
async def receive(app: AppService, p: MailboxReceiveParams) -> ReceiveResult:
    return await receive_as(app, p, p.session)


async def receive_as(app: AppService, p: MailboxReceiveParams | OperatorReceiveParams,
                     session: str | None) -> ReceiveResult:
    """A receive for the caller `session` names (`caller_of`: a session's, or the operator's for None): one read,
    or with `timeout_ms` a wait for the first record."""
    limit = p.limit if p.limit is not None else DEFAULT_RECEIVE_LIMIT
    timeout_ms = p.timeout_ms or 0

    def result(page: ReceivePage, timed_out: bool, reason: WakeReason | None) -> ReceiveResult:
        # An empty page leaves the reading position where it was.
        cursor = page.cursor if page.cursor is not None else p.cursor
        return receive_result(page, cursor=cursor, timed_out=timed_out, wake_reason=reason)

    if timeout_ms == 0:
        page = await app.writer.call(receive_page, session, p.cursor, p.ack_cursor, limit, bare=True)
        return result(page, False, None)
    # A wait: it ends, as if its time ran out, once its connection has gone (signals.ConnectionWaits), reading
    # and writing nothing more; in particular it acknowledges nothing it had not yet and takes no context.
    connection = CONNECTION.get()
    if connection is not None and connection.gone:
        return result(ReceivePage(records=(), cursor=None, acked=0, more=False), True, None)
    caller = await app.writer.call(caller_of, session)
    page, timed_out, reason = await _wait_for_records(app, caller, session, p.cursor, p.ack_cursor, limit,
                                                      timeout_ms)
    return result(page, timed_out, reason)


async def _wait_for_records(
    app: AppService, caller: Caller, session: str | None, cursor: str | None, ack: str | None, limit: int,
    timeout_ms: int,
) -> tuple[ReceivePage, bool, WakeReason | None]:
    """Read until a record comes (or provider context instead), or the wait expires: the page, whether it timed out
    and what woke it."""
    me = caller.agent.id
    acked, reason = 0, None
    with anyio.move_on_after(timeout_ms / 1000):
        while True:
            with app.signals.subscribe(caller.agent.uuid) as waiter:
                if waiter.abandoned:
                    break
                # Subscribed before reading, so a record committed after the read still wakes us.
                looked = await app.writer.call(_read_or_context, session, cursor, ack, limit, waiter, me)
                if looked is None:
                    break
                page, context = looked
                ack, acked = None, acked + page.acked  # acknowledged once; later reads only look
                if page.records:
                    return ReceivePage(page.records, page.cursor, acked, page.more), False, reason
                if context:
                    # Pushed into the live conversation (now or just before this wait): no duplicate body,
                    # nothing acknowledged; the model sees it in its next request.
                    return ReceivePage((), None, acked, False), False, PROVIDER_CONTEXT
                await waiter.wait()
                if waiter.abandoned:
                    break
                # A receive's wait is never the deadlock guard's (only `mailbox/wait` blocks with it).
                reason = MAILBOX_ACTIVITY if waiter.reason == DEADLOCK else waiter.reason
    # Expired (or abandoned): an empty wait cancels nothing; later messages and replies remain available.
    return ReceivePage(records=(), cursor=None, acked=acked, more=False), True, None


def _look(store: Store, me: int, connection: ConnectionWaits | None) -> WakeReason | None:
    """A wait's look: activity on the receive path, else pushed context (taken); nothing once its connection went."""
    if connection is not None and connection.gone:
        return None
    if mailbox.has_unacked(store, me):
        return MAILBOX_ACTIVITY
    return PROVIDER_CONTEXT if mailbox.take_unseen_context(store, me) else None


def _authenticate_and_look(store: Store, session: str,
                           connection: ConnectionWaits | None) -> tuple[Caller, WakeReason | None]:
    caller = roster.authenticate(store, session)
    return caller, _look(store, caller.agent.id, connection)


def _take_context(store: Store, waiter: Waiter, me: int) -> bool:
    """The context that woke a wait, taken unless the wait was abandoned meanwhile."""
    return not waiter.abandoned and mailbox.take_unseen_context(store, me)


@handlers.serves("mailbox/wait")
async def wait(app: AppService, p: MailboxWaitParams) -> WaitResult:
    timeout_ms = DEFAULT_WAIT_MS if p.timeout_ms is None else p.timeout_ms
    # It ends, as if its time ran out, once its connection has gone (signals.ConnectionWaits), reading and
    # writing nothing more: no provider context is taken for a wait nobody will read.
    connection = CONNECTION.get()
    expired: WaitResult = {"woke": False, "timed_out": True, "wake_reason": None}
    if connection is not None and connection.gone:
        return expired
    # One store operation learns the caller and looks; a signal sent between that look and the subscription is
    # caught by `signals.sent` (then it looks again, subscribed). 100 waits on one mailbox arm in one round trip
    # each instead of two. On a shared store the look is first read on the loop (`Backend.wait_reader`), which
    # answers alone when nothing needs a write; otherwise the writer looks, as if the reader had not been asked.
    sent_before = app.signals.sent
    looked = None
    reader = app.writer.wait_reader
    if reader is not None:
        looked = await reader.look(p.session)
    if looked is not None:
        caller = looked.caller
        found = MAILBOX_ACTIVITY if looked.pending and not (connection is not None and connection.gone) else None
    else:
        caller, found = await app.writer.call(_authenticate_and_look, p.session, connection)
    if found is not None:
        return {"woke": True, "timed_out": False, "wake_reason": found}
    me = caller.agent.id
    with app.signals.subscribe(caller.agent.uuid) as waiter:
        if waiter.abandoned:
            return expired
        if app.signals.sent != sent_before:
            found = await app.writer.call(_look, me, connection)
            if found is not None:
                return {"woke": True, "timed_out": False, "wake_reason": found}
        if timeout_ms == 0:
            return expired
        deadlocks = app.runtime.deadlocks
        with deadlocks.blocking(me, waiter):
            # Blocked from here: the last agent of a cycle to wait is the one that closes it (runtime/deadlocks.py).
            deadlocks.blocked()
            if await waiter.wait_for(timeout_ms / 1000) and not waiter.abandoned:
                if waiter.reason == DEADLOCK and waiter.deadlock is not None:
                    return {"woke": False, "timed_out": False, "wake_reason": DEADLOCK,
                            "deadlock": deadlock_result(waiter.deadlock)}
                if waiter.reason == PROVIDER_CONTEXT:
                    await app.writer.call(_take_context, waiter, me)
                return {"woke": True, "timed_out": False, "wake_reason": waiter.reason}
    return expired


@handlers.serves("mailbox/records")
async def records(app: AppService, p: MailboxRecordsParams) -> MailboxRecordsResult:
    found, asked = await app.writer.call(_log, p.limit)
    return {"records": [log_record_result(r) for r in found], "approvals": [approval_result(r) for r in asked]}


def _log(store: Store, limit: int) -> tuple[list[LogRecord], list[Approval]]:
    """`mailbox/records`' reads, in one transaction: the records and the approvals, newest `limit` each."""
    return history.log_records(store, limit), approvals.listing(store, False, limit)
