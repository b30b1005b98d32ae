"""Per-recipient mailbox signals: how a committed record wakes the waits of its recipient.

Subscribe before you look: a waiter registers its event first, then reads durable state, then waits, so a
signal landing between the read and the wait is never lost (DESIGN.md §4 "Wait").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio


class MailboxSignals:
    def __init__(self) -> None:
        self._waiters: dict[int, set[anyio.Event]] = {}

    @contextmanager
    def subscribe(self, agent_id: int) -> Iterator[anyio.Event]:
        event = anyio.Event()
        waiters = self._waiters.setdefault(agent_id, set())
        waiters.add(event)
        try:
            yield event
        finally:
            waiters.discard(event)
            if not waiters:
                self._waiters.pop(agent_id, None)

    def notify(self, agent_id: int) -> None:
        for event in self._waiters.get(agent_id, ()):
            event.set()

    def waiting(self, agent_id: int) -> int:
        return len(self._waiters.get(agent_id, ()))
