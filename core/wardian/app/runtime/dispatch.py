"""Dispatch: each started agent's pending tasks into its provider runtime, and the `failed` notices of tasks that
cannot be started.

Dispatch of one task: take the durable claim (generation-fenced) -> submit (a new turn when idle; when active, a
steer fenced by the exact turn id where the provider can, else wait for the turn to end) while holding the
runtime's submit lock -> persist the binding -> release the lock. A rejection (`Rejected`: a stale turn, nothing
written) releases the claim and reads the activity again; anything else marks the task uncertain, never
resubmitted. The dispatcher is woken by admissions, readiness and turn ends (`AgentHandle.kick`).

Latency of an idle delivery (docs/benchmarks.md, `claude_admitted_to_message_queued`): the read of the pending tasks
and the first one's claim are one transaction, an urgent writer call (ahead of the queue, committed on the loop, no
yield after it), and the runtime's submit lock is taken without a yield, so nothing else runs between the claim's
COMMIT and the first byte written. The claim is still durable (fsynced) before that byte leaves.
"""

from __future__ import annotations

import logging
from typing import Literal

import anyio

from wardian import errors
from wardian.app import outcomes
from wardian.app.outcomes import start_failure_notice
from wardian.app.runtime.handle import AgentHandle
from wardian.app.runtime.push import PushQueue
from wardian.app.writer import StoreWriter
from wardian.faults import crashpoint
from wardian.model import ClaimKind, ManagedAgent, PendingTask
from wardian.providers import TaskDelivery
from wardian.store import Store, ledger, roster

log = logging.getLogger("wardian.app.runtime")

MAX_DISPATCH_ROUNDS = 20
# How often one task may meet a gone conversation (each time replaced by a fresh one) before the app stops offering it
# and answers it with a `failed` notice instead: a provider that keeps losing fresh conversations is broken.
MAX_CONVERSATION_REJECTIONS = 3
BUSY_PAUSE_S = 0.5  # after an overloaded provider refused a submission, before it is offered the task again
STALE_SETTLE_S = 2.0  # after a stale-turn rejection, how long to wait for that turn's end before trying again

Submitted = Literal["accepted", "stale", "busy", "rejected", "uncertain"]


def _read_pending(store: Store, handle: AgentHandle,
                  plan: tuple[str, str | None] | None) -> tuple[list[PendingTask], tuple[str, str] | None]:
    """The agent's pending tasks and, with `plan` (message id, conversation), the first one's dispatch claim taken in
    the same transaction: (its request id, the message id) when won."""
    tasks = ledger.pending_tasks(store, handle.agent_id)
    if plan is None or not tasks:
        return tasks, None
    message_id, thread = plan
    rid = tasks[0].request_id
    won = ledger.claim_task(store, rid, ClaimKind.DISPATCH, handle.generation, provider_message_id=message_id,
                            thread_id=thread)
    return (tasks, (rid, message_id)) if won else (tasks[1:], None)


class Dispatcher:
    def __init__(self, writer: StoreWriter, pushes: PushQueue) -> None:
        self.writer = writer
        self.pushes = pushes

    async def run(self, handle: AgentHandle) -> None:
        """The agent's dispatcher, for as long as its runtime runs: one pass over its pending tasks per kick."""
        while True:
            await handle.kick.wait()
            handle.kick = anyio.Event()
            try:
                await self._dispatch_pending(handle)
            except errors.StorageError as exc:
                log.error("dispatch for %s stopped by the store: %s", handle.name, exc.message)

    async def _dispatch_pending(self, handle: AgentHandle) -> None:
        runtime = handle.runtime
        for _ in range(MAX_DISPATCH_ROUNDS):
            if not runtime.ready:
                return
            # Idle, with a client-chosen message id: the read of the pending tasks also takes the first one's claim
            # (one transaction, committed ahead of the queue and on the loop), so its bytes leave one COMMIT after
            # the dispatcher woke. Busy: the tasks are read, and each claimed when it is offered.
            plan = self._first_claim(handle)
            # Bare (no savepoint of its own): its one write, the claim, comes after its reads.
            tasks, first = await self.writer.call(_read_pending, handle, plan, bare=True, urgent=plan is not None)
            if not tasks or not await self._dispatch_round(handle, tasks, first):
                return

    @staticmethod
    def _first_claim(handle: AgentHandle) -> tuple[str, str | None] | None:
        runtime = handle.runtime
        if runtime.active_turn_id is not None:
            return None
        message_id = runtime.plan_message_id()
        return None if message_id is None else (message_id, runtime.thread_id)

    async def _dispatch_round(self, handle: AgentHandle, tasks: list[PendingTask],
                              first: tuple[str, str] | None = None) -> bool:
        """Offer each task in turn (`first`: a task already claimed with its message id, by `_read_pending`); True
        when the round stopped early and the tasks are to be read again."""
        runtime = handle.runtime
        for task in tasks:
            if first is not None and first[0] == task.request_id:
                active, message_id = None, first[1]
            else:
                active = runtime.active_turn_id
                if active is not None and not handle.caps.steer:
                    return False  # no fenced steer: wait for the turn to end (the observer kicks us)
                # A provider that takes a client-chosen message id gets one now; it is persisted with the claim.
                message_id = runtime.plan_message_id() if active is None else None
                thread = runtime.thread_id if message_id is not None else None
                won = await self.writer.call(ledger.claim_task, task.request_id, ClaimKind.DISPATCH, handle.generation,
                                             message_id, thread, bare=True, urgent=True)
                if not won:
                    continue
            crashpoint("after_claim_before_provider_submit")
            async with runtime.submit_lock:
                outcome = await self._submit(handle, task, active, message_id)
            # What waits or writes more goes after the lock, so a turn's end is never held up by it.
            if isinstance(outcome, errors.WardianError):
                await self._fail_refused(handle, task.request_id, outcome)
                continue
            if outcome == "busy":
                await anyio.sleep(BUSY_PAUSE_S)
                return True
            if outcome == "stale":
                if active is not None and runtime.active_turn_id == active:
                    # The provider says that turn is over; its end is on the way. Wait for it (bounded) rather
                    # than steering the finished turn again.
                    with anyio.move_on_after(STALE_SETTLE_S):
                        await runtime.wait_idle()
                return True
            if outcome == "rejected":
                return False
        return False

    async def _submit(self, handle: AgentHandle, task: PendingTask, active: str | None,
                      message_id: str | None) -> Submitted | errors.WardianError:
        """Submit one claimed task; what happened, or the definite refusal the task is to be answered with (its
        claim already released)."""
        runtime = handle.runtime
        rid = task.request_id
        delivery = TaskDelivery(request_id=rid, sender=task.sender, text=task.text)
        lookup: str | None = None  # why the provider's answer was lost, when a lookup then found the message
        try:
            if active is None:
                await self.pushes.push_before_turn(handle)
                started = await runtime.start_turn(delivery, message_id)
                turn_id, lookup = started.turn_id, started.confirmed_by_lookup
            else:
                turn_id = await runtime.steer(delivery, active)
        except errors.Rejected as exc:
            return await self._not_admitted(handle, rid, active, exc)
        except errors.WardianError as exc:
            reason = outcomes.submission_unknown(exc.code, exc.message)
            looked_up = bool(exc.details.get("looked_up"))
            await self.writer.call(ledger.mark_uncertain, rid, reason, looked_up)
            log.warning("task %s: delivery uncertain (%s: %s)%s; it will not be resubmitted", rid, exc.code,
                        exc.message, "; a lookup did not find its message" if looked_up else "")
            return "uncertain"
        crashpoint("after_provider_submit_before_ack_persist")
        await self.writer.call(ledger.bind_submission, rid, handle.generation, runtime.thread_id or "", turn_id, lookup)
        if lookup is not None:
            log.warning("task %s: the provider's answer was lost (%s), and a lookup found message %s: the delivery "
                        "is confirmed", rid, lookup, turn_id)
        log.info("task %s: %s into turn %s", rid, "steered" if active else "started", turn_id)
        handle.gone.pop(rid, None)
        return "accepted"

    async def _not_admitted(self, handle: AgentHandle, rid: str, active: str | None,
                            exc: errors.Rejected) -> Submitted | errors.WardianError:
        """The provider certainly did not admit the task: give its claim back, and say what to do next."""
        if isinstance(exc, errors.StaleTurn):
            # Confirmed not admitted: give the claim back, then read the current activity again.
            await self.writer.call(ledger.release_claim, rid, handle.generation)
            log.info("task %s: stale turn %s, claim released", rid, active)
            return "stale"
        if isinstance(exc, errors.ConversationGone):
            # Nothing was accepted, and the provider already has a fresh conversation: offer the task again there.
            await self.writer.call(ledger.release_claim, rid, handle.generation, exc.message)
            handle.gone[rid] = handle.gone.get(rid, 0) + 1
            log.warning("task %s: %s; claim released, offered again", rid, exc.message)
            if handle.gone[rid] < MAX_CONVERSATION_REJECTIONS:
                return "stale"
            del handle.gone[rid]
            return exc
        if isinstance(exc, errors.ProviderBusy):
            await self.writer.call(ledger.release_claim, rid, handle.generation)
            log.info("task %s: %s; claim released, offered again shortly", rid, exc.message)
            return "busy"
        if isinstance(exc, errors.ProviderRefused):
            # Nothing was accepted, and the same request would be refused again: the task gets its answer now.
            await self.writer.call(ledger.release_claim, rid, handle.generation, exc.message)
            return exc
        await self.writer.call(ledger.release_claim, rid, handle.generation)
        log.info("task %s: not admitted (%s), claim released", rid, exc.code)
        return "rejected"

    async def _fail_refused(self, handle: AgentHandle, rid: str, exc: errors.WardianError) -> None:
        """A definite failure before submission (the provider accepted nothing, and would refuse again): one
        correlated `failed` notice from Wardian, committed together with the task's failure."""
        text = outcomes.refused_notice(handle.name, exc.code, exc.message)
        published = await self.writer.call(ledger.fail_task, rid, handle.generation, text, self.pushes.can_push)
        log.warning("task %s: refused by the provider (%s); answered with a failed notice", rid, exc.code)
        if published is not None and published.record_id is not None:
            await self.pushes.deliver(published.requester_uuid, published.record_id, published.pushing)

    async def fail_pending(self, agent: ManagedAgent, exc: errors.WardianError) -> None:
        """A definite failure before submission: each pending task gets one correlated `failed` notice from
        Wardian, committed together with the task's failure (nothing was submitted)."""
        generation = (await self.writer.call(roster.managed_agent, agent.id)).generation
        text = start_failure_notice(agent.name, exc.code, exc.message)
        for task in await self.writer.call(ledger.pending_tasks, agent.id):
            published = await self.writer.call(ledger.fail_task, task.request_id, generation, text,
                                               self.pushes.can_push)
            if published is not None and published.record_id is not None:
                await self.pushes.deliver(published.requester_uuid, published.record_id, published.pushing)
