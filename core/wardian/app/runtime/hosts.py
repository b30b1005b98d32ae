"""Several machines on one shared store: which agents this app runs (`HostScope`), and what it does with what the
apps of other hosts committed (`OtherHosts`).

An agent belongs to the host whose app first ran it; only that app starts, stops, dispatches to, pushes into or
interrupts its runtime. Another app's commit reaches this one as a store announcement: a task for one of this
host's agents is a dispatch opportunity, a record is pushed when its recipient's runtime can take it, an interrupt
is carried out, and every record wakes the waits on its recipient (they may run here whatever the agent's host).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from wardian import errors
from wardian.app.runtime.handle import Owners
from wardian.app.runtime.push import PushQueue
from wardian.app.signals import MailboxSignals
from wardian.app.writer import StoreWriter
from wardian.store import Store, mailbox, roster
from wardian.store.api import InterruptAnnounced, RecordAnnounced, Resynced, StoreEvent

log = logging.getLogger("wardian.app.runtime")


def served_host(store: Store) -> str | None:
    """The host the store serves: the one the app claimed when it started (None: a store no app claimed yet)."""
    return store.host


class HostScope:
    """The host this app serves (read from the store when the runtime starts)."""

    def __init__(self) -> None:
        self.host: str | None = None

    def is_mine(self, host: str | None) -> bool:
        """Whether an agent of `host` runs here (an agent no app has claimed yet counts as everyone's)."""
        return host is None or self.host is None or host == self.host

    async def check_mine(self, writer: StoreWriter, agent_id: int) -> None:
        """Raises: Unsupported (the agent belongs to another host, whose app alone runs it)."""
        agent = await writer.call(roster.agent, agent_id)
        if not self.is_mine(agent.host):
            raise errors.Unsupported(
                f"agent {agent.name!r} belongs to host {agent.host!r}; this app serves host {self.host!r}: start, "
                "stop or attach it from the app on that host",
                field="agent",
                host=agent.host,
            )


class OtherHosts:
    """Acts on the commits of other apps sharing the store, for this host's agents."""

    def __init__(self, writer: StoreWriter, signals: MailboxSignals, owners: Owners, pushes: PushQueue,
                 scope: HostScope, task_admitted: Callable[[str], None],
                 interrupt: Callable[[str, str], Awaitable[None]]) -> None:
        self.writer = writer
        self.signals = signals
        self.owners = owners
        self.pushes = pushes
        self.scope = scope
        self._task_admitted = task_admitted
        self._interrupt = interrupt

    async def announced(self, event: StoreEvent) -> None:
        """Act on another app's commit: wake waits, dispatch, push or interrupt for this host's agents."""
        mine = self.scope.is_mine
        if isinstance(event, Resynced):
            await self._resync()
        elif isinstance(event, RecordAnnounced):
            if event.kind == "task":
                if mine(event.host):
                    self._task_admitted(event.recipient)
                self.signals.notify(event.recipient)
            elif not (mine(event.host) and await self.pushes.announced(event.recipient, event.public_id)):
                self.signals.notify(event.recipient)  # on the receive path: wake its waits (they may run here)
        elif isinstance(event, InterruptAnnounced) and mine(event.host) and event.target in self.owners:
            await self._interrupt_announced(event)

    async def _interrupt_announced(self, event: InterruptAnnounced) -> None:
        try:
            await self._interrupt(event.target, event.turn_id)
            log.info("interrupt #%d of turn %s (asked on another host) done", event.interrupt_id, event.turn_id)
        except errors.WardianError as exc:
            log.warning(
                "interrupt #%d of turn %s (asked on another host) not done: %s: %s",
                event.interrupt_id,
                event.turn_id,
                exc.code,
                exc.message,
            )

    async def _resync(self) -> None:
        """Announcements may have been lost: every dispatcher looks again, and every wait of this app reads again
        whether its mailbox has something (subscribe, then check)."""
        for handle in list(self.owners.values()):
            handle.kick.set()
        for uuid in self.signals.subscribed():
            found = await self.writer.call(roster.find_agents, uuid)
            if found and await self.writer.call(mailbox.has_unacked, found[0].id):
                self.signals.notify(uuid)
