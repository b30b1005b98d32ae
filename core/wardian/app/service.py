"""The app's operations: validated params in, store operations through the group-commit writer, wire out.

Attribution is decided here and only here: every operation acts for the caller its session token
resolves to inside the same store transaction; no parameter can name a sender (DESIGN.md §4).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from wardian import __version__, errors
from wardian.app.runtime import Runtime
from wardian.app.signals import PROVIDER_CONTEXT, MailboxSignals
from wardian.app.writer import StoreWriter
from wardian.home import Home
from wardian.model import (
    DEFAULT_RECEIVE_LIMIT,
    DEFAULT_WAIT_MS,
    PROTOCOL_VERSION,
    Caller,
    InteractionKind,
    Receipt,
    ReceivePage,
    ReplyStatus,
)
from wardian.protocol import app as proto
from wardian.store import InteractionStore
from wardian.store import runtime as rt
from wardian.store.store import now_ms

log = logging.getLogger("wardian.app")

Handler = Callable[[Any], Awaitable[dict[str, Any]]]


def admit_op(session: str, target: str, kind: InteractionKind, text: str) -> Callable[[InteractionStore], Receipt]:
    """The store operation of a send or follow-up: authenticate the caller, resolve the exact target, admit.

    Its reads come first and its writes are one atomic store method, so it may run bare in a batch. Also what
    `scripts/bench.py` runs on the store alone for the throughput ceiling.
    """
    def op(s: InteractionStore) -> Receipt:
        caller = s.authenticate(session)
        return s.admit(caller, s.resolve_target(caller, target), kind, text)

    return op


class AppService:
    def __init__(self, home: Home, writer: StoreWriter, signals: MailboxSignals,
                 stop: Callable[[], None], runtime: Runtime | None = None) -> None:
        self.runtime = runtime
        self.home = home
        self.writer = writer
        self.signals = signals
        self.started_at = now_ms()
        self._stop = stop
        self.stop_requested = False
        self._handlers: dict[str, Handler] = {
            "message/send": self._send,
            "task/followup": self._followup,
            "mailbox/receive": self._receive,
            "mailbox/wait": self._wait,
            "task/reply": self._reply,
            "agent/interrupt": self._interrupt,
            "agent/list": self._list_agents,
            "agent/add": self._add_agent,
            "agent/session": self._session,
            "mailbox/records": self._records,
            "agent/start": self._start_agent,
            "agent/stop": self._stop_agent,
            "agent/attach": self._attach_agent,
            "app/status": self._status,
            "app/stop": self._app_stop,
        }

    async def handle(self, method: str, raw_params: Any) -> dict[str, Any]:
        """Run one method.

        Raises:
            WardianError: the method's own error, with its code and delivery state.
        """
        params = proto.parse_params(method, raw_params)
        return await self._handlers[method](params)

    # --- operations -----------------------------------------------------------------------------------

    async def _admit(self, p: proto.MessageSendParams, kind: InteractionKind) -> dict[str, Any]:
        receipt = await self.writer.call(admit_op(p.session, p.target, kind, p.message), bare=True)
        out = proto.receipt_wire(receipt)
        if self.runtime is not None and kind is InteractionKind.TASK:
            self.runtime.task_admitted(receipt.recipient.uuid)
        elif self.runtime is not None and await self.runtime.push(receipt.recipient.uuid, receipt.interaction_id):
            out["delivery"] = "provider_visible"  # already in the peer's live conversation
            return out
        self.signals.notify(receipt.recipient.uuid)
        return out

    async def _send(self, p: Any) -> dict[str, Any]:
        return await self._admit(p, InteractionKind.INFORMATION)

    async def _followup(self, p: Any) -> dict[str, Any]:
        return await self._admit(p, InteractionKind.TASK)

    async def _authenticate(self, token: str) -> Caller:
        return await self.writer.call(lambda s: s.authenticate(token))

    async def _receive(self, p: proto.MailboxReceiveParams) -> dict[str, Any]:
        limit = p.limit if p.limit is not None else DEFAULT_RECEIVE_LIMIT
        timeout_ms = p.timeout_ms or 0

        def read(ack: str | None) -> Callable[[InteractionStore], ReceivePage]:
            return lambda s: s.receive(s.authenticate(p.session), cursor=p.cursor, ack_cursor=ack,
                                       limit=limit)

        def wire(page: ReceivePage, timed_out: bool, reason: str | None) -> dict[str, Any]:
            out = proto.page_wire(page, timed_out=timed_out, wake_reason=reason)
            if out["cursor"] is None:
                out["cursor"] = p.cursor  # an empty page leaves the reading position where it was
            return out

        if timeout_ms == 0:
            return wire(await self.writer.call(read(p.ack_cursor), bare=True), False, None)
        caller = await self._authenticate(p.session)
        me = caller.agent.id
        ack, acked, reason = p.ack_cursor, 0, None

        def read_or_context(ack_: str | None) -> Callable[[InteractionStore], tuple[ReceivePage, bool]]:
            def op(s: InteractionStore) -> tuple[ReceivePage, bool]:
                page = read(ack_)(s)
                return page, (not page.records and rt.take_unseen_context(s, me))
            return op

        with anyio.move_on_after(timeout_ms / 1000):
            while True:
                with self.signals.subscribe(caller.agent.uuid) as waiter:
                    # Subscribed before reading, so a record committed after the read still wakes us.
                    page, context = await self.writer.call(read_or_context(ack))
                    ack, acked = None, acked + page.acked  # acknowledged once; later reads only look
                    if page.records:
                        return wire(ReceivePage(page.records, page.cursor, acked, page.more), False, reason)
                    if context:
                        # Pushed into the live conversation (now or just before this wait): no duplicate body,
                        # nothing acknowledged; the model sees it in its next request.
                        return wire(ReceivePage((), None, acked, False), False, PROVIDER_CONTEXT)
                    await waiter.wait()
                    reason = waiter.reason
        # Expired: an empty wait cancels nothing; later messages and replies remain available.
        return wire(ReceivePage(records=(), cursor=None, acked=acked, more=False), True, None)

    async def _wait(self, p: proto.MailboxWaitParams) -> dict[str, Any]:
        timeout_ms = DEFAULT_WAIT_MS if p.timeout_ms is None else p.timeout_ms
        caller = await self._authenticate(p.session)
        me = caller.agent.id
        def look(s: InteractionStore) -> str | None:
            if s.has_unacked(me):
                return "mailbox_activity"
            return PROVIDER_CONTEXT if rt.take_unseen_context(s, me) else None

        with self.signals.subscribe(caller.agent.uuid) as waiter:
            # Subscribed first, then look at durable state, then wait: no lost wake-up.
            found = await self.writer.call(look)
            if found is not None:
                return {"woke": True, "timed_out": False, "wake_reason": found}
            if timeout_ms > 0:
                with anyio.move_on_after(timeout_ms / 1000):
                    await waiter.wait()
                    if waiter.reason == PROVIDER_CONTEXT:
                        await self.writer.call(lambda s: rt.take_unseen_context(s, me))
                    return {"woke": True, "timed_out": False, "wake_reason": waiter.reason}
        return {"woke": False, "timed_out": True, "wake_reason": None}

    async def _reply(self, p: proto.TaskReplyParams) -> dict[str, Any]:
        status = ReplyStatus(p.status)
        receipt = await self.writer.call(
            lambda s: s.reply(s.authenticate(p.session), p.request_id, status, p.message), bare=True)
        out = proto.reply_wire(receipt)
        if self.runtime is not None and await self.runtime.push(receipt.requester.uuid, receipt.reply_id):
            out["delivery"] = "provider_visible"
            return out
        self.signals.notify(receipt.requester.uuid)
        return out

    async def _interrupt(self, p: proto.AgentInterruptParams) -> dict[str, Any]:
        def op(s: InteractionStore) -> Any:
            caller = s.authenticate(p.session)
            return s.record_interrupt(caller, s.resolve_target(caller, p.target))

        receipt = await self.writer.call(op)
        if self.runtime is not None:
            await self.runtime.interrupt(receipt.target.uuid, receipt.turn_id)
        return proto.interrupt_wire(receipt)

    async def _start_agent(self, p: proto.AgentStartParams) -> dict[str, Any]:
        if self.runtime is None:
            raise errors.Unsupported("this app runs without a provider runtime")
        agent = await self.writer.call(lambda s: s.resolve_agent(p.agent))
        started = await self.runtime.start_agent(agent.id, p.mode, p.config, p.approve_tools)
        current = await self.writer.call(lambda s: s.agent(agent.id))
        return {"agent": proto.agent_wire(current), **started}

    async def _attach_agent(self, p: proto.AgentStopParams) -> dict[str, Any]:
        if self.runtime is None:
            raise errors.Unsupported("this app runs without a provider runtime")
        agent = await self.writer.call(lambda s: s.resolve_agent(p.agent))
        return await self.runtime.attach_info(agent.id)

    async def _stop_agent(self, p: proto.AgentStopParams) -> dict[str, Any]:
        if self.runtime is None:
            raise errors.Unsupported("this app runs without a provider runtime")
        agent = await self.writer.call(lambda s: s.resolve_agent(p.agent))
        stopped = await self.runtime.stop_agent(agent.id)
        current = await self.writer.call(lambda s: s.agent(agent.id))
        return {"agent": proto.agent_wire(current), "stopped": stopped}

    async def _list_agents(self, p: proto.AgentListParams) -> dict[str, Any]:
        def op(s: InteractionStore) -> Any:
            caller = s.authenticate(p.session) if p.session is not None else None
            return caller, s.list_agents()

        caller, agents = await self.writer.call(op)
        return {"agents": [proto.agent_wire(a) for a in agents],
                "caller": proto.party_wire(caller.agent) if caller else None}

    async def _add_agent(self, p: proto.AgentAddParams) -> dict[str, Any]:
        workspace = p.workspace  # the CLI sends an absolute path
        agent = await self.writer.call(lambda s: s.add_agent(p.name, p.provider, workspace))
        log.info("agent added: %s %s", agent.name, agent.uuid)
        return proto.agent_wire(agent)

    async def _session(self, p: proto.AgentSessionParams) -> dict[str, Any]:
        def op(s: InteractionStore) -> Any:
            agent = s.resolve_agent(p.agent)
            return agent, s.create_session(agent.id)

        agent, token = await self.writer.call(op)
        log.info("session issued for agent %s", agent.uuid)  # never the token itself
        return {"agent": proto.agent_wire(agent), "session_id": token, "home": str(self.home.root)}

    async def _records(self, p: proto.MailboxRecordsParams) -> dict[str, Any]:
        records = await self.writer.call(lambda s: s.interactions(limit=p.limit))
        return {"records": [proto.interaction_wire(i, acked=i.acked) for i in records]}

    async def _status(self, p: Any) -> dict[str, Any]:
        agents = await self.writer.call(lambda s: len(s.list_agents()))
        return {"running": True, "version": __version__, "protocol": PROTOCOL_VERSION, "pid": os.getpid(),
                "home": str(self.home.root), "started_at": self.started_at, "agents": agents}

    async def _app_stop(self, p: Any) -> dict[str, Any]:
        # The answer is written first; the server stops the app right after (see ControlServer).
        self.stop_requested = True
        return {"ok": True}

    def stop(self) -> None:
        self._stop()


__all__ = ["AppService", "errors"]
