"""The observer of one started agent: what its provider runtime reports (`ProviderRuntime.events`), persisted.

Observed idle/active/turn id go to the roster; a replaced conversation to the agent's record; a permission request
to an approval (`approvals`); a turn's token usage (unknown included) to `store.usage`; a turn's outcome
becomes the reply of the tasks that turn carried (for a provider with an exact completion), or leaves them uncertain
when that outcome is unknown: never guessed, never replayed. Each idle and each turn end is a dispatch opportunity.
"""

from __future__ import annotations

import logging

from wardian import errors
from wardian.app import outcomes
from wardian.app.outcomes import outcome_reply
from wardian.app.runtime.approvals import Approvals
from wardian.app.runtime.handle import AgentHandle
from wardian.app.runtime.push import PushQueue
from wardian.app.writer import StoreWriter
from wardian.faults import crashpoint
from wardian.model import AgentStatus
from wardian.providers import StateChange
from wardian.providers.approvals import ApprovalAsked, Decision
from wardian.providers.base import (
    ConversationReplaced,
    HistoryReplayed,
    OutcomeStatus,
    TurnOutcome,
)
from wardian.store import ledger, lost, roster, usage

log = logging.getLogger("wardian.app.runtime")


class Observer:
    def __init__(self, writer: StoreWriter, pushes: PushQueue, approvals: Approvals) -> None:
        self.writer = writer
        self.pushes = pushes
        self.approvals = approvals

    async def run(self, handle: AgentHandle) -> None:
        """Persist each event of the agent's runtime, in order, until its stream ends."""
        async with handle.runtime.events:
            async for event in handle.runtime.events:
                if isinstance(event, ConversationReplaced):
                    await self._replaced(handle, event)
                elif isinstance(event, ApprovalAsked):
                    await self._asked(handle, event)
                elif isinstance(event, HistoryReplayed):
                    await self._replayed(handle, event)
                elif isinstance(event, StateChange):
                    await self._state(handle, event)
                else:
                    await self._turn_ended(handle, event)

    async def _replaced(self, handle: AgentHandle, event: ConversationReplaced) -> None:
        await self.writer.call(roster.replace_thread, handle.agent_id, handle.generation, event.previous,
                               event.current, event.reason)
        log.warning("agent %s: conversation %s could not be used (%s); it is now %s", handle.name,
                    event.previous, event.reason, event.current)

    async def _asked(self, handle: AgentHandle, event: ApprovalAsked) -> None:
        try:
            await self.approvals.asked(handle, event)
        except errors.WardianError:
            # Never left waiting on a record that could not be kept: the request is denied (docs/guide/approvals.md).
            log.exception("agent %s: its permission request could not be recorded; it is denied", handle.name)
            event.reply.answer(Decision(allow=False, reason="wardian could not record the request"))

    async def _replayed(self, handle: AgentHandle, event: HistoryReplayed) -> None:
        """Settle from the replayed history the tasks a killed app lost in this conversation: an answered turn's
        text is the task's `done` reply (evidence captured, then published once, as a live result); a task the
        history shows taken but unanswered, or does not show, stays uncertain with the reason. Never resent."""
        lost_here = [t for t in await self.writer.call(lost.restart_lost_tasks, outcomes.RESTART_LOST)
                     if t.agent_id == handle.agent_id and t.thread_id == event.thread_id]
        for task in lost_here:
            rid = task.request_id
            if rid not in event.answers:
                await self.writer.call(lost.restate_uncertain, rid, outcomes.RESTART_NOT_FOUND, True)
                log.warning("agent %s: task %s is not in the replayed history; it stays uncertain", handle.name, rid)
            elif (text := event.answers[rid]) is None:
                await self.writer.call(lost.restate_uncertain, rid, outcomes.RESTART_TAKEN)
                log.warning("agent %s: task %s was taken but never answered; it stays uncertain", handle.name, rid)
            else:
                # As a live end_turn with this text would be (over the reply limit: a `blocked` notice).
                reply = outcome_reply(TurnOutcome(task.message_id or "", OutcomeStatus.DONE, final_text=text))
                assert reply is not None
                await self.writer.call(ledger.capture_outcome, rid, *reply)
                published = await self.writer.call(ledger.publish_outcome, rid, self.pushes.can_push)
                if published is not None and published.record_id is not None:
                    await self.pushes.deliver(published.requester_uuid, published.record_id, published.pushing)
                log.warning("agent %s: the result of task %s, lost when the app stopped, was settled from the "
                            "replayed history", handle.name, rid)

    async def _state(self, handle: AgentHandle, event: StateChange) -> None:
        await self.writer.call(roster.observe, handle.agent_id, handle.generation, event.status, event.thread_id,
                               event.active_turn_id)
        if event.status is AgentStatus.OFF:
            handle.scope.cancel()  # the runtime ended: take its dispatcher and observer down with it
        elif event.status is AgentStatus.IDLE:
            await self.pushes.push_deferred(handle)
            handle.kick.set()  # ready (e.g. an attached TUI's thread was adopted): a dispatch chance

    async def _turn_ended(self, handle: AgentHandle, outcome: TurnOutcome) -> None:
        if outcome.credentials_rejected:
            await self.writer.call(roster.mark_signed_out, handle.agent_id, handle.generation,
                                   outcome.error or "credentials rejected")
            log.warning("agent %s: its provider rejected its credentials (turn %s)", handle.name, outcome.turn_id)
        async with handle.runtime.submit_lock:  # every binding of this turn is persisted by now
            request_ids = await self.writer.call(ledger.tasks_of_turn, outcome.turn_id)
        await self.writer.call(usage.record, handle.agent_id, outcome.turn_id, outcome.usage)
        if request_ids and handle.caps.exact_completion:
            reply = outcome_reply(outcome)
            if reply is None:
                # Never guessed, never replayed: the turn's tasks are uncertain from now on.
                reason = outcomes.unknown_outcome(outcome.turn_id)
                for rid in request_ids:
                    await self.writer.call(ledger.mark_uncertain, rid, reason)
                log.warning("turn %s of %s ended with an unknown outcome; uncertain: %s", outcome.turn_id,
                            handle.name, ", ".join(request_ids))
            else:
                status, text = reply
                for rid in request_ids:
                    await self.writer.call(ledger.capture_outcome, rid, status, text)
                    crashpoint("after_terminal_evidence_before_reply_publish")
                    published = await self.writer.call(ledger.publish_outcome, rid, self.pushes.can_push)
                    if published is not None and published.record_id is not None:
                        await self.pushes.deliver(published.requester_uuid, published.record_id, published.pushing)
        handle.kick.set()  # the turn ended: pending tasks get another chance
