"""The app's operations: validated params in, store operations through the group-commit writer, results out.

Dispatch is `wardian.protocol.app.METHODS`: each method names the coroutine of this class that serves it, and
each coroutine returns that method's declared result type. Attribution is decided here and only here: every
operation acts for the caller its session token resolves to inside the same store transaction; no parameter
can name a sender (DESIGN.md §4).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

import anyio

from wardian import __version__, errors
from wardian.app import outcomes
from wardian.app.runtime import Runtime
from wardian.app.signals import CONNECTION, MAILBOX_ACTIVITY, PROVIDER_CONTEXT, MailboxSignals, Waiter
from wardian.app.writer import StoreWriter
from wardian.home import Home
from wardian.model import (
    DEFAULT_RECEIVE_LIMIT,
    DEFAULT_WAIT_MS,
    OPERATOR_NAME,
    OPERATOR_UUID,
    PROTOCOL_VERSION,
    Agent,
    AgentStatus,
    Caller,
    InteractionKind,
    InterruptReceipt,
    Published,
    Receipt,
    ReceivePage,
    RecordStory,
    ReplyStatus,
    RequestTrace,
    WakeReason,
    now_ms,
)
from wardian.protocol import app as proto
from wardian.store import Store
from wardian.store.api import Pushable

log = logging.getLogger("wardian.app")

Handler = Callable[[Any], Awaitable[Any]]


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
    """`admit_op` for the operator (#16): the same target resolution and admission, with the operator as the caller
    (the control socket vouched for it; no session is involved)."""
    def op(s: Store) -> Receipt:
        caller = s.operator()
        recipient = s.resolve_target(caller, target)
        pushing = kind is InteractionKind.INFORMATION and push is not None and push(recipient.uuid)
        return s.admit(caller, recipient, kind, text, push=pushing)

    return op


class ConsoleLogins(Protocol):
    """What the service needs of the web console (#16), when the app serves one."""

    @property
    def address(self) -> str:
        """The console's base URL (no secret in it)."""
        ...

    def mint_login(self) -> tuple[str, int]:
        """A new one-time login URL and when it expires (Unix ms)."""
        ...


def _off(agent: Agent) -> Agent:
    """An agent whose host has no live app: off, whatever its row last said, since nobody serves it (#15)."""
    return replace(agent, status=AgentStatus.OFF, active_turn_id=None)


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
        self.console: ConsoleLogins | None = None  # set by `app run --console`
        # The one method table drives dispatch: a method without its coroutine here fails at start, not at call.
        self._dispatch: dict[str, Handler] = {name: getattr(self, spec.handler) for name, spec in proto.METHODS.items()}

    async def handle(self, method: str, raw_params: Any) -> Any:
        """Run one method.

        Raises:
            WardianError: the method's own error, with its code and delivery state.
        """
        params = proto.parse_params(method, raw_params)
        return await self._dispatch[method](params)

    # --- messages and tasks ---------------------------------------------------------------------------

    async def _admit(self, p: proto.MessageSendParams | proto.OperatorSendParams,
                     kind: InteractionKind) -> proto.SendResult:
        push = self.runtime.can_push if self.runtime is not None else None
        op = (admit_op(p.session, p.target, kind, p.message, push) if isinstance(p, proto.MessageSendParams)
              else operator_admit_op(p.target, kind, p.message, push))
        receipt = await self.writer.call(op, bare=True)
        if self.runtime is not None and kind is InteractionKind.TASK:
            self.runtime.task_admitted(receipt.recipient.uuid)
        elif self.runtime is not None:
            if await self.runtime.deliver(receipt.recipient.uuid, receipt.interaction_id, receipt.pushing):
                return proto.send_result(receipt, "provider_visible")  # already in the peer's live conversation
            return proto.send_result(receipt, "admitted")
        self.signals.notify(receipt.recipient.uuid)
        return proto.send_result(receipt, "admitted")

    async def send(self, p: proto.MessageSendParams) -> proto.SendResult:
        return await self._admit(p, InteractionKind.INFORMATION)

    async def followup(self, p: proto.TaskFollowupParams) -> proto.SendResult:
        return await self._admit(p, InteractionKind.TASK)

    async def operator_send(self, p: proto.OperatorSendParams) -> proto.SendResult:
        return await self._admit(p, InteractionKind.INFORMATION)

    async def operator_followup(self, p: proto.OperatorSendParams) -> proto.SendResult:
        return await self._admit(p, InteractionKind.TASK)

    async def receive(self, p: proto.MailboxReceiveParams) -> proto.ReceiveResult:
        return await self._receive(p, lambda s: s.authenticate(p.session))

    async def operator_receive(self, p: proto.OperatorReceiveParams) -> proto.ReceiveResult:
        return await self._receive(p, lambda s: s.operator())

    async def _receive(self, p: proto.MailboxReceiveParams | proto.OperatorReceiveParams,
                       who: Callable[[Store], Caller]) -> proto.ReceiveResult:
        limit = p.limit if p.limit is not None else DEFAULT_RECEIVE_LIMIT
        timeout_ms = p.timeout_ms or 0

        def read(ack: str | None) -> Callable[[Store], ReceivePage]:
            return lambda s: s.receive(who(s), cursor=p.cursor, ack_cursor=ack, limit=limit)

        def result(page: ReceivePage, timed_out: bool, reason: WakeReason | None) -> proto.ReceiveResult:
            # An empty page leaves the reading position where it was.
            cursor = page.cursor if page.cursor is not None else p.cursor
            return proto.receive_result(page, cursor=cursor, timed_out=timed_out, wake_reason=reason)

        if timeout_ms == 0:
            return result(await self.writer.call(read(p.ack_cursor), bare=True), False, None)
        # A wait: it ends, as if its time ran out, once its connection has gone (signals.ConnectionWaits), reading
        # and writing nothing more; in particular it acknowledges nothing it had not yet and takes no context.
        connection = CONNECTION.get()
        if connection is not None and connection.gone:
            return result(ReceivePage(records=(), cursor=None, acked=0, more=False), True, None)
        caller = await self.writer.call(who)
        me = caller.agent.id
        ack, acked, reason = p.ack_cursor, 0, None

        def read_or_context(ack_: str | None, waiter: Waiter) -> Callable[[Store], tuple[ReceivePage, bool] | None]:
            def op(s: Store) -> tuple[ReceivePage, bool] | None:
                if waiter.abandoned:
                    return None
                page = read(ack_)(s)
                return page, (not page.records and not waiter.abandoned and s.take_unseen_context(me))
            return op

        with anyio.move_on_after(timeout_ms / 1000):
            while True:
                with self.signals.subscribe(caller.agent.uuid) as waiter:
                    if waiter.abandoned:
                        break
                    # Subscribed before reading, so a record committed after the read still wakes us.
                    looked = await self.writer.call(read_or_context(ack, waiter))
                    if looked is None:
                        break
                    page, context = looked
                    ack, acked = None, acked + page.acked  # acknowledged once; later reads only look
                    if page.records:
                        return result(ReceivePage(page.records, page.cursor, acked, page.more), False, reason)
                    if context:
                        # Pushed into the live conversation (now or just before this wait): no duplicate body,
                        # nothing acknowledged; the model sees it in its next request.
                        return result(ReceivePage((), None, acked, False), False, PROVIDER_CONTEXT)
                    await waiter.wait()
                    if waiter.abandoned:
                        break
                    reason = waiter.reason
        # Expired (or abandoned): an empty wait cancels nothing; later messages and replies remain available.
        return result(ReceivePage(records=(), cursor=None, acked=acked, more=False), True, None)

    async def wait(self, p: proto.MailboxWaitParams) -> proto.WaitResult:
        timeout_ms = DEFAULT_WAIT_MS if p.timeout_ms is None else p.timeout_ms
        # It ends, as if its time ran out, once its connection has gone (signals.ConnectionWaits), reading and
        # writing nothing more: no provider context is taken for a wait nobody will read.
        connection = CONNECTION.get()
        expired: proto.WaitResult = {"woke": False, "timed_out": True, "wake_reason": None}
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
        # each instead of two (#13).
        sent_before = self.signals.sent
        caller, found = await self.writer.call(authenticate_and_look)
        if found is not None:
            return {"woke": True, "timed_out": False, "wake_reason": found}
        me = caller.agent.id
        with self.signals.subscribe(caller.agent.uuid) as waiter:
            if waiter.abandoned:
                return expired
            if self.signals.sent != sent_before:
                found = await self.writer.call(partial(look, me=me))
                if found is not None:
                    return {"woke": True, "timed_out": False, "wake_reason": found}
            if timeout_ms > 0 and await waiter.wait_for(timeout_ms / 1000) and not waiter.abandoned:
                if waiter.reason == PROVIDER_CONTEXT:
                    await self.writer.call(lambda s: not waiter.abandoned and s.take_unseen_context(me))
                return {"woke": True, "timed_out": False, "wake_reason": waiter.reason}
        return expired

    async def reply(self, p: proto.TaskReplyParams) -> proto.ReplyResult:
        status = ReplyStatus(p.status)
        push = self.runtime.can_push if self.runtime is not None else None
        receipt = await self.writer.call(
            lambda s: s.reply(s.authenticate(p.session), p.request_id, status, p.message, push), bare=True)
        if self.runtime is not None:
            pushed = await self.runtime.deliver(receipt.requester.uuid, receipt.reply_id, receipt.pushing)
            return proto.reply_result(receipt, "provider_visible" if pushed else "admitted")
        self.signals.notify(receipt.requester.uuid)
        return proto.reply_result(receipt, "admitted")

    async def interrupt(self, p: proto.AgentInterruptParams) -> proto.InterruptResult:
        return await self._interrupt(p.target, lambda s: s.authenticate(p.session))

    async def operator_interrupt(self, p: proto.OperatorInterruptParams) -> proto.InterruptResult:
        return await self._interrupt(p.target, lambda s: s.operator())

    async def _interrupt(self, target_name: str, who: Callable[[Store], Caller]) -> proto.InterruptResult:
        def op(s: Store) -> InterruptReceipt:
            caller = who(s)
            return s.record_interrupt(caller, s.resolve_target(caller, target_name))

        local = True
        if self.runtime is not None:
            # A provider that cannot interrupt is refused before anything is recorded.
            target = await self.writer.call(lambda s: s.resolve_target(who(s), target_name))
            local = self.runtime.is_mine(target.host)
            if local:
                self.runtime.check_interruptible(target.uuid)
        receipt = await self.writer.call(op)
        if self.runtime is not None and local:
            await self.runtime.interrupt(receipt.target.uuid, receipt.turn_id)
        # Another host's agent: the app of that host hears of the recorded interrupt from the store and interrupts
        # the exact turn it named (#15).
        return proto.interrupt_result(receipt)

    # --- agents ---------------------------------------------------------------------------------------

    def _runtime(self) -> Runtime:
        if self.runtime is None:
            raise errors.Unsupported("this app runs without a provider runtime")
        return self.runtime

    async def start_agent(self, p: proto.AgentStartParams) -> proto.AgentStartResult:
        runtime = self._runtime()
        if p.keep_settings and (p.config is not None or p.mode is not None or p.reset_settings):
            raise errors.InvalidArguments("keep_settings starts the agent with its saved mode and config; give "
                                          "neither, nor reset_settings, with it", field="keep_settings",
                                          allowed="keep_settings alone, or mode and config without it")
        if p.reset_settings and p.config is not None:
            raise errors.InvalidArguments("reset_settings starts the agent without any -c setting; to replace the "
                                          "saved settings give config alone", field="reset_settings",
                                          allowed="reset_settings, or config, not both")
        agent = await self.writer.call(lambda s: s.resolve_agent(p.agent))
        # A plain start keeps what the last start was given: its mode and its -c settings (the agent's settings
        # travel with it, as a service's do in `docker compose`); `config` replaces them, `reset_settings` drops them.
        saved = await self.writer.call(lambda s: s.managed_agent(agent.id))
        mode = p.mode or saved.mode or "background"
        config = [] if p.reset_settings else list(saved.overrides) if p.config is None else list(p.config)
        started = await runtime.start_agent(agent.id, mode, config, p.approve_tools)
        current = await self.writer.call(lambda s: s.agent(agent.id))
        return {"agent": proto.agent_result(current), "thread_id": started["thread_id"],
                "generation": started["generation"], "provider_version": started["provider_version"]}

    async def attach_agent(self, p: proto.AgentAttachParams) -> proto.AgentAttachResult:
        runtime = self._runtime()
        agent = await self.writer.call(lambda s: s.resolve_agent(p.agent))
        info = await runtime.attach_info(agent.id)
        return {"socket": info["socket"], "workspace": info["workspace"], "codex": info["codex"],
                "codex_home": info["codex_home"], "thread_id": info["thread_id"], "config": info["config"]}

    async def stop_agent(self, p: proto.AgentStopParams) -> proto.AgentStopResult:
        runtime = self._runtime()
        agent = await self.writer.call(lambda s: s.resolve_agent(p.agent))
        stopped = await runtime.stop_agent(agent.id)
        current = await self.writer.call(lambda s: s.agent(agent.id))
        return {"agent": proto.agent_result(current), "stopped": stopped}

    async def list_agents(self, p: proto.AgentListParams) -> proto.AgentListResult:
        def op(s: Store) -> Any:
            caller = s.authenticate(p.session) if p.session is not None else None
            # What the app keeps to start each agent (its settings) is the operator's to see, not its peers'.
            managed = s.managed_agents() if p.session is None else None
            return caller, s.list_agents(), s.delivery_doubts(), s.hosts(), managed

        caller, agents, doubts, hosts, managed = await self.writer.call(op)
        offline = {h.name for h in hosts if not h.live}
        agents = [_off(a) if a.host in offline else a for a in agents]
        result: proto.AgentListResult = {
            "agents": [proto.agent_result(a) for a in agents],
            "caller": proto.party_result(caller.agent) if caller else None,
            "deliveries": {a.uuid: {"uncertain": d.uncertain, "confirmed_by_lookup": d.confirmed_by_lookup}
                           for a in agents if (d := doubts.get(a.id)) is not None},
            "hosts": {h.name: {"live": h.live, "heartbeat_at": h.heartbeat_at} for h in hosts}}
        if managed is not None:
            result["managed"] = {m.uuid: proto.managed_agent_result(m) for m in managed}
        return result

    async def add_agent(self, p: proto.AgentAddParams) -> proto.AgentResult:
        workspace = p.workspace  # the CLI sends an absolute path
        agent = await self.writer.call(lambda s: s.add_agent(p.name, p.provider, workspace))
        log.info("agent added: %s %s", agent.name, agent.uuid)
        return proto.agent_result(agent)

    async def session(self, p: proto.AgentSessionParams) -> proto.AgentSessionResult:
        def op(s: Store) -> Any:
            agent = s.resolve_agent(p.agent)
            return agent, s.create_session(agent.id)

        agent, token = await self.writer.call(op)
        log.info("session issued for agent %s", agent.uuid)  # never the token itself
        return {"agent": proto.agent_result(agent), "session_id": token, "home": str(self.home.root)}

    async def remove_agent(self, p: proto.AgentRemoveParams) -> proto.AgentRemoveResult:
        agent = await self.writer.call(lambda s: s.resolve_agent(p.agent))
        # Its runtime ends first, so nothing of it is in flight any more; what that leaves uncertain is reported.
        lost = await self.runtime.forget(agent.id) if self.runtime is not None else []
        push = self.runtime.can_push if self.runtime is not None else None

        def op(s: Store) -> tuple[Agent, list[Published], list[str]]:
            with s.atomic():
                removed = s.remove_agent(agent.id)
                answered, uncertain = s.answer_open_tasks(agent.id, outcomes.removed_notice(removed.name),
                                                          outcomes.REMOVED_UNCERTAIN, push)
            return removed, answered, uncertain

        removed, answered, uncertain = await self.writer.call(op)
        log.info("agent removed: %s %s (%d open tasks answered)", removed.name, removed.uuid, len(answered))
        for published in answered:
            if published.record_id is not None:
                if self.runtime is not None:
                    await self.runtime.deliver(published.requester_uuid, published.record_id, published.pushing)
                else:
                    self.signals.notify(published.requester_uuid)
        return {"agent": proto.agent_result(removed), "answered": [a.request_id for a in answered],
                "uncertain": [*lost, *uncertain]}

    async def revoke_sessions(self, p: proto.AgentRevokeParams) -> proto.AgentRevokeResult:
        def op(s: Store) -> tuple[Agent, int]:
            agent = s.resolve_agent(p.agent)
            return agent, s.revoke_sessions(agent.id, managed_too=p.all)

        agent, revoked = await self.writer.call(op)
        log.info("revoked %d sessions of agent %s", revoked, agent.uuid)
        return {"agent": proto.agent_result(agent), "revoked": revoked}

    # --- the operator's view and the app ----------------------------------------------------------------

    async def show_record(self, p: proto.RequestShowParams) -> proto.RecordStoryResult:
        return proto.record_story_result(await self.writer.call(lambda s: s.record_story(p.id)))

    async def request_status(self, p: proto.RequestStatusParams) -> proto.RecordStoryResult:
        def op(s: Store) -> RecordStory:
            caller = s.authenticate(p.session)
            try:
                story = s.record_story(p.request_id)
            except errors.UnknownRequest:
                story = None
            # Another agent's request, or something that is not a task, is unknown to this caller: the same error
            # as no record at all, so nobody learns what others asked.
            if (story is None or story.interaction.kind is not InteractionKind.TASK or story.task is None
                    or story.task.requester.uuid != caller.agent.uuid):
                raise errors.UnknownRequest(f"you sent no task with request id {p.request_id[:80]!r}",
                                            field="request_id", allowed="the request id of a task you assigned")
            return story

        return proto.record_story_result(await self.writer.call(op))

    async def records(self, p: proto.MailboxRecordsParams) -> proto.MailboxRecordsResult:
        records = await self.writer.call(lambda s: s.log_records(limit=p.limit))
        return {"records": [proto.log_record_result(r) for r in records]}

    async def agent_overview(self, p: proto.EmptyParams) -> proto.AgentOverviewListResult:
        rows, hosts, mine, managed = await self.writer.call(
            lambda s: (s.agents_overview(), s.hosts(), s.host, {m.uuid: m for m in s.managed_agents()}))
        offline = {h.name for h in hosts if not h.live}
        rows = [replace(o, agent=_off(o.agent)) if o.agent.host in offline else o for o in rows]
        return {"agents": [proto.agent_overview_result(o, host_live=o.agent.host not in offline,
                                                       local=o.agent.host in (None, mine),
                                                       managed=managed.get(o.agent.uuid)) for o in rows]}

    async def exchange_page(self, p: proto.ExchangePageParams) -> proto.ExchangePageResult:
        kind = InteractionKind(p.kind) if p.kind is not None else None

        def op(s: Store) -> Any:
            participant = None
            if p.agent in (OPERATOR_NAME, OPERATOR_UUID):
                participant = s.operator().agent.id
            elif p.agent is not None:
                participant = s.resolve_agent(p.agent).id
            return s.exchange(participant=participant, kind=kind, uncertain=p.uncertain, before=p.before,
                              limit=p.limit)

        return proto.exchange_page_result(await self.writer.call(op))

    async def request_trace(self, p: proto.RequestTraceParams) -> proto.RequestTraceResult:
        trace: RequestTrace = await self.writer.call(lambda s: s.request_trace(p.id))
        return proto.request_trace_result(trace)

    async def console_login(self, p: proto.EmptyParams) -> proto.ConsoleLoginResult:
        if self.console is None:
            raise errors.Unsupported("this app serves no web console; start it with `wardian app start --console` "
                                     "(or `wardian app run --console`)", field="console")
        url, expires_at = self.console.mint_login()
        log.info("console login URL issued (valid once, until %d)", expires_at)  # never the URL: it holds the secret
        return {"url": url, "expires_at": expires_at}

    async def status(self, p: proto.EmptyParams) -> proto.AppStatusResult:
        agents = await self.writer.call(lambda s: len(s.list_agents()))
        return {"running": True, "version": __version__, "protocol": PROTOCOL_VERSION, "pid": os.getpid(),
                "home": str(self.home.root), "started_at": self.started_at, "agents": agents,
                "waiting": self.signals.waiting(), "console": self.console.address if self.console else None}

    async def app_stop(self, p: proto.EmptyParams) -> proto.OkResult:
        # The answer is written first; the server stops the app right after (see ControlServer).
        self.stop_requested = True
        return {"ok": True}

    def stop(self) -> None:
        self._stop()


__all__ = ["AppService", "ConsoleLogins", "admit_op", "errors", "operator_admit_op"]
