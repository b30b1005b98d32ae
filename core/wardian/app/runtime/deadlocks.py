"""The deadlock guard: waits (`mailbox/wait`, the `wait_agent` tool) that no reply can ever end are ended with a
`deadlock` result naming the agents and tasks that hold each other (docs/guide/teams.md, rule WAIT-8 of
docs/design/contract.md).

The waits-for graph: an agent blocked in a wait of this app waits for the agents holding the tasks it assigned and
that are not answered yet. A task is *held* by its recipient when the recipient's model has it and so could answer it:
a receive took it, or it is the task the recipient's running turn started with. A task that is still queued, was
steered into a running turn (the model sees it once its wait returns), is in flight or uncertain is not held: it may
still reach a model that answers it, so its requester may still wake, and the guard leaves it alone.

A waiting agent is deadlocked when every task it waits for is held by a deadlocked agent: the greatest set of blocked
agents closed under that rule (`deadlocked`), empty unless the agents' tasks close a cycle. A chain that ends at an
agent not waiting, or at a task that may still be delivered, is never touched.

When it is checked: as a wait begins to block, once at least one other agent is blocked too. A cycle closes only when
its last agent starts to wait, because every other change either wakes a wait (a record, a reply, an answered task)
or cannot make a task held by an agent that is already blocked (it took its tasks before it waited). The look runs in
the guard's own task (`run`), kicked by the waits, so a wait never waits for it and a burst of waits costs one look.
Cost: nothing while fewer than two agents are blocked; otherwise one indexed read of the blocked agents' open tasks.

Known gap: the guard sees the waits of this app only. On a shared store, a cycle through agents served by apps on
different hosts is not seen, and those waits end at their timeout as before (docs/guide/teams.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import anyio
import anyio.abc

from wardian import errors
from wardian.app.runtime.handle import Owners
from wardian.app.signals import Waiter
from wardian.app.writer import StoreWriter
from wardian.store import chains
from wardian.taskpolicy import Deadlock, OpenTask

log = logging.getLogger("wardian.app.runtime")


class Deadlocks:
    def __init__(self, writer: StoreWriter, owners: Owners) -> None:
        self.writer = writer
        self.owners = owners
        self._blocked: dict[Waiter, int] = {}  # each blocked wait, and its agent's id
        self._kick = anyio.Event()

    @contextmanager
    def blocking(self, agent_id: int, waiter: Waiter) -> Iterator[None]:
        """`waiter` (a wait of agent `agent_id`, subscribed) is blocked until the block ends."""
        self._blocked[waiter] = agent_id
        try:
            yield
        finally:
            del self._blocked[waiter]

    def _waiting(self) -> dict[int, list[Waiter]]:
        """The agents blocked now (a wait neither woken nor abandoned), with their waits."""
        agents: dict[int, list[Waiter]] = {}
        for waiter, agent_id in self._blocked.items():
            if not waiter.event.is_set():
                agents.setdefault(agent_id, []).append(waiter)
        return agents

    def _two_blocked(self) -> bool:
        """Whether at least two agents are blocked: the one question every blocking wait asks, so it stops at the
        second agent rather than grouping every wait (a hundred waits on one mailbox are one agent)."""
        first: int | None = None
        for waiter, agent_id in self._blocked.items():
            if not waiter.event.is_set():
                if first is None:
                    first = agent_id
                elif agent_id != first:
                    return True
        return False

    def blocked(self) -> None:
        """A wait began to block: look for a deadlock soon (the guard's task; the wait does not wait for it)."""
        if self._two_blocked():
            self._kick.set()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The guard, for as long as the app runs: one look per burst of waits that began to block, so a hundred
        agents arming their waits at once cost a few reads, not a hundred."""
        task_status.started()
        while True:
            await self._kick.wait()
            self._kick = anyio.Event()
            await self.check()

    async def check(self) -> None:
        """End every deadlocked wait with its `deadlock` result."""
        if not self._two_blocked():
            return
        try:
            tasks = await self.writer.call(chains.open_tasks_of, tuple(sorted(self._waiting())))
        except errors.StorageError as exc:
            log.error("the deadlock guard could not read the store: %s", exc.message)
            return
        waiting = self._waiting()  # a wait woken during the read has left the graph
        members = deadlocked(waiting, [t for t in tasks if self._held(t)], tasks)
        if not members:
            return
        cycle = tuple(t for t in tasks if t.requester_id in members)
        agents = tuple(sorted({t.requester for t in cycle} | {t.recipient for t in cycle}))
        log.warning("deadlock: %s wait for each other's replies (tasks %s); their waits end with `deadlock`",
                    ", ".join(agents), ", ".join(f"{t.request_id} {t.requester}->{t.recipient}" for t in cycle))
        for agent_id in members:
            found = Deadlock(agents, cycle, tuple(t.request_id for t in cycle if t.recipient_id == agent_id),
                             tuple(t.request_id for t in cycle if t.requester_id == agent_id))
            for waiter in waiting[agent_id]:
                waiter.end_deadlocked(found)

    def _held(self, task: OpenTask) -> bool:
        """Whether the task's recipient's model has it: a receive took it, or its running turn started with it."""
        if task.received:
            return True
        if task.turn_id is None:
            return False
        handle = self.owners.get(task.recipient_uuid)
        return handle is not None and handle.runtime.active_turn_id == task.turn_id


def deadlocked(waiting: Iterable[int], held: list[OpenTask], tasks: list[OpenTask]) -> set[int]:
    """The deadlocked agents among `waiting`: the greatest set whose every member assigned at least one of `tasks`
    and has each of its tasks in `held` by another member (each wait could end only by a reply of a member)."""
    members = {t.requester_id for t in tasks} & set(waiting)
    held_ids = {t.request_id for t in held}
    while True:
        free = {t.requester_id for t in tasks
                if t.requester_id in members and (t.request_id not in held_ids or t.recipient_id not in members)}
        if not free:
            return members
        members -= free
