"""The one push queue: information, replies and notices put into a recipient's live conversation without a turn.

A record reaches its recipient by exactly one path. Whether it is pushed is decided inside its admission's
transaction (`can_push`), so a record admitted for a push is hidden from receive from its first commit. A provider
that cannot push while a turn runs gets the record on the receive path, remembered (`defer`), and pushed at idle only
if no receive took it first (`claim_push`). A provider that pushes only into a running turn, at its next tool
boundary (`push_at_boundary`), keeps it on the receive path and offers it to the running turn (`offer`), which
takes it by the same claim at the boundary, unless a receive took it first. Every push ends
settled: done, released to the receive path (nothing was sent), or uncertain (it may be in the conversation, so it
is never shown twice).
"""

from __future__ import annotations

import logging

import anyio

from wardian import errors
from wardian.app import outcomes
from wardian.app.runtime.handle import AgentHandle, Owners
from wardian.app.signals import PROVIDER_CONTEXT, MailboxSignals
from wardian.app.writer import StoreWriter
from wardian.providers.base import OffersAtBoundary
from wardian.store import history, mailbox

log = logging.getLogger("wardian.app.runtime")

PUSH_TIMEOUT_S = 10.0
OFFER_TIMEOUT_S = 60.0
"""How long a record offered to a running turn waits for its next tool boundary (it stays receivable meanwhile)."""


class PushQueue:
    def __init__(self, writer: StoreWriter, signals: MailboxSignals, owners: Owners) -> None:
        self.writer = writer
        self.signals = signals
        self.owners = owners

    def can_push(self, recipient_uuid: str) -> bool:
        """Whether a record for this agent is admitted for a push into its live conversation: its runtime is
        running, ready and can inject. Decided inside the admission's transaction, so the record is hidden from
        receive from its first commit: it reaches the agent by exactly one path."""
        handle = self.owners.get(recipient_uuid)
        if handle is None or not handle.runtime.ready or not handle.caps.inject:
            return False
        if handle.caps.push_at_boundary:
            return False  # on the receive path, offered to a running turn (`offer`)
        if handle.runtime.active_turn_id is not None:
            return handle.caps.inject_while_active
        return handle.caps.inject_while_idle

    def can_push_later(self, recipient_uuid: str) -> bool:
        """Whether the recipient's runtime can push, but not while its current turn runs."""
        handle = self.owners.get(recipient_uuid)
        return (handle is not None and handle.runtime.ready and handle.caps.inject
                and not handle.caps.inject_while_active and handle.runtime.active_turn_id is not None)

    async def deliver(self, recipient_uuid: str, record_id: str, pushing: bool) -> bool:
        """A record was committed for `recipient_uuid`: push it when it was admitted for a push, else wake the
        recipient's waits (and, for a provider that pushes only between turns, push it at idle unless a receive
        took it first). True when it is in the recipient's conversation."""
        if pushing:
            return await self.push(recipient_uuid, record_id)
        self.defer(recipient_uuid, record_id)
        self.offer(recipient_uuid, record_id)
        self.signals.notify(recipient_uuid)
        return False

    def defer(self, recipient_uuid: str, record_id: str) -> None:
        """Remember a record admitted on the receive path while its recipient's turn ran, to push it at idle."""
        handle = self.owners.get(recipient_uuid)
        if handle is not None and self.can_push_later(recipient_uuid):
            handle.deferred.append(record_id)

    def offer(self, recipient_uuid: str, record_id: str) -> None:
        """A record on the receive path of an agent whose running turn takes records at its tool boundaries: offer
        it there, in the background of its runtime (the sender does not wait for the boundary)."""
        handle = self.owners.get(recipient_uuid)
        if (handle is not None and handle.caps.push_at_boundary and handle.background is not None
                and handle.runtime.active_turn_id is not None and isinstance(handle.runtime, OffersAtBoundary)):
            handle.background.start_soon(self._offer, handle, handle.runtime, record_id)

    async def _offer(self, handle: AgentHandle, runtime: OffersAtBoundary, record_id: str) -> None:
        """Runs beside the agent's runtime: a failure here is logged (the record stays where it is), never raised
        into the runtime's task group."""

        async def claim() -> bool:
            return await self.writer.call(mailbox.claim_push, record_id)

        try:
            record = await self.writer.call(history.interaction, record_id)
            if await runtime.offer(record, claim, timeout_s=OFFER_TIMEOUT_S):
                with anyio.CancelScope(shield=True):
                    await self.writer.call(mailbox.push_done, record_id)
                self.signals.notify(handle.uuid, PROVIDER_CONTEXT)
        except errors.WardianError as exc:
            log.warning("record %s: offering it to %s's running turn failed (%s)", record_id, handle.name, exc.code)

    async def push_deferred(self, handle: AgentHandle) -> None:
        """At idle: push what waited for the turn to end, each record only if no receive has taken it meanwhile."""
        while handle.deferred and handle.runtime.ready and handle.runtime.active_turn_id is None:
            record_id = handle.deferred.pop(0)
            if await self.writer.call(mailbox.claim_push, record_id):
                await self.push(handle.uuid, record_id)

    async def push_before_turn(self, handle: AgentHandle) -> None:
        """Before a task starts a turn: a provider that takes no push while idle gets what waited on the receive path
        meanwhile (durable there), each record only if no receive has taken it, so it precedes the task."""
        if not handle.caps.inject or handle.caps.inject_while_idle:
            return
        for record_id in await self.writer.call(mailbox.push_candidates, handle.agent_id):
            if await self.writer.call(mailbox.claim_push, record_id):
                await self.push(handle.uuid, record_id)

    async def push(self, recipient_uuid: str, record_id: str) -> bool:
        """Push a record admitted for a push; True when the provider took it. Whatever happens to the caller, the
        push is settled: done, released to the receive path (nothing was sent), or uncertain (never shown twice)."""
        with anyio.CancelScope(shield=True):
            return await self._push_record(recipient_uuid, record_id)
        raise AssertionError("unreachable: nothing cancels this shielded scope, so it swallows nothing")

    async def _push_record(self, recipient_uuid: str, record_id: str) -> bool:
        handle = self.owners.get(recipient_uuid)
        if handle is None or not handle.runtime.ready or not handle.caps.inject:
            await self._release(recipient_uuid, record_id, "the runtime is gone")
            return False
        record = await self.writer.call(history.interaction, record_id)
        try:
            await handle.runtime.push([record], timeout_s=PUSH_TIMEOUT_S)
        except errors.Rejected as exc:
            await self._release(recipient_uuid, record_id, exc.code)
            return False
        except errors.WardianError as exc:
            reason = outcomes.push_unknown(exc.code, exc.message)
            await self.writer.call(mailbox.push_uncertain, record_id, reason)
            log.warning("record %s: push uncertain (%s); it stays off the receive path", record_id, exc.code)
            self.signals.notify(recipient_uuid, PROVIDER_CONTEXT)
            return False
        await self.writer.call(mailbox.push_done, record_id)
        self.signals.notify(recipient_uuid, PROVIDER_CONTEXT)
        return True

    async def _release(self, recipient_uuid: str, record_id: str, why: str) -> None:
        await self.writer.call(mailbox.push_released, record_id)
        log.info("record %s goes to the receive path (push: %s)", record_id, why)
        self.signals.notify(recipient_uuid)

    async def announced(self, recipient_uuid: str, record_id: str) -> bool:
        """A record another app admitted on the receive path (it cannot push into this host's conversations): push
        it now when the recipient's runtime can, if no receive took it first; True when it was pushed."""
        if self.can_push(recipient_uuid):
            if await self.writer.call(mailbox.claim_push, record_id):
                return await self.push(recipient_uuid, record_id)
            return False
        self.defer(recipient_uuid, record_id)
        self.offer(recipient_uuid, record_id)
        return False
