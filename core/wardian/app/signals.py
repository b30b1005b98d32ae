"""Per-recipient mailbox signals: how a committed record wakes the waits of its recipient.

Subscribe before you look: a waiter registers first, then reads durable state, then waits, so a signal
landing between the read and the wait is never lost (contract rule WAIT-2). A waiter that must read before it can
subscribe (it learns its recipient in the same read) compares `sent` around the gap and reads again when a signal
went out meanwhile: the same guarantee, one store round trip fewer in the common case.

A wait belongs to the control connection that asked for it (`ConnectionWaits`, which app/server.py sets once per
connection in `CONNECTION`): when that connection reaches EOF or is lost, every wait subscribed on it is abandoned at
once (`Waiter.abandoned`), and a later one on it is abandoned as it subscribes, so nobody waits, reads or writes for
a client that has gone (AppService.wait and _receive end without side effects). Outside a connection (the console,
tests) a wait belongs to nobody and is never abandoned.

`ChangeFeed` is the other signal: every store commit that changed something (a record, a task's fact, an agent's
observed state), for live views of the whole home (the web console's Server-Sent Events, docs/guide/console.md).
It carries no detail; a view reads what it shows again after each change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

import anyio

from wardian.model import WaitReason, WakeReason
from wardian.taskpolicy import Deadlock

MAILBOX_ACTIVITY: Final = "mailbox_activity"
PROVIDER_CONTEXT: Final = "provider_context_available"
DEADLOCK: Final = "deadlock"


class Waiter:
    __slots__ = ("abandoned", "deadlock", "event", "reason")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.reason: WaitReason = MAILBOX_ACTIVITY
        self.abandoned = False  # its connection has gone: the wait ends now, reading and writing nothing more
        self.deadlock: Deadlock | None = None  # why the deadlock guard ended it (app/runtime/deadlocks.py)

    def abandon(self) -> None:
        self.abandoned = True
        self.event.set()

    def end_deadlocked(self, found: Deadlock) -> None:
        """The deadlock guard found that no reply can end this wait: it ends now with `found`, unless it woke."""
        if not self.event.is_set():
            self.reason, self.deadlock = DEADLOCK, found
            self.event.set()

    async def wait(self) -> None:
        await self.event.wait()

    async def wait_for(self, timeout_s: float) -> bool:
        """Wait at most `timeout_s`; True when signalled, False when the time ran out.

        A timer sets the event instead of a cancel scope ending the wait: leaving an anyio scope cost ~13 µs per
        woken wait here, a fifth of waking one of 100 waits on one mailbox (`wake_100_waiters_same_recipient`,
        docs/benchmarks.md). The app runs on asyncio (see app/server.py), whose loop owns the timer.
        """
        if self.event.is_set():
            return True
        expired = False

        def expire() -> None:
            nonlocal expired
            if not self.event.is_set():
                expired = True
                self.event.set()

        timer = asyncio.get_running_loop().call_later(timeout_s, expire)
        try:
            await self.event.wait()
        finally:
            timer.cancel()
        return not expired


class ConnectionWaits:
    """The waits of one control connection, abandoned together when it reaches EOF or is lost (on the app's loop).

    `gone` is also read by store operations on the writer's thread, so that a wait whose client has gone consumes
    nothing (a plain attribute: the worst a race costs is one look that was already under way).
    """

    __slots__ = ("gone", "waiters")

    def __init__(self) -> None:
        self.gone = False
        self.waiters: set[Waiter] = set()  # subscribed now (`MailboxSignals.subscribe` keeps it)

    def end(self) -> None:
        """The connection reached EOF or was lost: abandon every wait on it, and any later one as it subscribes."""
        if self.gone:
            return
        self.gone = True
        for waiter in self.waiters:
            waiter.abandon()


# The connection whose request the current task serves (app/server.py sets it once per connection's handler task).
CONNECTION: ContextVar[ConnectionWaits | None] = ContextVar("wardian_connection_waits", default=None)


class MailboxSignals:
    def __init__(self) -> None:
        self._waiters: dict[str, set[Waiter]] = {}
        # How many notifications were sent so far (for any recipient). A wait that looked at durable state before it
        # could subscribe (it had to learn its recipient first) compares this before and after: unchanged, nothing
        # it could have missed was signalled in between; changed, it looks again, subscribed (see AppService.wait).
        self.sent = 0

    @contextmanager
    def subscribe(self, agent_uuid: str) -> Iterator[Waiter]:
        """A wait of `agent_uuid`'s until the block ends; it belongs to the current connection (`CONNECTION`), so it
        is abandoned when that connection has gone, at once if it has gone already."""
        waiter = Waiter()
        connection = CONNECTION.get()
        if connection is not None:
            if connection.gone:
                waiter.abandon()
            connection.waiters.add(waiter)
        waiters = self._waiters.setdefault(agent_uuid, set())
        waiters.add(waiter)
        try:
            yield waiter
        finally:
            waiters.discard(waiter)
            if not waiters:
                self._waiters.pop(agent_uuid, None)
            if connection is not None:
                connection.waiters.discard(waiter)

    def notify(self, agent_uuid: str, reason: WakeReason = MAILBOX_ACTIVITY) -> None:
        """Wake every wait of this recipient. Mailbox activity wins over provider context when both land."""
        self.sent += 1
        for waiter in self._waiters.get(agent_uuid, ()):
            if not waiter.event.is_set() or reason == MAILBOX_ACTIVITY or waiter.reason == DEADLOCK:
                waiter.reason = reason
            waiter.event.set()

    def subscribed(self) -> list[str]:
        """The recipients with a wait subscribed now."""
        return list(self._waiters)

    def waiting(self, agent_uuid: str | None = None) -> int:
        """Waits subscribed now: of one recipient, or of all of them."""
        if agent_uuid is None:
            return sum(len(w) for w in self._waiters.values())
        return len(self._waiters.get(agent_uuid, ()))


class ChangeFeed:
    """A counter of store commits that wrote, and the waits on its next change.

    `changed` runs after every such commit (`StoreWriter.on_commit`): with nobody waiting it is an increment and a
    test, so the write path pays nothing measurable for a console nobody watches. A view remembers the `version` it
    showed and waits for the next one: subscribe-before-look holds, because `next_change` compares versions before it
    waits.
    """

    def __init__(self) -> None:
        self.version = 0
        self._event: anyio.Event | None = None

    def changed(self) -> None:
        self.version += 1
        if self._event is not None:
            self._event.set()
            self._event = None

    def wake_all(self) -> None:
        """Wake every wait without a change (a view is closing)."""
        if self._event is not None:
            self._event.set()
            self._event = None

    async def next_change(self, seen: int) -> int:
        """Return the current version once it differs from `seen` (at once if it already does), or after `wake_all`."""
        if self.version == seen:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()
        return self.version
