"""Task deadlines: the one timer of the app that ends tasks of this host at their deadlines (docs/guide/teams.md).

One task sleeps until the earliest open deadline in the store (`chains.next_deadline`), or until an admission or a
new policy may have brought an earlier one (`changed`); then it ends every task due (`chains.expire_due`): the
requester gets one `failed` notice from Wardian (reason `deadline_exceeded`) and is woken as for any reply, and the
exact turn still running the task, if any, is interrupted. A task still queued is completed, so it is never
delivered. The store holds every deadline, so an app that was down at one settles it when it starts (`settle`,
before any agent is started and dispatched to).

Cost: one indexed read of the earliest deadline per wake; nothing per task sleeps.
"""

from __future__ import annotations

import logging

import anyio
import anyio.abc

from wardian import errors
from wardian.app import outcomes
from wardian.app.runtime.handle import Owners
from wardian.app.runtime.push import PushQueue
from wardian.app.writer import StoreWriter
from wardian.model import now_ms
from wardian.store import chains
from wardian.taskpolicy import Expired

log = logging.getLogger("wardian.app.runtime")

# Longest sleep with no deadline in sight: a bound, so a deadline the timer was not told of (a store changed by hand)
# still ends within it.
MAX_NAP_S = 60.0
# A due task whose submission may be in flight is bound within moments (claim, submit, bind); look again after this.
IN_FLIGHT_RECHECK_S = 0.2
# How long a turn the task was bound to may take to be observed running before the interrupt gives up on it.
TURN_SHOWS_POLL_S = 0.1
TURN_SHOWS_ROUNDS = 50


class Deadlines:
    def __init__(self, writer: StoreWriter, owners: Owners, pushes: PushQueue) -> None:
        self.writer = writer
        self.owners = owners
        self.pushes = pushes
        self._changed = anyio.Event()

    def changed(self) -> None:
        """A task with a deadline was admitted, or the policy changed: the earliest deadline may be earlier now."""
        self._changed.set()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The timer, for as long as the app runs."""
        async with anyio.create_task_group() as tg:
            task_status.started()
            while True:
                self._changed = anyio.Event()  # subscribe before looking, so a change meanwhile is not lost
                try:
                    more, in_flight = await self.settle(tg)
                    if more:
                        continue
                    nearest = await self.writer.call(chains.next_deadline)
                except errors.StorageError as exc:
                    log.error("the deadline timer could not read the store: %s", exc.message)
                    more, in_flight, nearest = False, False, None
                with anyio.move_on_after(_nap(nearest, in_flight)):
                    await self._changed.wait()

    async def settle(self, tg: anyio.abc.TaskGroup | None = None) -> tuple[bool, bool]:
        """End every task due now; its running turns are interrupted in `tg` (None: here, one after another).
        Returns whether a full batch was ended (more may be due) and whether a due task's submission is in flight."""
        ended, in_flight = await self.writer.call(chains.expire_due, outcomes.DEADLINE_NOTICE, self.pushes.can_push)
        for task in ended:
            log.warning("task %s: its deadline passed; ended as failed (deadline_exceeded)%s", task.request_id,
                        f", interrupting turn {task.turn_id}" if task.turn_id else "")
            if task.record_id is not None:
                await self.pushes.deliver(task.requester_uuid, task.record_id, task.pushing)
            if task.turn_id is not None:
                if tg is None:
                    await self._interrupt(task)
                else:
                    tg.start_soon(self._interrupt, task)
        return len(ended) >= chains.MAX_EXPIRED_PER_PASS, in_flight

    async def _interrupt(self, task: Expired) -> None:
        """Interrupt the exact turn that still runs `task`, where its provider can; its other tasks then get the
        interrupted turn's notice, and this one keeps its deadline notice."""
        handle = self.owners.get(task.recipient_uuid)
        if handle is None or handle.generation != task.generation or task.turn_id is None:
            return  # its runtime is gone: the turn ended with it
        runtime = handle.runtime
        # A turn bound a moment ago may not be observed running yet: give it a bounded moment to show.
        for _ in range(TURN_SHOWS_ROUNDS):
            if runtime.active_turn_id == task.turn_id:
                break
            await anyio.sleep(TURN_SHOWS_POLL_S)
        else:
            return  # it ended (or never showed) meanwhile
        if not handle.caps.interrupt:
            log.warning("task %s: agent %s's provider cannot interrupt turn %s; it runs on, and its answer is not "
                        "published", task.request_id, handle.name, task.turn_id)
            return
        try:
            await runtime.interrupt(task.turn_id)
        except errors.WardianError as exc:
            log.warning("task %s: interrupting turn %s of %s failed (%s: %s)", task.request_id, task.turn_id,
                        handle.name, exc.code, exc.message)


def _nap(nearest: int | None, in_flight: bool) -> float:
    """How long the timer may sleep: until the nearest deadline, within bounds."""
    if nearest is None:
        return MAX_NAP_S
    delay = (nearest - now_ms()) / 1000
    if delay <= 0:
        return IN_FLIGHT_RECHECK_S  # due, but left to its binding (or to its turn's own outcome, being published)
    return min(delay, IN_FLIGHT_RECHECK_S if in_flight else MAX_NAP_S)
