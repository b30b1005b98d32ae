"""Per-recipient mailbox signals: how a committed record wakes the waits of its recipient.

Subscribe before you look: a waiter registers first, then reads durable state, then waits, so a signal
landing between the read and the wait is never lost (DESIGN.md §4 "Wait").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import anyio

from wardian.model import WakeReason

MAILBOX_ACTIVITY: Final = "mailbox_activity"
PROVIDER_CONTEXT: Final = "provider_context_available"


class Waiter:
    __slots__ = ("event", "reason")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.reason: WakeReason = MAILBOX_ACTIVITY

    async def wait(self) -> None:
        await self.event.wait()


class MailboxSignals:
    def __init__(self) -> None:
        self._waiters: dict[str, set[Waiter]] = {}

    @contextmanager
    def subscribe(self, agent_uuid: str) -> Iterator[Waiter]:
        waiter = Waiter()
        waiters = self._waiters.setdefault(agent_uuid, set())
        waiters.add(waiter)
        try:
            yield waiter
        finally:
            waiters.discard(waiter)
            if not waiters:
                self._waiters.pop(agent_uuid, None)

    def notify(self, agent_uuid: str, reason: WakeReason = MAILBOX_ACTIVITY) -> None:
        """Wake every wait of this recipient. Mailbox activity wins over provider context when both land."""
        for waiter in self._waiters.get(agent_uuid, ()):
            if not waiter.event.is_set() or reason == MAILBOX_ACTIVITY:
                waiter.reason = reason
            waiter.event.set()

    def waiting(self, agent_uuid: str) -> int:
        return len(self._waiters.get(agent_uuid, ()))
