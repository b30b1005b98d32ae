"""The provider runtime of the app, provider-neutral: one provider runtime per started agent, its dispatcher and its
event observer (seed: "Automatic task delivery"). What a provider can do is read from its `Capabilities`; how
it does it (wire shapes, version gates, error classification, final text) is the provider's (`wardian.providers`).

Per started agent, three tasks share one task group: the provider runtime itself (its process and
conversation), the dispatcher (woken by admissions, readiness and turn ends) and the event observer (observed
idle/active/turn id -> the roster; turn outcomes -> replies). Every fact is persisted through the writer.

Dispatch of one task: take the durable claim (generation-fenced) -> submit (a new turn when idle; when active, a
steer fenced by the exact turn id where the provider can, else wait for the turn to end) while holding the
runtime's submit lock -> persist the binding -> release the lock. A rejection (`Rejected`: a stale turn, nothing
written) releases the claim and reads the activity again; anything else marks the task uncertain, never
resubmitted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from wardian import errors
from wardian.app import outcomes
from wardian.app.outcomes import outcome_reply, start_failure_notice
from wardian.app.signals import PROVIDER_CONTEXT, MailboxSignals
from wardian.app.writer import StoreWriter
from wardian.faults import crashpoint
from wardian.home import Home
from wardian.model import AgentStatus, ClaimKind, ManagedAgent, PendingTask
from wardian.overrides import check_override
from wardian.providers import Capabilities, LaunchSpec, Provider, ProviderRuntime, StateChange, TaskDelivery
from wardian.providers.base import ConversationReplaced, ProviderInfo, TurnOutcome
from wardian.store.api import InterruptAnnounced, RecordAnnounced, Resynced, StoreEvent

log = logging.getLogger("wardian.app.runtime")

MAX_DISPATCH_ROUNDS = 20
# How often one task may meet a gone conversation (each time replaced by a fresh one) before the app stops offering it
# and answers it with a `failed` notice instead: a provider that keeps losing fresh conversations is broken.
MAX_CONVERSATION_REJECTIONS = 3
PUSH_TIMEOUT_S = 10.0
BUSY_PAUSE_S = 0.5  # after an overloaded provider refused a submission, before it is offered the task again
STALE_SETTLE_S = 2.0  # after a stale-turn rejection, how long to wait for that turn's end before trying again
STOP_TIMEOUT_S = 15.0


@dataclass
class _Handle:
    agent_id: int
    uuid: str
    name: str
    generation: int
    runtime: ProviderRuntime
    info: ProviderInfo
    kick: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    lost: list[str] = field(default_factory=list)  # request ids made uncertain when this runtime ended
    gone: dict[str, int] = field(default_factory=dict)  # request id -> how often its conversation was gone
    # Records admitted while a turn ran, for a provider that cannot push then: pushed at idle unless received.
    deferred: list[str] = field(default_factory=list)

    @property
    def caps(self) -> Capabilities:
        return self.info.capabilities


class Runtime:
    def __init__(self, home: Home, writer: StoreWriter, signals: MailboxSignals,
                 providers: Mapping[str, Provider] | None = None) -> None:
        self.home = home
        self.writer = writer
        self.signals = signals
        self.providers: Mapping[str, Provider] = _concrete_providers() if providers is None else providers
        self.owners: dict[str, _Handle] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._starting: set[str] = set()
        self.host: str | None = None  # the host this app serves (#15): only its agents are started here

    # --- lifecycle ------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            self.host = await self.writer.call(lambda s: s.host)
            await self.recover()
            task_status.started()
            for agent_id in await self.writer.call(lambda s: s.agents_desired_on()):
                agent = await self.writer.call(lambda s, a=agent_id: s.managed_agent(a))
                tg.start_soon(self._launch_logged, agent)
            await anyio.sleep_forever()

    async def recover(self) -> None:
        """Startup: mark bindings whose observation was lost uncertain; publish captured outcomes once."""
        await self.writer.call(lambda s: s.reset_observed_state())
        lost = await self.writer.call(lambda s: s.mark_lost_bindings_uncertain(outcomes.RESTART_LOST))
        if lost:
            log.warning("marked %d deliveries uncertain after a restart: %s", len(lost), ", ".join(lost))
        pushes = await self.writer.call(lambda s: s.pushes_interrupted(outcomes.PUSH_INTERRUPTED))
        if pushes:
            log.warning("marked %d pushes uncertain after a restart: %s", len(pushes), ", ".join(pushes))
        for request_id in await self.writer.call(lambda s: s.unpublished_outcomes()):
            published = await self.writer.call(lambda s, r=request_id: s.publish_outcome(r))
            if published is not None:
                self.signals.notify(published.requester_uuid)

    # --- agent start/stop ----------------------------------------------------------------------------

    async def start_agent(self, agent_id: int, mode: str, overrides: Sequence[str],
                          approve_tools: Sequence[str] = ()) -> dict[str, Any]:
        """Start (or restart with new settings) the agent's runtime; returns once its conversation is ready.

        Raises:
            Unsupported: the provider has no such mode, or takes no tool grants (checked before anything is saved).
        """
        await self._check_mine(agent_id)
        saved = await self.writer.call(lambda s: s.managed_agent(agent_id))
        provider = self._provider(saved)
        try:
            caps: Capabilities | None = (await provider.probe()).capabilities
        except errors.WardianError:
            caps = None  # the launch below reports it (and marks the agent errored)
        if caps is not None:
            self._check_launch(provider.name, caps, mode, approve_tools)
        for override in overrides:
            check_override(override, provider.settings_syntax)  # each provider's value syntax, before any is saved
        await self.writer.call(lambda s: s.set_desired(agent_id, "on", mode, list(overrides)))
        agent = await self.writer.call(lambda s: s.managed_agent(agent_id))
        existing = self.owners.get(agent.uuid)
        if existing is not None:
            await self._stop_handle(existing)
        handle = await self._launch(agent, tuple(approve_tools))
        return {"thread_id": handle.runtime.thread_id, "generation": handle.generation,
                "provider_version": handle.info.version}

    async def forget(self, agent_id: int) -> list[str]:
        """The agent is being removed: stop its runtime, if any, and never start it again (desired off). Returns
        the request ids its ending made uncertain."""
        await self.writer.call(lambda s: s.set_desired(agent_id, "off"))
        agent = await self.writer.call(lambda s: s.managed_agent(agent_id))
        handle = self.owners.get(agent.uuid)
        if handle is None:
            return []
        await self._stop_handle(handle)
        return list(handle.lost)

    async def _check_mine(self, agent_id: int) -> None:
        """Raises: Unsupported (the agent belongs to another host, whose app alone runs it, #15)."""
        agent = await self.writer.call(lambda s: s.agent(agent_id))
        if not self.is_mine(agent.host):
            raise errors.Unsupported(
                f"agent {agent.name!r} belongs to host {agent.host!r}; this app serves host {self.host!r}: start, "
                "stop or attach it from the app on that host",
                field="agent",
                host=agent.host,
            )

    def is_mine(self, host: str | None) -> bool:
        """Whether an agent of `host` runs here (an agent no app has claimed yet counts as everyone's)."""
        return host is None or self.host is None or host == self.host

    async def stop_agent(self, agent_id: int) -> bool:
        """An explicit off: stop the runtime, and do not start it again for new tasks (seed)."""
        await self._check_mine(agent_id)
        await self.writer.call(lambda s: s.set_desired(agent_id, "off"))
        agent = await self.writer.call(lambda s: s.managed_agent(agent_id))
        handle = self.owners.get(agent.uuid)
        if handle is None:
            return False
        await self._stop_handle(handle)
        return True

    async def _stop_handle(self, handle: _Handle) -> None:
        handle.runtime.stop()
        with anyio.move_on_after(STOP_TIMEOUT_S):
            await handle.done.wait()
        handle.scope.cancel()
        with anyio.move_on_after(STOP_TIMEOUT_S):
            await handle.done.wait()

    async def _launch_logged(self, agent: ManagedAgent) -> None:
        """A background (re)start at app startup; a definite failure answers the agent's pending tasks."""
        try:
            await self._launch(agent)
        except errors.WardianError as exc:
            log.error("could not start agent %s: %s", agent.name, exc.message)
            await self._fail_pending(agent, exc)

    async def _launch(self, agent: ManagedAgent, approve_tools: tuple[str, ...] = ()) -> _Handle:
        if agent.uuid in self._starting:
            raise errors.Unsupported(f"agent {agent.name!r} is already starting", field="agent")
        self._starting.add(agent.uuid)
        try:
            return await self._launch_once(agent, approve_tools)
        except errors.WardianError:
            await self.writer.call(lambda s: s.mark_errored(agent.id))
            raise
        finally:
            self._starting.discard(agent.uuid)

    def _provider(self, agent: ManagedAgent) -> Provider:
        provider = self.providers.get(agent.provider)
        if provider is None:
            raise errors.Unsupported(f"agent {agent.name!r} has provider {agent.provider!r}, which this app cannot "
                                     "run", field="provider", allowed=", ".join(self.providers))
        return provider

    @staticmethod
    def _check_launch(provider: str, caps: Capabilities, mode: str, approve_tools: Sequence[str]) -> None:
        if mode == "attached" and not caps.attach:
            raise errors.Unsupported(f"{provider} agents have no attached mode", field="mode", allowed="background")
        if approve_tools and not caps.tool_grants:
            raise errors.Unsupported(
                f"{provider} agents take no --approve-tools: {provider} has no approval step for wardian's tools "
                "(they run unless the provider's own settings deny them)", field="approve_tools",
                allowed="no grants; restrict tools with the provider's settings (-c)")

    async def _launch_once(self, agent: ManagedAgent, approve_tools: tuple[str, ...]) -> _Handle:
        assert self._tg is not None
        provider = self._provider(agent)
        info = await provider.probe()
        mode = agent.mode or "background"
        self._check_launch(provider.name, info.capabilities, mode, approve_tools)
        generation = await self.writer.call(lambda s: s.begin_generation(agent.id))
        # Managed startup registers wardian's MCP server with a session bound to this generation (seed).
        session = await self.writer.call(lambda s: s.create_session(agent.id, "managed"))
        workspace = Path(agent.workspace) if agent.workspace else self.home.default_workspace(agent.uuid)
        await anyio.to_thread.run_sync(lambda: workspace.mkdir(parents=True, exist_ok=True))
        spec = LaunchSpec(
            name=agent.name, uuid=agent.uuid, agent_dir=self.home.agent_dir(agent.uuid), workspace=workspace,
            mode=mode, overrides=agent.overrides, approve_tools=approve_tools, home=self.home, session=session,
            thread_id=agent.thread_id, log_path=self.home.provider_log_path(provider.name, agent.uuid),
            pid_path=self.home.provider_pid_path(provider.name, agent.uuid))
        runtime = await provider.prepare(spec, info)
        handle = _Handle(agent.id, agent.uuid, agent.name, generation, runtime, info)
        ready = anyio.Event()
        failure: list[BaseException] = []
        self._tg.start_soon(self._own, handle, ready, failure)
        await ready.wait()
        if failure:
            exc = failure[0]
            if isinstance(exc, errors.WardianError):
                raise exc
            raise errors.ProviderError(f"{provider.name} for {agent.name!r} failed to start: {exc}") from exc
        return handle

    async def _own(self, handle: _Handle, ready: anyio.Event, failure: list[BaseException]) -> None:
        with handle.scope:
            try:
                await self._own_inner(handle, ready, failure)
            except Exception:
                # A runtime's failure ends that runtime, never the app.
                log.exception("the provider runtime of %s failed", handle.name)
            finally:
                if self.owners.get(handle.uuid) is handle:
                    del self.owners[handle.uuid]
                ready.set()
        if failure:
            return
        with anyio.CancelScope(shield=True):
            await self.writer.call(lambda s: s.observe(handle.agent_id, handle.generation, AgentStatus.OFF))
            # Turns this runtime was running can no longer be observed to end: never guess, never replay.
            lost = await self.writer.call(lambda s: s.mark_generation_lost(
                handle.agent_id, handle.generation, outcomes.runtime_lost(handle.generation)))
            handle.lost = lost
            if lost:
                log.warning("runtime of %s ended; deliveries marked uncertain: %s", handle.name, ", ".join(lost))
        handle.done.set()

    async def _own_inner(self, handle: _Handle, ready: anyio.Event, failure: list[BaseException]) -> None:
        runtime = handle.runtime
        async with anyio.create_task_group() as tg:
            try:
                thread_id = await tg.start(runtime.run)
            except Exception as exc:
                log.error("the provider runtime of %s failed to start", handle.name, exc_info=exc)
                failure.append(_first_cause(exc))  # the launcher records the failure (errored)
                ready.set()
                handle.done.set()
                return
            status = AgentStatus.IDLE if runtime.ready else AgentStatus.STARTING
            await self.writer.call(lambda s: s.observe(handle.agent_id, handle.generation, status,
                                                       thread_id=thread_id))
            self.owners[handle.uuid] = handle
            tg.start_soon(self._observe_events, handle)
            tg.start_soon(self._dispatcher, handle)
            ready.set()
            handle.kick.set()  # readiness is a dispatch opportunity

    async def attach_info(self, agent_id: int) -> dict[str, Any]:
        """How a person's terminal attaches to the agent's app-owned runtime (`wardian agent attach`)."""
        agent = await self.writer.call(lambda s: s.managed_agent(agent_id))
        handle = self.owners.get(agent.uuid)
        if handle is None or not handle.caps.attach:
            raise errors.NotActive(f"agent {agent.name!r} has no attached-mode runtime; start it with "
                                   f"`wardian agent start {agent.name} --mode attached`", field="agent")
        return handle.runtime.attach_info()

    # --- observation ----------------------------------------------------------------------------------

    async def _observe_events(self, handle: _Handle) -> None:
        async with handle.runtime.events:
            await self._observe_each(handle)

    async def _observe_each(self, handle: _Handle) -> None:
        async for event in handle.runtime.events:
            if isinstance(event, ConversationReplaced):
                await self.writer.call(lambda s, e=event: s.replace_thread(
                    handle.agent_id, handle.generation, e.previous, e.current, e.reason))
                log.warning("agent %s: conversation %s could not be used (%s); it is now %s", handle.name,
                            event.previous, event.reason, event.current)
            elif isinstance(event, StateChange):
                await self.writer.call(lambda s, e=event: s.observe(
                    handle.agent_id, handle.generation, e.status, thread_id=e.thread_id,
                    active_turn_id=e.active_turn_id))
                if event.status is AgentStatus.OFF:
                    handle.scope.cancel()  # the runtime ended: take its dispatcher and observer down with it
                elif event.status is AgentStatus.IDLE:
                    await self._push_deferred(handle)
                    handle.kick.set()  # ready (e.g. an attached TUI's thread was adopted): a dispatch chance
            else:
                await self._turn_ended(handle, event)

    async def _turn_ended(self, handle: _Handle, outcome: TurnOutcome) -> None:
        async with handle.runtime.submit_lock:  # every binding of this turn is persisted by now
            request_ids = await self.writer.call(lambda s: s.tasks_of_turn(outcome.turn_id))
        if request_ids and handle.caps.exact_completion:
            reply = outcome_reply(outcome)
            if reply is None:
                # Never guessed, never replayed: the turn's tasks are uncertain from now on.
                for rid in request_ids:
                    await self.writer.call(lambda s, r=rid: s.mark_uncertain(r, outcomes.unknown_outcome(
                        outcome.turn_id)))
                log.warning("turn %s of %s ended with an unknown outcome; uncertain: %s", outcome.turn_id,
                            handle.name, ", ".join(request_ids))
            else:
                status, text = reply
                for rid in request_ids:
                    await self.writer.call(lambda s, r=rid: s.capture_outcome(r, status, text))
                    crashpoint("after_terminal_evidence_before_reply_publish")
                    published = await self.writer.call(lambda s, r=rid: s.publish_outcome(r, self.can_push))
                    if published is not None and published.record_id is not None:
                        await self.deliver(published.requester_uuid, published.record_id, published.pushing)
        handle.kick.set()  # the turn ended: pending tasks get another chance

    # --- dispatch -------------------------------------------------------------------------------------

    def task_admitted(self, recipient_uuid: str) -> None:
        """A task was admitted for this agent: a dispatch opportunity (or a reason to start its runtime)."""
        handle = self.owners.get(recipient_uuid)
        if handle is not None:
            handle.kick.set()
        elif self._tg is not None and recipient_uuid not in self._starting:
            self._tg.start_soon(self._start_inactive, recipient_uuid)

    async def _start_inactive(self, agent_uuid: str) -> None:
        """An accepted task for an inactive agent that was started before (desired on) starts its runtime and
        resumes the same conversation; an explicit off stays off (seed)."""
        agents = await self.writer.call(lambda s: s.find_agents(agent_uuid))
        if not agents or not self.is_mine(agents[0].host):
            return  # another host's agent: its own app starts it (it hears of the task from the store)
        agent = await self.writer.call(lambda s: s.managed_agent(agents[0].id))
        if agent.desired != "on" or agent.uuid in self.owners or agent.uuid in self._starting:
            return
        try:
            await self._launch(agent)
        except errors.WardianError as exc:
            log.error("could not start inactive agent %s for a task: %s", agent.name, exc.message)
            await self._fail_pending(agent, exc)

    async def _fail_pending(self, agent: ManagedAgent, exc: errors.WardianError) -> None:
        """A definite failure before submission: each pending task gets one correlated `failed` notice from
        Wardian, committed together with the task's failure (nothing was submitted)."""
        generation = (await self.writer.call(lambda s: s.managed_agent(agent.id))).generation
        text = start_failure_notice(agent.name, exc.code, exc.message)
        for task in await self.writer.call(lambda s: s.pending_tasks(agent.id)):
            published = await self.writer.call(lambda s, t=task: s.fail_task(t.request_id, generation, text,
                                                                             self.can_push))
            if published is not None and published.record_id is not None:
                await self.deliver(published.requester_uuid, published.record_id, published.pushing)

    async def _fail_refused(self, handle: _Handle, rid: str, exc: errors.WardianError) -> None:
        """A definite failure before submission (the provider accepted nothing, and would refuse again): one
        correlated `failed` notice from Wardian, committed together with the task's failure."""
        text = outcomes.refused_notice(handle.name, exc.code, exc.message)
        published = await self.writer.call(lambda s: s.fail_task(rid, handle.generation, text, self.can_push))
        log.warning("task %s: refused by the provider (%s); answered with a failed notice", rid, exc.code)
        if published is not None and published.record_id is not None:
            await self.deliver(published.requester_uuid, published.record_id, published.pushing)

    async def _dispatcher(self, handle: _Handle) -> None:
        while True:
            await handle.kick.wait()
            handle.kick = anyio.Event()
            try:
                await self._dispatch_pending(handle)
            except errors.StorageError as exc:
                log.error("dispatch for %s stopped by the store: %s", handle.name, exc.message)

    async def _dispatch_pending(self, handle: _Handle) -> None:
        runtime = handle.runtime
        for _ in range(MAX_DISPATCH_ROUNDS):
            tasks = await self.writer.call(lambda s: s.pending_tasks(handle.agent_id))
            if not tasks or not runtime.ready:
                return
            retry = False
            for task in tasks:
                active = runtime.active_turn_id
                if active is not None and not handle.caps.steer:
                    return  # no fenced steer: wait for the turn to end (the observer kicks us)
                # A provider that takes a client-chosen message id gets one now; it is persisted with the claim.
                message_id = runtime.plan_message_id() if active is None else None
                thread = runtime.thread_id if message_id is not None else None
                won = await self.writer.call(lambda s, t=task, m=message_id, th=thread: s.claim_task(
                    t.request_id, ClaimKind.DISPATCH, handle.generation, provider_message_id=m, thread_id=th))
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
                    retry = True
                    break
                if outcome == "stale":
                    if active is not None and runtime.active_turn_id == active:
                        # The provider says that turn is over; its end is on the way. Wait for it (bounded) rather
                        # than steering the finished turn again.
                        with anyio.move_on_after(STALE_SETTLE_S):
                            await runtime.wait_idle()
                    retry = True
                    break
                if outcome == "rejected":
                    return
            if not retry:
                return

    async def _submit(self, handle: _Handle, task: PendingTask, active: str | None,
                      message_id: str | None) -> str | errors.WardianError:
        """Submit one claimed task; what happened ("accepted", "stale", "busy", "rejected", "uncertain"), or the
        definite refusal the task is to be answered with (its claim already released)."""
        runtime = handle.runtime
        rid = task.request_id
        delivery = TaskDelivery(request_id=rid, sender=task.sender, text=task.text)
        lookup: str | None = None  # why the provider's answer was lost, when a lookup then found the message
        try:
            if active is None:
                started = await runtime.start_turn(delivery, message_id)
                turn_id, lookup = started.turn_id, started.confirmed_by_lookup
            else:
                turn_id = await runtime.steer(delivery, active)
        except errors.StaleTurn:
            # Confirmed not admitted: give the claim back, then read the current activity again.
            await self.writer.call(lambda s: s.release_claim(rid, handle.generation))
            log.info("task %s: stale turn %s, claim released", rid, active)
            return "stale"
        except errors.ConversationGone as exc:
            # Nothing was accepted, and the provider already has a fresh conversation: offer the task again there.
            note = exc.message
            await self.writer.call(lambda s: s.release_claim(rid, handle.generation, rejection=note))
            handle.gone[rid] = handle.gone.get(rid, 0) + 1
            log.warning("task %s: %s; claim released, offered again", rid, exc.message)
            if handle.gone[rid] < MAX_CONVERSATION_REJECTIONS:
                return "stale"
            del handle.gone[rid]
            return exc
        except errors.ProviderBusy as exc:
            await self.writer.call(lambda s: s.release_claim(rid, handle.generation))
            log.info("task %s: %s; claim released, offered again shortly", rid, exc.message)
            return "busy"
        except errors.ProviderRefused as exc:
            # Nothing was accepted, and the same request would be refused again: the task gets its answer now.
            note = exc.message
            await self.writer.call(lambda s: s.release_claim(rid, handle.generation, rejection=note))
            return exc
        except errors.Rejected as exc:
            await self.writer.call(lambda s: s.release_claim(rid, handle.generation))
            log.info("task %s: not admitted (%s), claim released", rid, exc.code)
            return "rejected"
        except errors.WardianError as exc:
            reason = outcomes.submission_unknown(exc.code, exc.message)
            looked_up = bool(exc.details.get("looked_up"))
            await self.writer.call(lambda s: s.mark_uncertain(rid, reason, looked_up=looked_up))
            log.warning("task %s: delivery uncertain (%s: %s)%s; it will not be resubmitted", rid, exc.code,
                        exc.message, "; a lookup did not find its message" if looked_up else "")
            return "uncertain"
        crashpoint("after_provider_submit_before_ack_persist")
        await self.writer.call(lambda s: s.bind_submission(rid, handle.generation, runtime.thread_id or "", turn_id,
                                                           lookup=lookup))
        if lookup is not None:
            log.warning("task %s: the provider's answer was lost (%s), and a lookup found message %s: the delivery "
                        "is confirmed", rid, lookup, turn_id)
        log.info("task %s: %s into turn %s", rid, "steered" if active else "started", turn_id)
        handle.gone.pop(rid, None)
        return "accepted"

    # --- information ----------------------------------------------------------------------------------

    def can_push(self, recipient_uuid: str) -> bool:
        """Whether a record for this agent is admitted for a push into its live conversation: its runtime is
        running, ready and can inject. Decided inside the admission's transaction, so the record is hidden from
        receive from its first commit: it reaches the agent by exactly one path (#13)."""
        handle = self.owners.get(recipient_uuid)
        return (handle is not None and handle.runtime.ready and handle.caps.inject
                and (handle.caps.inject_while_active or handle.runtime.active_turn_id is None))

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
        self.defer_push(recipient_uuid, record_id)
        self.signals.notify(recipient_uuid)
        return False

    def defer_push(self, recipient_uuid: str, record_id: str) -> None:
        """Remember a record admitted on the receive path while its recipient's turn ran, to push it at idle."""
        handle = self.owners.get(recipient_uuid)
        if handle is not None and self.can_push_later(recipient_uuid):
            handle.deferred.append(record_id)

    async def _push_deferred(self, handle: _Handle) -> None:
        """At idle: push what waited for the turn to end, each record only if no receive has taken it meanwhile."""
        while handle.deferred and handle.runtime.ready and handle.runtime.active_turn_id is None:
            record_id = handle.deferred.pop(0)
            if await self.writer.call(lambda s, r=record_id: s.claim_push(r)):
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
            await self._release_push(recipient_uuid, record_id, "the runtime is gone")
            return False
        record = await self.writer.call(lambda s: s.interaction(record_id))
        try:
            await handle.runtime.push([record], timeout_s=PUSH_TIMEOUT_S)
        except errors.Rejected as exc:
            await self._release_push(recipient_uuid, record_id, exc.code)
            return False
        except errors.WardianError as exc:
            reason = outcomes.push_unknown(exc.code, exc.message)
            await self.writer.call(lambda s: s.push_uncertain(record_id, reason))
            log.warning("record %s: push uncertain (%s); it stays off the receive path", record_id, exc.code)
            self.signals.notify(recipient_uuid, PROVIDER_CONTEXT)
            return False
        await self.writer.call(lambda s: s.push_done(record_id))
        self.signals.notify(recipient_uuid, PROVIDER_CONTEXT)
        return True

    async def _release_push(self, recipient_uuid: str, record_id: str, why: str) -> None:
        await self.writer.call(lambda s: s.push_released(record_id))
        log.info("record %s goes to the receive path (push: %s)", record_id, why)
        self.signals.notify(recipient_uuid)

    # --- interruption ---------------------------------------------------------------------------------

    # --- what other apps of a shared store committed (#15) -----------------------------------------------

    async def announced(self, event: StoreEvent) -> None:
        """Act on another app's commit: wake waits, dispatch, push or interrupt for this host's agents."""
        if isinstance(event, Resynced):
            await self._resync()
        elif isinstance(event, RecordAnnounced):
            if event.kind == "task":
                if self.is_mine(event.host):
                    self.task_admitted(event.recipient)
                self.signals.notify(event.recipient)
            elif not (self.is_mine(event.host) and await self._push_announced(event.recipient, event.public_id)):
                self.signals.notify(event.recipient)  # on the receive path: wake its waits (they may run here)
        elif isinstance(event, InterruptAnnounced) and self.is_mine(event.host) and event.target in self.owners:
            try:
                await self.interrupt(event.target, event.turn_id)
                log.info("interrupt #%d of turn %s (asked on another host) done", event.interrupt_id, event.turn_id)
            except errors.WardianError as exc:
                log.warning(
                    "interrupt #%d of turn %s (asked on another host) not done: %s: %s",
                    event.interrupt_id,
                    event.turn_id,
                    exc.code,
                    exc.message,
                )

    async def _push_announced(self, recipient_uuid: str, record_id: str) -> bool:
        """A record another app admitted on the receive path (it cannot push into this host's conversations): push
        it now when the recipient's runtime can, if no receive took it first; True when it was pushed."""
        if self.can_push(recipient_uuid):
            if await self.writer.call(lambda s: s.claim_push(record_id)):
                return await self.push(recipient_uuid, record_id)
            return False
        self.defer_push(recipient_uuid, record_id)
        return False

    async def _resync(self) -> None:
        """Announcements may have been lost: every dispatcher looks again, and every wait of this app reads again
        whether its mailbox has something (subscribe, then check)."""
        for handle in list(self.owners.values()):
            handle.kick.set()
        for uuid in self.signals.subscribed():
            found = await self.writer.call(lambda s, u=uuid: s.find_agents(u))
            if found and await self.writer.call(lambda s, a=found[0].id: s.has_unacked(a)):
                self.signals.notify(uuid)

    def check_interruptible(self, target_uuid: str) -> None:
        """Raises: Unsupported when the target's running provider cannot interrupt a turn."""
        handle = self.owners.get(target_uuid)
        if handle is not None and not handle.caps.interrupt:
            raise errors.Unsupported(f"agent {handle.name!r} runs on a provider that cannot interrupt a turn; "
                                     "nothing was interrupted", field="target")

    async def interrupt(self, target_uuid: str, turn_id: str) -> None:
        """Interrupt the target's exact active turn. Raises: NotActive, Unsupported, WardianError."""
        handle = self.owners.get(target_uuid)
        if handle is None:
            raise errors.NotActive("the agent has no running provider runtime; nothing was interrupted",
                                   field="target")
        self.check_interruptible(target_uuid)
        await handle.runtime.interrupt(turn_id)


def _first_cause(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (a task group's failure), or the exception itself."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _concrete_providers() -> Mapping[str, Provider]:
    """The registry of real providers, imported only by an app that runs them (never by importing this module)."""
    from wardian.providers.registry import PROVIDERS

    return PROVIDERS
