"""What a provider runtime observes of its conversation, kept and reported one way for every provider: the
conversation (`thread_id`), whether deliveries may begin (`ready`), the exact active turn, the lock a submission
holds, and the events that report each change, in order (`wardian.providers.events`).

A runtime is one of these (it inherits `TurnState`: these members are the observed half of the `ProviderRuntime`
Protocol it implements) and says, as its provider's wire shows them: `became_ready` once deliveries may begin (again
whenever its conversation changes: Codex's conversation, which the runtime holds, is handed the runtime to say so),
`activate(turn_id)` when a turn starts, `deactivate()` when it ends (then emits the turn's `TurnOutcome`),
`stopping()` when it begins to stop (if deliveries must end before its process does), and `ended()` last,
whatever ended it. Which turn is which, and what a turn's end means, stay the provider's own.

Invariants: the active turn is a turn of `thread_id` (a change of conversation leaves none active); `wait_idle`
returns once no turn is active, however often a turn's start is reported; `ended` emits OFF last and closes the
stream.
"""

from __future__ import annotations

from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from wardian.model import AgentStatus
from wardian.providers.base import ProviderEvent, StateChange
from wardian.providers.events import EventStream


class TurnState:
    """The observed state of one runtime's conversation (module docstring). `name` names the runtime in logs
    (`claude:<agent>`)."""

    thread_id: str | None
    active_turn_id: str | None
    """The exact turn observed active, or None when idle."""
    ready: bool
    """The conversation is ready for deliveries."""
    submit_lock: anyio.Lock
    events: MemoryObjectReceiveStream[ProviderEvent]

    def __init__(self, name: str, thread_id: str | None = None) -> None:
        self.thread_id = thread_id
        self.active_turn_id = None
        self.ready = False
        self.submit_lock = anyio.Lock(fast_acquire=True)  # uncontended: no yield between claim and write
        self._stream = EventStream(name)
        self.events = self._stream.receive
        self._idle = anyio.Event()

    def emit(self, event: ProviderEvent) -> None:
        """Report an event (a turn's outcome, a replaced conversation) in the order observed."""
        self._stream.emit(event)

    def became_ready(self, thread_id: str | None) -> None:
        """Deliveries may begin, into `thread_id`: the runtime is ready and idle. A conversation other than the one
        observed so far (a replacement, or one a person opened) has no turn active: a turn of the one left is no
        longer observed, so it cannot be seen to end here."""
        if thread_id != self.thread_id:
            self.active_turn_id = None
        self.thread_id = thread_id
        self.ready = True
        self._idle.set()
        self.emit(StateChange(AgentStatus.IDLE, None, thread_id))

    def activate(self, turn_id: str) -> None:
        """The turn `turn_id` started."""
        self.active_turn_id = turn_id
        if self._idle.is_set():  # a start seen twice (an answer, then a notification) keeps whoever waits waiting
            self._idle = anyio.Event()
        self.emit(StateChange(AgentStatus.ACTIVE, turn_id, self.thread_id))

    def deactivate(self) -> None:
        """The active turn ended (its outcome is emitted next)."""
        self.active_turn_id = None
        self._idle.set()
        self.emit(StateChange(AgentStatus.IDLE, None, self.thread_id))

    def stopping(self) -> None:
        """The runtime is ending: no delivery may begin, and no turn counts as active any more."""
        self.ready = False
        self.active_turn_id = None

    async def wait_idle(self) -> None:
        """Return once no turn is observed active."""
        await self._idle.wait()

    def ended(self) -> None:
        """The runtime ended: no turn runs, the stream says OFF, then ends."""
        self.stopping()
        self._idle.set()
        self.emit(StateChange(AgentStatus.OFF, None, self.thread_id))
        self._stream.close()


def single_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The one error a runtime's task group raised, unwrapped (the app reads a provider's start failure as a plain
    error, whichever provider's runtime raised it)."""
    while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
        group = group.exceptions[0]  # type: ignore[assignment]
    return group
