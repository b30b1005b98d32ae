"""The provider runtime of the app: one Codex owner per started agent, the dispatcher and the completion
observer (seed: "Automatic task delivery").

Per owner, four tasks share one task group: the owner itself (its app-server process), the dispatcher
(woken by admissions, readiness and turn ends), the completion observer (turn outcomes -> replies) and the
state recorder (observed idle/active/turn id -> the roster). Every fact is persisted through the writer.

Dispatch of one task: take the durable claim (generation-fenced) -> submit (`turn/start` when idle,
`turn/steer` fenced by `expectedTurnId` when active) while holding the owner's submit lock -> persist the
binding -> release the lock. A recognised stale-turn rejection releases the claim and re-reads activity;
a write that never left releases the claim; anything else marks the task uncertain, never resubmitted.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from wardian import errors
from wardian.app.signals import MailboxSignals
from wardian.app.writer import StoreWriter
from wardian.faults import crashpoint
from wardian.home import ENV_HOME, ENV_SESSION, Home
from wardian.model import AgentStatus, ClaimKind, Interaction, ReplyStatus
from wardian.providers.codex import projection
from wardian.providers.codex.compat import Capabilities, CodexVersion, capabilities
from wardian.providers.codex.owner import (
    INBOX_ITEM_KIND,
    TASK_ITEM_KIND,
    CodexOwner,
    OwnerSpec,
    TurnOutcome,
    codex_version,
    reap_stale_owner,
)
from wardian.providers.codex.registration import register_session
from wardian.store import runtime as rt

log = logging.getLogger("wardian.app.runtime")

ENV_CODEX = "WARDIAN_CODEX"
MAX_DISPATCH_ROUNDS = 20
PUSH_TIMEOUT_S = 10.0
STALE_SETTLE_S = 2.0  # after a stale-turn rejection, how long to wait for that turn's end before trying again
# Launch settings of every managed app-server: thread/start waits until wardian's MCP server is ready, so
# the first turn already offers its tools (codex-offline.md §2: optional servers are skipped when late).
# Codex gives an MCP server 10 s to start by default; a loaded machine can need more, and a required server
# that misses it fails the whole thread/start.
LAUNCH_OVERRIDES = ("mcp_servers.wardian.required=true", "mcp_servers.wardian.startup_timeout_sec=60")


@dataclass
class _Handle:
    agent_id: int
    uuid: str
    name: str
    generation: int
    owner: CodexOwner
    caps: Capabilities
    kick: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)


def task_payload(request_id: str, sender_name: str, sender_uuid: str, text: str) -> str:
    """The structured `wardian_task_delivery` item of an idle delivery; the peer text is a JSON string."""
    return TASK_ITEM_KIND + "\n" + json.dumps({
        "request_id": request_id, "from": {"name": sender_name, "uuid": sender_uuid}, "text": text,
        "reply": "Work on this task now. Your final answer in this turn is returned to the sender as this "
                 "task's reply; use the reply tool with this request_id only to answer differently.",
    }, ensure_ascii=False, indent=1)


def steer_context(request_id: str, sender_name: str, sender_uuid: str) -> str:
    """Routing metadata of a steered task (additionalContext); the peer text itself is the steer input."""
    return json.dumps({"kind": TASK_ITEM_KIND, "request_id": request_id,
                       "from": {"name": sender_name, "uuid": sender_uuid},
                       "note": "The user message that follows is a task from this Wardian peer. Your final answer "
                               "in this turn is returned to it as the reply."}, ensure_ascii=False)


def inbox_item(record: Interaction) -> dict[str, Any]:
    """A `wardian_inbox_delivery` history item for thread/inject_items (information, replies, notices)."""
    body = {"id": record.id, "kind": record.kind.value,
            "from": {"name": record.sender.name, "uuid": record.sender.uuid} if record.sender else "wardian",
            "request_id": record.request_id, "status": record.status.value if record.status else None,
            "text": record.text}
    text = INBOX_ITEM_KIND + "\n" + json.dumps(body, ensure_ascii=False, indent=1)
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


class Runtime:
    def __init__(self, home: Home, writer: StoreWriter, signals: MailboxSignals) -> None:
        self.home = home
        self.writer = writer
        self.signals = signals
        self.owners: dict[str, _Handle] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._starting: set[str] = set()

    # --- lifecycle ------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await self.recover()
            task_status.started()
            for agent_id in await self.writer.call(rt.agents_desired_on):
                agent = await self.writer.call(lambda s, a=agent_id: rt.managed_agent(s, a))
                tg.start_soon(self._launch_logged, agent)
            await anyio.sleep_forever()

    async def recover(self) -> None:
        """Startup: mark bindings whose observation was lost uncertain; publish captured outcomes once."""
        await self.writer.call(rt.reset_observed_state)
        lost = await self.writer.call(rt.mark_lost_bindings_uncertain)
        if lost:
            log.warning("marked %d deliveries uncertain after a restart: %s", len(lost), ", ".join(lost))
        for request_id in await self.writer.call(rt.unpublished_outcomes):
            published = await self.writer.call(lambda s, r=request_id: rt.publish_outcome(s, r))
            if published is not None:
                self.signals.notify(published.requester_uuid)

    # --- agent start/stop ----------------------------------------------------------------------------

    async def start_agent(self, agent_id: int, mode: str, overrides: Sequence[str],
                          approve_tools: Sequence[str] = ()) -> dict[str, Any]:
        """Start (or restart with new settings) the agent's owner; returns once its conversation is ready."""
        await self.writer.call(lambda s: rt.set_desired(s, agent_id, "on", mode, list(overrides)))
        agent = await self.writer.call(lambda s: rt.managed_agent(s, agent_id))
        existing = self.owners.get(agent.uuid)
        if existing is not None:
            await self._stop_handle(existing)
        handle = await self._launch(agent, tuple(approve_tools))
        return {"thread_id": handle.owner.thread_id, "generation": handle.generation,
                "codex_version": str(handle.caps.version)}

    async def stop_agent(self, agent_id: int) -> bool:
        """An explicit off: stop the owner, and do not start it again for new tasks (seed)."""
        await self.writer.call(lambda s: rt.set_desired(s, agent_id, "off"))
        agent = await self.writer.call(lambda s: rt.managed_agent(s, agent_id))
        handle = self.owners.get(agent.uuid)
        if handle is None:
            return False
        await self._stop_handle(handle)
        return True

    async def _stop_handle(self, handle: _Handle) -> None:
        handle.owner.stop()
        with anyio.move_on_after(15):
            await handle.done.wait()
        handle.scope.cancel()
        with anyio.move_on_after(15):
            await handle.done.wait()

    async def _launch_logged(self, agent: rt.ManagedAgent) -> None:
        """A background (re)start at app startup; a definite failure answers the agent's pending tasks."""
        try:
            await self._launch(agent)
        except errors.WardianError as exc:
            log.error("could not start agent %s: %s", agent.name, exc.message)
            await self._fail_pending(agent, exc)

    async def _launch(self, agent: rt.ManagedAgent, approve_tools: tuple[str, ...] = ()) -> _Handle:
        assert self._tg is not None
        if agent.uuid in self._starting:
            raise errors.Unsupported(f"agent {agent.name!r} is already starting", field="agent")
        self._starting.add(agent.uuid)
        try:
            return await self._launch_once(agent, approve_tools)
        except errors.WardianError:
            await self.writer.call(lambda s: rt.mark_errored(s, agent.id))
            raise
        finally:
            self._starting.discard(agent.uuid)

    async def _launch_once(self, agent: rt.ManagedAgent, approve_tools: tuple[str, ...]) -> _Handle:
        assert self._tg is not None
        codex = resolve_codex()
        caps = capabilities(CodexVersion.parse(await anyio.to_thread.run_sync(codex_version, codex)))
        generation = await self.writer.call(lambda s: rt.begin_generation(s, agent.id))
        codex_home = self.home.root / "agents" / agent.uuid / "codex"
        await anyio.to_thread.run_sync(prepare_codex_home, codex_home)
        pid_path = self.home.run_dir / f"codex-{agent.uuid}.pid"
        if await anyio.to_thread.run_sync(reap_stale_owner, pid_path, codex_home):
            log.warning("ended the Codex app-server a previous app left running for %s", agent.name)
        # An earlier attached launch's projection (even one a crash interrupted) is undone first.
        await anyio.to_thread.run_sync(projection.recover, codex_home)
        if agent.mode == "attached":
            # The person's TUI reads config.toml, not our -c: project the launch settings for this owner.
            await anyio.to_thread.run_sync(projection.project, codex_home, list(agent.overrides))
        # Managed startup registers the bundled CLI in the agent's private home, with a session bound
        # to this generation (seed: "Codex configuration"); grants persist there once given.
        token = await self.writer.call(lambda s: s.create_session(agent.id))
        await anyio.to_thread.run_sync(lambda: register_session(
            codex_home, self.home, token, {"name": agent.name, "uuid": agent.uuid}, approve_tools))
        workspace = Path(agent.workspace) if agent.workspace else codex_home.parent / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        spec = OwnerSpec(name=agent.name, codex=codex, codex_home=codex_home, workspace=workspace,
                         overrides=(*agent.overrides, *LAUNCH_OVERRIDES), env=owner_env(codex_home),
                         thread_id=agent.thread_id, capabilities=caps,
                         stderr_path=self.home.log_dir / f"codex-{agent.uuid}.log", pid_path=pid_path,
                         mode=agent.mode or "background",
                         socket_path=codex_home.parent / "app-server.sock")
        owner = CodexOwner(spec)
        handle = _Handle(agent.id, agent.uuid, agent.name, generation, owner, caps)
        ready = anyio.Event()
        failure: list[BaseException] = []
        self._tg.start_soon(self._own, handle, ready, failure)
        await ready.wait()
        if failure:
            exc = failure[0]
            if isinstance(exc, errors.WardianError):
                raise exc
            raise errors.ProviderError(f"Codex for {agent.name!r} failed to start: {exc}") from exc
        return handle

    async def _own(self, handle: _Handle, ready: anyio.Event, failure: list[BaseException]) -> None:
        owner = handle.owner
        with handle.scope:
            try:
                await self._own_inner(handle, ready, failure)
            except Exception:
                # An owner's failure ends that owner, never the app.
                log.exception("the Codex owner of %s failed", handle.name)
            finally:
                if self.owners.get(handle.uuid) is handle:
                    del self.owners[handle.uuid]
                ready.set()
        if owner.spec.mode == "attached":
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(projection.recover, owner.spec.codex_home)
        if failure:
            return
        with anyio.CancelScope(shield=True):
            await self.writer.call(lambda s: rt.observe(s, handle.agent_id, handle.generation, AgentStatus.OFF))
            # Turns this owner was running can no longer be observed to end: never guess, never replay.
            lost = await self.writer.call(lambda s: rt.mark_generation_lost(s, handle.agent_id, handle.generation))
            if lost:
                log.warning("owner of %s ended; deliveries marked uncertain: %s", handle.name, ", ".join(lost))
        handle.done.set()

    async def _own_inner(self, handle: _Handle, ready: anyio.Event, failure: list[BaseException]) -> None:
        owner = handle.owner
        async with anyio.create_task_group() as tg:
            try:
                thread_id = await tg.start(owner.run)
            except Exception as exc:
                log.error("Codex owner of %s failed to start", handle.name, exc_info=exc)
                failure.append(_first_cause(exc))  # the launcher records the failure (errored)
                ready.set()
                handle.done.set()
                return
            status = AgentStatus.IDLE if owner.ready else AgentStatus.STARTING
            await self.writer.call(lambda s: rt.observe(s, handle.agent_id, handle.generation, status,
                                                        thread_id=thread_id))
            self.owners[handle.uuid] = handle
            tg.start_soon(self._record_states, handle)
            tg.start_soon(self._observe_outcomes, handle)
            tg.start_soon(self._dispatcher, handle)
            ready.set()
            handle.kick.set()  # readiness is a dispatch opportunity

    async def _record_states(self, handle: _Handle) -> None:
        async for change in handle.owner.states:
            status = AgentStatus(change.status)
            await self.writer.call(lambda s, c=change, st=status: rt.observe(
                s, handle.agent_id, handle.generation, st, thread_id=c.thread_id, active_turn_id=c.active_turn_id))
            if status is AgentStatus.OFF:
                handle.scope.cancel()  # the owner ended: take its dispatcher and observer down with it
            elif status is AgentStatus.IDLE:
                handle.kick.set()  # ready (e.g. an attached TUI's thread was adopted): a dispatch chance

    async def attach_info(self, agent_id: int) -> dict[str, Any]:
        """How a Codex TUI attaches to the agent's app-owned app-server (`wardian agent attach`)."""
        agent = await self.writer.call(lambda s: rt.managed_agent(s, agent_id))
        handle = self.owners.get(agent.uuid)
        if handle is None or handle.owner.spec.mode != "attached":
            raise errors.NotActive(f"agent {agent.name!r} has no attached-mode owner; start it with "
                                   f"`wardian agent start {agent.name} --mode attached`", field="agent")
        spec = handle.owner.spec
        return {"socket": str(spec.socket_path), "workspace": str(spec.workspace), "codex": spec.codex,
                "codex_home": str(spec.codex_home), "thread_id": handle.owner.thread_id,
                "config": list(agent.overrides)}

    # --- dispatch -------------------------------------------------------------------------------------

    def task_admitted(self, recipient_uuid: str) -> None:
        """A task was admitted for this agent: a dispatch opportunity (or a reason to start its owner)."""
        handle = self.owners.get(recipient_uuid)
        if handle is not None:
            handle.kick.set()
        elif self._tg is not None and recipient_uuid not in self._starting:
            self._tg.start_soon(self._start_inactive, recipient_uuid)

    async def _start_inactive(self, agent_uuid: str) -> None:
        """An accepted task for an inactive agent that was started before (desired on) starts its owner and
        resumes the same conversation; an explicit off stays off (seed)."""
        agents = await self.writer.call(lambda s: s.find_agents(agent_uuid))
        if not agents:
            return
        agent = await self.writer.call(lambda s: rt.managed_agent(s, agents[0].id))
        if agent.desired != "on" or agent.uuid in self.owners or agent.uuid in self._starting:
            return
        try:
            await self._launch(agent)
        except errors.WardianError as exc:
            log.error("could not start inactive agent %s for a task: %s", agent.name, exc.message)
            await self._fail_pending(agent, exc)

    async def _fail_pending(self, agent: rt.ManagedAgent, exc: errors.WardianError) -> None:
        """A definite failure before submission: each pending task gets one correlated `failed` notice from
        Wardian, committed together with the task's failure (nothing was submitted)."""
        generation = (await self.writer.call(lambda s: rt.managed_agent(s, agent.id))).generation
        for task in await self.writer.call(lambda s: rt.pending_tasks(s, agent.id)):
            def op(s: Any, t: rt.PendingTask = task) -> Any:
                with s.atomic():
                    if not s.claim_task(t.request_id, ClaimKind.DISPATCH, generation):
                        return None
                    return rt.failure_notice(s, t.request_id, f"Wardian: agent {agent.name} could not be "
                                             f"started for this task ({exc.code}: {exc.message})")
            published = await self.writer.call(op)
            if published is not None:
                self.signals.notify(published.requester_uuid)

    async def push(self, recipient_uuid: str, record_id: str) -> bool:
        """Push a record into the recipient's live conversation (bounded); True when Codex took it."""
        if recipient_uuid not in self.owners:
            return False
        with anyio.move_on_after(PUSH_TIMEOUT_S, shield=True):
            return await self._push_record(recipient_uuid, record_id)
        return False

    async def _dispatcher(self, handle: _Handle) -> None:
        while True:
            await handle.kick.wait()
            handle.kick = anyio.Event()
            try:
                await self._dispatch_pending(handle)
            except errors.StorageError as exc:
                log.error("dispatch for %s stopped by the store: %s", handle.name, exc.message)

    async def _dispatch_pending(self, handle: _Handle) -> None:
        owner = handle.owner
        for _ in range(MAX_DISPATCH_ROUNDS):
            tasks = await self.writer.call(lambda s: rt.pending_tasks(s, handle.agent_id))
            if not tasks or not owner.ready:
                return
            retry = False
            for task in tasks:
                active = owner.active_turn_id
                if active is not None and not handle.caps.structured_steering:
                    return  # older Codex: wait for the turn to end (the observer kicks us)
                won = await self.writer.call(lambda s, t=task: s.claim_task(t.request_id, ClaimKind.DISPATCH,
                                                                             handle.generation))
                if not won:
                    continue
                crashpoint("after_claim_before_provider_submit")
                async with owner.submit_lock:
                    outcome = await self._submit(handle, task, active)
                if outcome == "stale":
                    if active is not None and owner.active_turn_id == active:
                        # Codex says that turn is over; its turn/completed is on the way. Wait for it (bounded)
                        # rather than steering the finished turn again.
                        with anyio.move_on_after(STALE_SETTLE_S):
                            await owner.idle.wait()
                    retry = True
                    break
                if outcome == "unavailable":
                    return
            if not retry:
                return

    async def _submit(self, handle: _Handle, task: rt.PendingTask, active: str | None) -> str:
        owner = handle.owner
        rid = task.request_id
        try:
            if active is None:
                turn_id = await owner.start_turn(task_payload(rid, task.sender.name, task.sender.uuid, task.text))
            else:
                turn_id = await owner.steer(task.text, active, steer_context(rid, task.sender.name, task.sender.uuid))
        except errors.StaleTurn:
            # Confirmed not admitted: give the claim back, then read the current activity again.
            await self.writer.call(lambda s: rt.release_claim(s, rid, handle.generation))
            log.info("task %s: stale turn %s, claim released", rid, active)
            return "stale"
        except errors.ProviderUnavailable:
            await self.writer.call(lambda s: rt.release_claim(s, rid, handle.generation))
            return "unavailable"
        except errors.WardianError as exc:
            await self.writer.call(lambda s: rt.mark_uncertain(s, rid))
            log.warning("task %s: delivery uncertain (%s: %s); it will not be resubmitted", rid, exc.code,
                        exc.message)
            return "uncertain"
        crashpoint("after_provider_submit_before_ack_persist")
        await self.writer.call(lambda s: rt.bind_submission(s, rid, handle.generation, owner.thread_id or "",
                                                            turn_id))
        log.info("task %s: %s into turn %s", rid, "steered" if active else "started", turn_id)
        return "accepted"

    # --- completion -----------------------------------------------------------------------------------

    async def _observe_outcomes(self, handle: _Handle) -> None:
        async for outcome in handle.owner.outcomes:
            async with handle.owner.submit_lock:  # every binding of this turn is persisted by now
                request_ids = await self.writer.call(lambda s, t=outcome.turn_id: rt.tasks_of_turn(s, t))
            status, text = outcome_reply(outcome)
            for rid in request_ids:
                await self.writer.call(lambda s, r=rid, st=status, tx=text: rt.capture_outcome(s, r, st, tx))
                crashpoint("after_terminal_evidence_before_reply_publish")
                published = await self.writer.call(lambda s, r=rid: rt.publish_outcome(s, r))
                if (published is not None and published.record_id is not None
                        and not await self.push(published.requester_uuid, published.record_id)):
                    self.signals.notify(published.requester_uuid)
            handle.kick.set()  # the turn ended: pending tasks get another chance

    # --- information ----------------------------------------------------------------------------------

    async def _push_record(self, recipient_uuid: str, record_id: str) -> bool:
        handle = self.owners.get(recipient_uuid)
        if handle is None or not handle.owner.ready or not handle.caps.information_delivery:
            return False
        record = await self.writer.call(lambda s: rt.interaction(s, record_id))
        try:
            await handle.owner.inject([inbox_item(record)], timeout_s=PUSH_TIMEOUT_S)
        except errors.WardianError as exc:
            # Known gap: a lost inject acknowledgement leaves the record on the receive path too, so the
            # agent may see information twice (never a task: tasks are never injected).
            log.info("record %s stays on the receive path (inject: %s)", record_id, exc.code)
            return False
        await self.writer.call(lambda s: rt.mark_provider_delivered(s, [record_id]))
        self.signals.notify(recipient_uuid, "provider_context_available")
        return True

    # --- interruption ---------------------------------------------------------------------------------

    async def interrupt(self, target_uuid: str, turn_id: str) -> None:
        handle = self.owners.get(target_uuid)
        if handle is None:
            raise errors.NotActive("the agent has no running Codex owner; nothing was interrupted", field="target")
        try:
            await handle.owner.interrupt(turn_id)
        except errors.AppServerError as exc:
            if "no active turn" in exc.message or "expected active turn id" in exc.message:
                raise errors.NotActive(f"turn {turn_id} is no longer active; nothing was interrupted",
                                       field="target") from None
            raise


def _first_cause(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (a task group's failure), or the exception itself."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def outcome_reply(outcome: TurnOutcome) -> tuple[ReplyStatus, str]:
    """The reply a finished turn stands for (seed: "An exact completed turn returns its final assistant item
    as done ... interrupted ... blocked ... failed ... 64 KiB")."""
    if outcome.status == "completed":
        text = outcome.final_text or ""
        clipped = rt.clip_outcome(text)
        return clipped if clipped is not None else (ReplyStatus.DONE, text)
    if outcome.status == "interrupted":
        return ReplyStatus.BLOCKED, (f"Wardian: the turn {outcome.turn_id} was interrupted before it finished; "
                                     "no final answer was produced.")
    detail = f": {outcome.error}" if outcome.error else ""
    return ReplyStatus.FAILED, f"Wardian: the turn {outcome.turn_id} failed{detail}"


def resolve_codex() -> str:
    """The Codex executable: WARDIAN_CODEX, else `codex` on PATH.

    Raises:
        Unsupported: none found.
    """
    explicit = os.environ.get(ENV_CODEX)
    found = explicit or shutil.which("codex")
    if not found or not os.access(found, os.X_OK):
        raise errors.Unsupported("no Codex CLI found: install @openai/codex or set WARDIAN_CODEX to its path",
                                 field="codex")
    return found


def prepare_codex_home(codex_home: Path) -> None:
    codex_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(codex_home, 0o700)


def owner_env(codex_home: Path) -> dict[str, str]:
    # The agent's MCP server gets its own WARDIAN_HOME/WARDIAN_SESSION_ID from its registration, never ours.
    env = {k: v for k, v in os.environ.items() if k not in (ENV_HOME, ENV_SESSION, "CODEX_HOME")}
    env["CODEX_HOME"] = str(codex_home)
    if getattr(sys, "frozen", False):
        # PyInstaller points LD_LIBRARY_PATH at its own bundle; Codex and the shells it runs need the user's.
        original = env.pop("LD_LIBRARY_PATH_ORIG", None)
        if original is not None:
            env["LD_LIBRARY_PATH"] = original
        else:
            env.pop("LD_LIBRARY_PATH", None)
    return env
