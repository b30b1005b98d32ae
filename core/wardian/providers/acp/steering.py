"""Qwen Code's steering queue (docs/guide/acp.md): what waits for the running turn's next tool boundary, where the
agent asks the client for queued messages (`craft/drainMidTurnQueue`), and is handed over in that answer.

Invariant: an item is settled once, handed over or taken back; one taken back (not asked for in time, refused by its
`claim`, or its turn ended first) was certainly not sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

DRAIN = "craft/drainMidTurnQueue"


@dataclass(eq=False)
class Steered:
    """A task or record waiting in the queue: `settled` is set once it was handed over or taken back."""

    text: str
    claim: Callable[[], Awaitable[bool]] | None = None
    """Asked at the drain, before it is handed over: False when it is no longer this runtime's to hand over."""
    handed: bool = False
    settled: anyio.Event = field(default_factory=anyio.Event)


class SteeringQueue:
    def __init__(self) -> None:
        self._queue: list[Steered] = []

    async def hand_over(self, text: str, wait_s: float, claim: Callable[[], Awaitable[bool]] | None = None) -> bool:
        """Queue `text` for the next drain; True once handed over, False when taken back (the turn ended first,
        `wait_s` passed, or `claim` said no): then certainly not sent."""
        steered = Steered(text, claim)
        self._queue.append(steered)
        with anyio.move_on_after(wait_s):
            await steered.settled.wait()
        if not steered.handed and steered in self._queue:
            self._queue.remove(steered)
        return steered.handed

    async def drain(self) -> list[str]:
        """Hand everything queued over (the agent asked at a tool boundary of the running turn); an item its claim
        refuses (a record a receive took first) is dropped."""
        queued, self._queue = self._queue, []
        handed: list[str] = []
        for steered in queued:
            steered.handed = steered.claim is None or await steered.claim()
            steered.settled.set()
            if steered.handed:
                handed.append(steered.text)
        return handed

    def take_back(self) -> None:
        """The turn ended: nothing queued was handed over."""
        for steered in self._queue:
            steered.settled.set()
        self._queue = []
