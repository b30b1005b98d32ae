"""The mailbox: `mailbox/receive` (read and acknowledge, optionally waiting for a record), `mailbox/wait` (wait for
activity, no body) and `mailbox/records` (every record, for the operator)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import anyio

from wardian.app.service.registry import handlers
from wardian.app.signals import CONNECTION, MAILBOX_ACTIVITY, PROVIDER_CONTEXT, Waiter
from wardian.model import DEFAULT_RECEIVE_LIMIT, DEFAULT_WAIT_MS, Caller, ReceivePage, WakeReason
from wardian.protocol.methods import (
    MailboxReceiveParams,
    MailboxRecordsParams,
    MailboxRecordsResult,
    MailboxWaitParams,
    OperatorReceiveParams,
    ReceiveResult,
    WaitResult,
    log_record_result,
    receive_result,
)
from wardian.store import Store

if TYPE_CHECKING:
    from wardian.app.service.app import AppService


@handlers.serves("mailbox/receive")
async def receive(app: AppService, p: MailboxReceiveParams) -> ReceiveResult:
    return await receive_as(app, p, lambda s: s.authenticate(p.session))


async def receive_as(app: AppService, p: MailboxReceiveParams | OperatorReceiveParams,
                     who: Callable[[Store], Caller]) -> ReceiveResult:
    """A receive for the caller `who` names (a session's, or the operator): one read, or with `timeout_ms` a wait
    for the first record."""
    limit = p.limit if p.limit is not None else DEFAULT_RECEIVE_LIMIT
    timeout_ms = p.timeout_ms or 0

    def read(ack: str | None) -> Callable[[Store], ReceivePage]:
        return lambda s: s.receive(who(s), cursor=p.cursor, ack_cursor=ack, limit=limit)

    def result(page: ReceivePage, timed_out: bool, reason: WakeReason | None) -> ReceiveResult:
        # An empty page leaves the reading position where it was.
        cursor = page.cursor if page.cursor is not None else p.cursor
        return receive_result(page, cursor=cursor, timed_out=timed_out, wake_reason=reason)

    if timeout_ms == 0:
        return result(await app.writer.call(read(p.ack_cursor), bare=True), False, None)
    # A wait: it ends, as if its time ran out, once its connection has gone (signals.ConnectionWaits), reading
    # and writing nothing more; in particular it acknowledges nothing it had not yet and takes no context.
    connection = CONNECTION.get()
    if connection is not None and connection.gone:
        return result(ReceivePage(records=(), cursor=None, acked=0, more=False), True, None)
    caller = await app.writer.call(who)
    page, timed_out, reason = await _wait_for_records(app, caller, p.ack_cursor, read, timeout_ms)
    return result(page, timed_out, reason)


async def _wait_for_records(
    app: AppService, caller: Caller, ack: str | None, read: Callable[[str | None], Callable[[Store], ReceivePage]],
    timeout_ms: int,
) -> tuple[ReceivePage, bool, WakeReason | None]:
    """Read until a record comes (or provider context instead), or the wait expires: the page, whether it timed out
    and what woke it."""
    me = caller.agent.id
    acked, reason = 0, None

    def read_or_context(ack_: str | None, waiter: Waiter) -> Callable[[Store], tuple[ReceivePage, bool] | None]:
        def op(s: Store) -> tuple[ReceivePage, bool] | None:
            if waiter.abandoned:
                return None
            page = read(ack_)(s)
            return page, (not page.records and not waiter.abandoned and s.take_unseen_context(me))
        return op

    with anyio.move_on_after(timeout_ms / 1000):
        while True:
            with app.signals.subscribe(caller.agent.uuid) as waiter:
                if waiter.abandoned:
                    break
                # Subscribed before reading, so a record committed after the read still wakes us.
                looked = await app.writer.call(read_or_context(ack, waiter))
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
                reason = waiter.reason
    # Expired (or abandoned): an empty wait cancels nothing; later messages and replies remain available.
    return ReceivePage(records=(), cursor=None, acked=acked, more=False), True, None


@handlers.serves("mailbox/wait")
async def wait(app: AppService, p: MailboxWaitParams) -> WaitResult:
    timeout_ms = DEFAULT_WAIT_MS if p.timeout_ms is None else p.timeout_ms
    # It ends, as if its time ran out, once its connection has gone (signals.ConnectionWaits), reading and
    # writing nothing more: no provider context is taken for a wait nobody will read.
    connection = CONNECTION.get()
    expired: WaitResult = {"woke": False, "timed_out": True, "wake_reason": None}
    if connection is not None and connection.gone:
        return expired

    def look(s: Store, me: int) -> WakeReason | None:
        if connection is not None and connection.gone:
            return None
        if s.has_unacked(me):
            return MAILBOX_ACTIVITY
        return PROVIDER_CONTEXT if s.take_unseen_context(me) else None

    def authenticate_and_look(s: Store) -> tuple[Caller, WakeReason | None]:
        caller = s.authenticate(p.session)
        return caller, look(s, caller.agent.id)

    # One store operation learns the caller and looks; a signal sent between that look and the subscription is
    # caught by `signals.sent` (then it looks again, subscribed). 100 waits on one mailbox arm in one round trip
    # each instead of two. On a shared store the look is first read on the loop (`Store.wait_reader`), which answers
    # alone when nothing needs a write; otherwise the writer looks, as if the reader had not been asked.
    sent_before = app.signals.sent
    looked = None
    reader = app.writer.wait_reader()
    if reader is not None:
        looked = await reader.look(p.session)
    if looked is not None:
        caller = looked.caller
        found = MAILBOX_ACTIVITY if looked.pending and not (connection is not None and connection.gone) else None
    else:
        caller, found = await app.writer.call(authenticate_and_look)
    if found is not None:
        return {"woke": True, "timed_out": False, "wake_reason": found}
    me = caller.agent.id
    with app.signals.subscribe(caller.agent.uuid) as waiter:
        if waiter.abandoned:
            return expired
        if app.signals.sent != sent_before:
            found = await app.writer.call(partial(look, me=me))
            if found is not None:
                return {"woke": True, "timed_out": False, "wake_reason": found}
        if timeout_ms > 0 and await waiter.wait_for(timeout_ms / 1000) and not waiter.abandoned:
            if waiter.reason == PROVIDER_CONTEXT:
                await app.writer.call(lambda s: not waiter.abandoned and s.take_unseen_context(me))
            return {"woke": True, "timed_out": False, "wake_reason": waiter.reason}
    return expired


@handlers.serves("mailbox/records")
async def records(app: AppService, p: MailboxRecordsParams) -> MailboxRecordsResult:
    found = await app.writer.call(lambda s: s.log_records(limit=p.limit))
    return {"records": [log_record_result(r) for r in found]}
