"""Launching and owning provider runtimes: one per started agent, each in a generation of its own.

A launch checks what the provider can do, begins a generation, creates the session its `wardian mcp serve` is
registered with, and starts the runtime with `tg.start`: the launcher resumes once the conversation is ready, or
gets the failure of the runtime's own start (and the agent is marked errored). From then on three tasks share the
runtime's cancel scope: the provider runtime itself (its process and conversation), its dispatcher and its
observer. When the runtime ends, for whatever reason, the turns it was running can no longer be observed to end:
their tasks are marked uncertain, never guessed and never replayed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from wardian import errors
from wardian.app import outcomes, worktree
from wardian.app.runtime.dispatch import Dispatcher
from wardian.app.runtime.handle import AgentHandle, Owners
from wardian.app.runtime.hosts import HostScope
from wardian.app.runtime.observe import Observer
from wardian.app.writer import StoreWriter
from wardian.auth.agents import credentials_for
from wardian.auth.store import CredentialStore
from wardian.home import Home
from wardian.model import AgentStatus, ManagedAgent
from wardian.overrides import check_override, env_mapping
from wardian.providers import Capabilities, LaunchSpec, Provider
from wardian.providers.asking import launch_policy
from wardian.providers.base import CommandProvider, ProviderInfo
from wardian.store import Store, approvals, ledger, roster, worktrees

log = logging.getLogger("wardian.app.runtime")

STOP_TIMEOUT_S = 15.0


class Launcher:
    def __init__(self, home: Home, writer: StoreWriter, providers: Mapping[str, Provider], owners: Owners,
                 hosts: HostScope, dispatcher: Dispatcher, observer: Observer) -> None:
        self.home = home
        self.writer = writer
        self.providers = providers
        self.owners = owners
        self.hosts = hosts
        self.dispatcher = dispatcher
        self.observer = observer
        self.credentials = CredentialStore(home)
        self.tg: anyio.abc.TaskGroup | None = None  # the runtime's task group, once it runs
        self._starting: set[str] = set()
        # Per running generation (agent uuid, generation): set when its `wardian mcp serve` announced itself.
        self._mcp_connected: dict[tuple[str, int], anyio.Event] = {}

    # --- what the service asks ------------------------------------------------------------------------

    @contextmanager
    def starting(self, agent_uuid: str, name: str) -> Iterator[None]:
        """Hold the agent's one start at a time: a second start meanwhile is refused (`unsupported`, "already
        starting") before it saves anything, and nothing starts the agent for new work while it is held.

        Raises: Unsupported."""
        if agent_uuid in self._starting:
            raise errors.Unsupported(f"agent {name!r} is already starting", field="agent")
        self._starting.add(agent_uuid)
        try:
            yield
        finally:
            self._starting.discard(agent_uuid)

    async def check_start(self, agent_id: int, mode: str, overrides: Sequence[str],
                          approve_tools: Sequence[str] = (), env: Sequence[str] = ()) -> ProviderInfo | None:
        """Refuse a start this app cannot make, before anything of it is saved; the provider's probe for
        `start_agent` (None: it failed, and the launch reports it).

        Raises: NotMine (another host's agent); Unsupported (no such mode, no tool grants); InvalidArguments (a bad
            setting)."""
        await self.hosts.check_mine(self.writer, agent_id)
        saved = await self.writer.call(roster.managed_agent, agent_id)
        provider = self._provider(saved)
        try:
            info: ProviderInfo | None = await provider.probe()
        except errors.WardianError:
            info = None  # the launch reports it (and marks the agent errored)
        if info is not None:
            check_launch(provider.name, info.capabilities, mode, approve_tools)
        for override in overrides:
            check_override(override, provider.settings_syntax)  # each provider's value syntax, before any is saved
        env_mapping(env)
        return info

    async def start_agent(self, agent_id: int, mode: str, overrides: Sequence[str],
                          approve_tools: Sequence[str] = (), env: Sequence[str] = (),
                          info: ProviderInfo | None = None) -> dict[str, Any]:
        """Start (or restart with new settings) the agent's runtime; returns once its conversation is ready. The
        caller holds `starting` for the agent and has passed `check_start`, whose probe `info` is (a CLI asked its
        version once per start: a Node CLI's `--version` alone takes 0.1-2 s).
        """
        # The grants are kept with the agent like its settings (the same rule: this start's replace the last's), so
        # an app restart and a relaunch for new work grant them again.
        await self.writer.call(roster.set_desired, agent_id, "on", mode, list(overrides), list(approve_tools),
                               list(env))
        agent = await self.writer.call(roster.managed_agent, agent_id)
        existing = self.owners.get(agent.uuid)
        if existing is not None:
            await self._stop(existing)
        handle = await self._launch_held(agent, info)
        return {"thread_id": handle.runtime.thread_id, "generation": handle.generation,
                "provider_version": handle.info.version, "warnings": start_warnings(handle.runtime)}

    async def turn_off(self, agent_id: int) -> AgentHandle | None:
        """Stop the agent's runtime, and do not start it again for new tasks (desired off); the stopped runtime's
        handle, or None when none ran."""
        await self.writer.call(roster.set_desired, agent_id, "off")
        agent = await self.writer.call(roster.managed_agent, agent_id)
        handle = self.owners.get(agent.uuid)
        if handle is None:
            return None
        await self._stop(handle)
        return handle

    async def attach_info(self, agent_id: int) -> dict[str, Any]:
        """How a person's terminal attaches to the agent's app-owned runtime (`wardian agent attach`)."""
        agent = await self.writer.call(roster.managed_agent, agent_id)
        handle = self.owners.get(agent.uuid)
        if handle is None or not handle.caps.attach:
            raise errors.NotActive(f"agent {agent.name!r} has no attached-mode runtime; start it with "
                                   f"`wardian agent start {agent.name} --mode attached`", field="agent")
        return handle.runtime.attach_info()

    def mcp_announced(self, agent_uuid: str, generation: int) -> bool:
        """The `wardian mcp serve` of the agent's generation `generation` listed its tools to the agent (it said so
        with `session/announce`); False when that generation is not one this app runs."""
        connected = self._mcp_connected.get((agent_uuid, generation))
        if connected is None:
            return False
        connected.set()
        return True

    def task_admitted(self, recipient_uuid: str) -> None:
        """A task was admitted for this agent: a dispatch opportunity (or a reason to start its runtime)."""
        handle = self.owners.get(recipient_uuid)
        if handle is not None:
            handle.kick.set()
        elif self.tg is not None and recipient_uuid not in self._starting:
            self.tg.start_soon(self._start_inactive, recipient_uuid)

    # --- starting -------------------------------------------------------------------------------------

    async def launch_logged(self, agent: ManagedAgent) -> None:
        """A background (re)start at app startup; a definite failure answers the agent's pending tasks."""
        try:
            await self._launch(agent)
        except errors.WardianError as exc:
            log.error("could not start agent %s: %s", agent.name, exc.message)
            await self.dispatcher.fail_pending(agent, exc)

    async def _start_inactive(self, agent_uuid: str) -> None:
        """An accepted task for an inactive agent that was started before (desired on) starts its runtime and
        resumes the same conversation; an explicit off stays off until the agent is started again."""
        agents = await self.writer.call(roster.find_agents, agent_uuid)
        if not agents or not self.hosts.is_mine(agents[0].host):
            return  # another host's agent: its own app starts it (it hears of the task from the store)
        agent = await self.writer.call(roster.managed_agent, agents[0].id)
        if agent.desired != "on" or agent.uuid in self.owners or agent.uuid in self._starting:
            return
        try:
            await self._launch(agent)
        except errors.WardianError as exc:
            log.error("could not start inactive agent %s for a task: %s", agent.name, exc.message)
            await self.dispatcher.fail_pending(agent, exc)

    async def _launch(self, agent: ManagedAgent) -> AgentHandle:
        """Start the agent's runtime with what the store keeps for it: mode, settings and tool grants."""
        with self.starting(agent.uuid, agent.name):
            return await self._launch_held(agent)

    async def _launch_held(self, agent: ManagedAgent, info: ProviderInfo | None = None) -> AgentHandle:
        """`_launch`, for a caller that holds `starting` for the agent (`info`: its provider probed already)."""
        try:
            return await self._launch_once(agent, agent.approve_tools, info)
        except errors.NotSignedIn as exc:
            # Refused for missing or rejected credentials: the agent shows signed_out (with the reason), not errored.
            reason = exc.message
            await self.writer.call(_refused_signed_out, agent.id, reason)
            raise
        except errors.WardianError:
            await self.writer.call(roster.mark_errored, agent.id)
            raise

    def _provider(self, agent: ManagedAgent) -> Provider:
        provider = self.providers.get(agent.provider)
        if provider is None:
            raise errors.Unsupported(f"agent {agent.name!r} has provider {agent.provider!r}, which this app cannot "
                                     "run", field="provider", allowed=", ".join(self.providers))
        if agent.command and isinstance(provider, CommandProvider):
            return provider.with_command(agent.command)
        return provider

    async def _launch_once(self, agent: ManagedAgent, approve_tools: tuple[str, ...],
                           info: ProviderInfo | None) -> AgentHandle:
        assert self.tg is not None
        provider = self._provider(agent)
        info = info or await provider.probe()
        mode = agent.mode or "background"
        check_launch(provider.name, info.capabilities, mode, approve_tools)
        # Read at each start (a login or logout since the last one counts), off the event loop: the keyring may
        # answer over D-Bus. A missing named credential refuses the start before anything runs.
        credentials = await anyio.to_thread.run_sync(
            lambda: credentials_for(self.credentials, agent.provider, agent.name, agent.auth))
        generation = await self.writer.call(roster.begin_generation, agent.id)
        # Managed startup registers wardian's MCP server with a session bound to this generation, so whatever the
        # agent does through it is fenced by the generation that runs it.
        session = await self.writer.call(roster.create_session, agent.id, "managed")
        workspace = Path(agent.workspace) if agent.workspace else self.home.default_workspace(agent.uuid)
        tree = await self.writer.call(worktrees.of_agent, agent.id)
        await anyio.to_thread.run_sync(worktree.prepare, workspace, tree)
        key = (agent.uuid, generation)
        connected = self._mcp_connected[key] = anyio.Event()
        policy, _, allow = await self.writer.call(approvals.asking_of, agent.id)  # asking, or rules, turn it on
        spec = LaunchSpec(
            name=agent.name, uuid=agent.uuid, agent_dir=self.home.agent_dir(agent.uuid), workspace=workspace,
            mode=mode, overrides=agent.overrides, approve_tools=approve_tools, home=self.home, session=session,
            thread_id=agent.thread_id, log_path=self.home.provider_log_path(provider.name, agent.uuid),
            pid_path=self.home.provider_pid_path(provider.name, agent.uuid), credentials=credentials,
            env=env_mapping(agent.env), mcp_connected=connected,
            approvals=launch_policy(policy.value, bool(allow)))
        try:
            runtime = await provider.prepare(spec, info)
            handle = AgentHandle(agent.id, agent.uuid, agent.name, generation, runtime, info)
            try:
                await self.tg.start(self._own, handle)
            except errors.WardianError:
                raise
            except Exception as exc:
                raise errors.ProviderError(f"{provider.name} for {agent.name!r} failed to start: {exc}") from exc
        except BaseException:
            self._mcp_connected.pop(key, None)
            raise
        return handle

    # --- owning ---------------------------------------------------------------------------------------

    async def _own(self, handle: AgentHandle, *,
                   task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the agent's runtime until it ends. Ready once it runs, or once it failed after its own start (that
        failure ends the runtime, never the app); a failure of its own start is raised to the launcher."""
        started = False

        def ready() -> None:
            nonlocal started
            if not started:
                started = True
                task_status.started()

        failure: BaseException | None = None
        with handle.scope:
            try:
                failure = await self._own_inner(handle, ready)
            except Exception:
                log.exception("the provider runtime of %s failed", handle.name)
            finally:
                self._mcp_connected.pop((handle.uuid, handle.generation), None)
                if self.owners.get(handle.uuid) is handle:
                    del self.owners[handle.uuid]
                if failure is None:
                    ready()
        if failure is not None:
            handle.done.set()
            raise failure  # the launcher records the failure (errored)
        with anyio.CancelScope(shield=True):
            await self.writer.call(roster.observe, handle.agent_id, handle.generation, AgentStatus.OFF)
            # Turns this runtime was running can no longer be observed to end: never guess, never replay.
            lost = await self.writer.call(ledger.mark_generation_lost, handle.agent_id, handle.generation,
                                          outcomes.runtime_lost(handle.generation))
            handle.lost = lost
            withdrawn = await self.writer.call(approvals.withdraw_pending, handle.agent_id, "provider")
            if withdrawn:
                log.warning("runtime of %s ended; approvals withdrawn: %s", handle.name, ", ".join(withdrawn))
            if lost:
                log.warning("runtime of %s ended; deliveries marked uncertain: %s", handle.name, ", ".join(lost))
        handle.done.set()

    async def _own_inner(self, handle: AgentHandle, ready: Callable[[], None]) -> BaseException | None:
        """The runtime with its observer and dispatcher; the failure of the runtime's own start, if it failed."""
        runtime = handle.runtime
        async with anyio.create_task_group() as tg:
            try:
                thread_id = await tg.start(runtime.run)
            except Exception as exc:
                log.error("the provider runtime of %s failed to start", handle.name, exc_info=exc)
                return _first_cause(exc)
            status = AgentStatus.IDLE if runtime.ready else AgentStatus.STARTING
            await self.writer.call(roster.observe, handle.agent_id, handle.generation, status, thread_id)
            self.owners[handle.uuid] = handle
            handle.background = tg
            tg.start_soon(self.observer.run, handle)
            tg.start_soon(self.dispatcher.run, handle)
            ready()
            handle.kick.set()  # readiness is a dispatch opportunity
        return None

    async def _stop(self, handle: AgentHandle) -> None:
        handle.runtime.stop()
        with anyio.move_on_after(STOP_TIMEOUT_S):
            await handle.done.wait()
        handle.scope.cancel()
        with anyio.move_on_after(STOP_TIMEOUT_S):
            await handle.done.wait()


def check_launch(provider: str, caps: Capabilities, mode: str, approve_tools: Sequence[str]) -> None:
    """Raises: Unsupported (the provider has no such mode, or takes no tool grants)."""
    if mode == "attached" and not caps.attach:
        why = f": {caps.no_attach_reason}" if caps.no_attach_reason else ""
        raise errors.Unsupported(f"{provider} agents have no attached mode{why}", field="mode", allowed="background")
    if approve_tools and not caps.tool_grants:
        raise errors.Unsupported(
            f"{provider} agents take no --approve-tools: {provider} has no approval step for wardian's tools "
            "(they run unless the provider's own settings deny them)", field="approve_tools",
            allowed="no grants; restrict tools with the provider's settings (-c)")


def start_warnings(runtime: object) -> list[str]:
    """What the provider said a person should know of this start (`ProviderRuntime`'s optional `warnings`: a key
    the agent's own config overrides, say), never a secret; [] for a runtime that has none."""
    warnings = getattr(runtime, "warnings", None)
    return [str(w) for w in warnings] if isinstance(warnings, list | tuple) else []


def _refused_signed_out(store: Store, agent_id: int, reason: str) -> None:
    """The agent's start was refused because it is not signed in: `signed_out` (and why) in its current generation
    (a start refused before its runtime ran still has its previous one); the next start clears it."""
    generation = roster.managed_agent(store, agent_id).generation
    roster.observe(store, agent_id, generation, AgentStatus.SIGNED_OUT)
    roster.mark_signed_out(store, agent_id, generation, reason)


def _first_cause(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (a task group's failure), or the exception itself."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc

