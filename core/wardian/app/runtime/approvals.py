"""The app's side of approvals (docs/guide/approvals.md): a provider's `ApprovalAsked` becomes a durable approval,
routed by the agent's policy, and the one answer it gets (a person, the lead, the policy, the deadline) reaches the
provider once. An approval routed to a lead reaches the lead as information from Wardian, by the push queue like any
information (`_tell_lead`); the lead answers with `answer_approval`.

Order, so that an answer reaches the provider exactly once and the record never says what the provider did not get:
the store ends the approval first (a conditional UPDATE from `pending`: of two racing answers one wins, the other
gets `approval_ended`), then the reply is answered; if the runtime withdrew the request in between (its turn
ended), the record is corrected to `withdrawn` and the answer is refused as ended. A request the runtime withdraws
while pending is ended `withdrawn`; the agent's runtime ending (stop, crash, app restart) withdraws the rest.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

import anyio

from wardian import errors
from wardian.app import outcomes
from wardian.app.runtime.handle import AgentHandle
from wardian.app.runtime.push import PushQueue
from wardian.app.writer import StoreWriter
from wardian.approvals import Approval, ApprovalStatus, Policy
from wardian.providers.approvals import ApprovalAsked, ApprovalReply, Decision
from wardian.store import approvals

log = logging.getLogger("wardian.app.approvals")

DENIED_BY_POLICY = "the agent's approval policy is deny: nobody may approve this"
EXPIRED = "nobody answered before the approval's deadline"
RULE = "rule"
"""Who ended an approval an agent's allow rule matched (its reason names the rule)."""


class Approvals:
    """The pending approvals of this app's agents, by id, each with the reply its provider awaits."""

    def __init__(self, writer: StoreWriter, pushes: PushQueue) -> None:
        self.writer = writer
        self.pushes = pushes
        self._open: dict[str, ApprovalReply] = {}
        self.on_waiting: Callable[[Approval], None] | None = None
        """Told of each approval that waits for a person, without waiting itself (the notifier, `app.notify`)."""

    async def asked(self, handle: AgentHandle, event: ApprovalAsked) -> Approval:
        """Record the request (pending) and route it by the agent's policy; returns the record as it stands."""
        ask = event.ask
        # One writer call, one transaction and one commit: routing and recording (`approvals.ask`). Under the submit
        # lock: a provider may ask as its turn starts, before the dispatcher, which holds the lock from the start of
        # the turn to the binding of its task, has bound the task, and the record names that task and its lead.
        async with handle.runtime.submit_lock:
            record, rule, timeout_ms = await self.writer.call(approvals.ask, handle.agent_id, ask.turn_id, ask.kind,
                                                              ask.tool, ask.summary, ask.detail, ask.options)
        policy = record.policy
        log.warning("agent %s asks approval %s (%s): %s", handle.name, record.approval_id,
                    record.request_id or "no task", ask.summary)
        if rule is not None:
            self._open[record.approval_id] = event.reply
            return await self._settle(record.approval_id, Decision(allow=True, reason=f"allowed by rule {rule}"),
                                      RULE)
        if policy is Policy.DENY:
            self._open[record.approval_id] = event.reply
            return await self._settle(record.approval_id, Decision(allow=False, reason=DENIED_BY_POLICY), "policy")
        self._open[record.approval_id] = event.reply
        assert handle.background is not None
        handle.background.start_soon(self._watch, record.approval_id, event.reply, timeout_ms)
        if record.answerer is not None:
            # Beside the runtime, not in its event loop: a push into the lead's conversation may take its time.
            handle.background.start_soon(self._tell_lead, record)
        else:
            self._tell_person(record)
        return record

    async def _tell_lead(self, record: Approval) -> None:
        """Bring the approval to its lead (the module docstring). The person is told too (the notify command) when
        telling the lead failed, or when the lead is not in a turn on this host to read it now; either may answer."""
        try:
            told = await self.writer.call(approvals.tell_lead, record.approval_id, outcomes.approval_for_lead(record),
                                          self.pushes.can_push)
            if told is None:
                return  # it ended before it could be told
            record_id, lead_uuid, pushing = told
            await self.pushes.deliver(lead_uuid, record_id, pushing)
            log.info("approval %s: told its lead %s (record %s)", record.approval_id, lead_uuid, record_id)
        except errors.WardianError as exc:
            log.warning("approval %s: telling its lead failed (%s); a person may answer it", record.approval_id,
                        exc.code)
            self._tell_person(record)
            return
        if not self._in_turn(lead_uuid):
            # The record starts no turn: an idle or stopped lead reads it only in its next turn, which may never come
            # before the deadline. The person is told as well, and whoever answers first decides.
            log.warning("approval %s: its lead %s is not in a turn here; a person is told too", record.approval_id,
                        lead_uuid)
            self._tell_person(record)

    def _in_turn(self, agent_uuid: str) -> bool:
        """Whether this app runs the agent and it is in a turn now."""
        handle = self.pushes.owners.get(agent_uuid)
        return handle is not None and handle.runtime.ready and handle.runtime.active_turn_id is not None

    def _tell_person(self, record: Approval) -> None:
        if self.on_waiting is not None:
            self.on_waiting(record)

    async def answer(self, approval_id: str, decision: Decision, decided_by: str,
                     answerer_id: int | None = None) -> Approval:
        """A person's or the lead's answer. Raises: UnknownApproval; ApprovalEnded (nothing changed); NotRecipient
        (not this lead's to answer); Unsupported (its agent runs under another host's app)."""
        if approval_id not in self._open:
            record = await self.writer.call(approvals.get, approval_id)
            if record.status is not ApprovalStatus.PENDING:
                raise errors.ApprovalEnded(f"approval {approval_id} already ended: {record.status.value}",
                                           field="approval_id", status=record.status.value)
            raise errors.Unsupported(f"approval {approval_id} is asked by an agent this app does not run; answer it "
                                     "on the app of that agent's host", field="approval_id")
        return await self._settle(approval_id, decision, decided_by, answerer_id)

    async def _settle(self, approval_id: str, decision: Decision, decided_by: str,
                      answerer_id: int | None = None) -> Approval:
        status = ApprovalStatus.ALLOWED if decision.allow else ApprovalStatus.DENIED
        return await self._end(approval_id, status, decision, decided_by, answerer_id)

    async def _end(self, approval_id: str, status: ApprovalStatus, decision: Decision, decided_by: str,
                   answerer_id: int | None = None) -> Approval:
        """End the record, then answer the provider (module docstring)."""
        ended = await self.writer.call(approvals.end, approval_id, status, decided_by, decision.always,
                                       decision.reason, answerer_id)
        reply = self._open.pop(approval_id, None)
        if reply is None or not reply.answer(decision):
            with anyio.CancelScope(shield=True):
                await self.writer.call(approvals.restate, approval_id, ApprovalStatus.WITHDRAWN, "provider")
            raise errors.ApprovalEnded(f"approval {approval_id} was withdrawn: its agent can no longer take an answer",
                                       field="approval_id", status=ApprovalStatus.WITHDRAWN.value)
        # The agent waits on this answer; whoever answered only on the response: the runtime's task that writes it
        # to the provider, woken just now, runs before the log line and the response (docs/guide/approvals.md#speed).
        await anyio.lowlevel.cancel_shielded_checkpoint()
        log.warning("approval %s: %s by %s", approval_id, status.value, decided_by)
        return ended

    async def _watch(self, approval_id: str, reply: ApprovalReply, timeout_ms: int) -> None:
        """Until the approval ends: a withdrawal by the runtime ends it `withdrawn`; the deadline, `expired` with the
        policy's default decision (deny) applied."""
        try:
            with anyio.move_on_after(timeout_ms / 1000):
                if await reply.wait() is None:
                    self._open.pop(approval_id, None)
                    await self._ended_quietly(approval_id, ApprovalStatus.WITHDRAWN, "provider")
                return
            if approval_id in self._open:
                await self._end(approval_id, ApprovalStatus.EXPIRED, Decision(allow=False, reason=EXPIRED),
                                "deadline")
        except errors.ApprovalEnded:
            pass  # answered meanwhile, or withdrawn: already recorded
        finally:
            self._open.pop(approval_id, None)

    async def _ended_quietly(self, approval_id: str, status: ApprovalStatus, decided_by: str) -> None:
        with contextlib.suppress(errors.ApprovalEnded):
            await self.writer.call(approvals.end, approval_id, status, decided_by)
