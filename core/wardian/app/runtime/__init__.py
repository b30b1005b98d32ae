"""The provider runtime of the app, provider-neutral: one provider runtime per started agent, its dispatcher and its
event observer, so a task admitted for a managed agent is delivered into its conversation without anyone asking.
What a provider can do is read from its `Capabilities`; how it does it (wire shapes, version gates, error
classification, final text) is the provider's (`wardian.providers`). Every fact is persisted through the writer.

`Runtime` is what the service and the app's main loop hold: it owns the parts, each with one job, and the service
calls the part whose job it needs (`runtime.launcher.start_agent`, `runtime.pushes.deliver`); `Runtime` itself does
only what spans parts (recovery at start-up, stopping, interruption):

```
launch.Launcher     start, stop and own each agent's runtime (tg.start readiness), start an inactive one for a task
dispatch.Dispatcher claim -> submit -> bind each pending task; the `failed` notices of tasks that cannot start
observe.Observer    the runtime's events -> the roster; turn outcomes -> replies
push.PushQueue      records pushed into live conversations, at once or at the next idle
deadlines.Deadlines the one timer that ends tasks at their deadlines
hosts               which agents run here, and what other apps of a shared store committed
```
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import anyio
import anyio.abc

from wardian import errors
from wardian.app import outcomes
from wardian.app.runtime.approvals import Approvals
from wardian.app.runtime.deadlines import Deadlines
from wardian.app.runtime.deadlocks import Deadlocks
from wardian.app.runtime.dispatch import Dispatcher
from wardian.app.runtime.handle import AgentHandle, Owners
from wardian.app.runtime.hosts import HostScope, OtherHosts, served_host
from wardian.app.runtime.launch import Launcher
from wardian.app.runtime.lost import recover_lost
from wardian.app.runtime.observe import Observer
from wardian.app.runtime.push import PushQueue
from wardian.app.signals import MailboxSignals
from wardian.app.writer import StoreWriter
from wardian.home import Home
from wardian.providers import Provider
from wardian.store import approvals, ledger, mailbox, roster

log = logging.getLogger("wardian.app.runtime")

__all__ = ["AgentHandle", "Runtime"]


class Runtime:
    """The app's provider runtime. With no providers (`providers={}`) it runs nothing: every start is refused, and
    records go to the receive path."""

    def __init__(self, home: Home, writer: StoreWriter, signals: MailboxSignals,
                 providers: Mapping[str, Provider] | None = None) -> None:
        self.home = home
        self.writer = writer
        self.signals = signals
        self.providers: Mapping[str, Provider] = _concrete_providers() if providers is None else providers
        self.owners: Owners = {}
        self.hosts = HostScope()
        self.pushes = PushQueue(writer, signals, self.owners)
        self.dispatcher = Dispatcher(writer, self.pushes)
        self.approvals = Approvals(writer, self.pushes)
        self.launcher = Launcher(home, writer, self.providers, self.owners, self.hosts, self.dispatcher,
                                 Observer(writer, self.pushes, self.approvals))
        self.deadlines = Deadlines(writer, self.owners, self.pushes)
        self.deadlocks = Deadlocks(writer, self.owners)
        self.other_hosts = OtherHosts(writer, signals, self.owners, self.pushes, self.hosts,
                                      self._task_from_another_app, self.interrupt)

    @property
    def host(self) -> str | None:
        """The host this app serves: only its agents are started here."""
        return self.hosts.host

    # --- lifecycle ------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            self.launcher.tg = tg
            self.hosts.host = await self.writer.call(served_host)
            await self.recover()
            # Tasks whose deadline passed while the app was down end now, before any agent starts and takes them.
            await self.deadlines.settle()
            await tg.start(self.deadlines.run)
            await tg.start(self.deadlocks.run)
            task_status.started()
            for agent_id in await self.writer.call(roster.agents_desired_on):
                agent = await self.writer.call(roster.managed_agent, agent_id)
                tg.start_soon(self.launcher.launch_logged, agent)
            await anyio.sleep_forever()

    async def recover(self) -> None:
        """Startup: mark bindings whose observation was lost uncertain, then let their providers settle them from
        their own records (`lost`); publish captured outcomes once."""
        await self.writer.call(roster.reset_observed_state)
        # The processes that asked are gone: their requests take no answer, never one (docs/guide/approvals.md).
        withdrawn = await self.writer.call(approvals.withdraw_pending, None, "restart")
        if withdrawn:
            log.warning("approvals withdrawn after a restart: %s", ", ".join(withdrawn))
        lost = await self.writer.call(ledger.mark_lost_bindings_uncertain, outcomes.RESTART_LOST)
        if lost:
            log.warning("marked %d deliveries uncertain after a restart: %s", len(lost), ", ".join(lost))
        # Before any agent starts (and is dispatched to), each provider settles what its own records show of these
        # (and of any a start that stopped midway left unsettled).
        await recover_lost(self.home, self.writer, self.providers, self.signals.notify)
        pushes = await self.writer.call(mailbox.pushes_interrupted, outcomes.PUSH_INTERRUPTED)
        if pushes:
            log.warning("marked %d pushes uncertain after a restart: %s", len(pushes), ", ".join(pushes))
        for request_id in await self.writer.call(ledger.unpublished_outcomes):
            published = await self.writer.call(ledger.publish_outcome, request_id)
            if published is not None:
                self.signals.notify(published.requester_uuid)

    def _task_from_another_app(self, recipient_uuid: str) -> None:
        """Another app of the shared store admitted a task for an agent of this host: a dispatch opportunity, and
        perhaps an earlier deadline."""
        self.deadlines.changed()
        self.launcher.task_admitted(recipient_uuid)

    # --- agent start/stop ----------------------------------------------------------------------------

    async def stop_agent(self, agent_id: int) -> bool:
        """An explicit off: stop the runtime, and do not start it again for new tasks (until started again)."""
        await self.hosts.check_mine(self.writer, agent_id)
        return await self.launcher.turn_off(agent_id) is not None

    async def forget(self, agent_id: int) -> list[str]:
        """The agent is being removed: stop its runtime, if any, and never start it again (desired off). Returns
        the request ids its ending made uncertain."""
        handle = await self.launcher.turn_off(agent_id)
        return [] if handle is None else list(handle.lost)

    # --- interruption ---------------------------------------------------------------------------------

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


def _concrete_providers() -> Mapping[str, Provider]:
    """The registry of real providers, imported only by an app that runs them (never by importing this module)."""
    # The provider registry imports every provider (their runtimes and wire stacks).
    from wardian.providers.registry import PROVIDERS

    return PROVIDERS
