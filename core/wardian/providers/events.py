"""A provider runtime's event stream: state changes, turn outcomes and conversation replacements, in the order the
provider observed them, never dropped.

Unbounded on purpose: a turn's outcome that could not be queued would leave its tasks submitted forever. Its one
reader is the app's runtime, which consumes each event as it comes; the stream ends when the provider runtime ends.
An event emitted after that (or after the reader let go) is logged, never raised: whatever was submitted in that
generation is marked uncertain by the app when the runtime ends.
"""

from __future__ import annotations

import logging
import math

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from wardian.providers.base import ProviderEvent

log = logging.getLogger("wardian.providers.events")


class EventStream:
    """`emit` from the provider runtime; `receive` is the `events` the app reads.

    A provider runtime makes one in its constructor (`self.events = stream.receive`) and emits, in the order it
    observes them: `StateChange(IDLE)` once deliveries may begin (or `STARTING` while its conversation is not known
    yet); per turn, `StateChange(ACTIVE, turn_id)` when it starts, then `StateChange(IDLE)` and the turn's
    `TurnOutcome` when it ends; `ConversationReplaced` when it had to start a new conversation; and last, whatever
    ended it, `StateChange(OFF)` followed by `close()`. The app persists each one; OFF ends the agent's runtime.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._send: MemoryObjectSendStream[ProviderEvent]
        self.receive: MemoryObjectReceiveStream[ProviderEvent]
        self._send, self.receive = anyio.create_memory_object_stream[ProviderEvent](math.inf)

    def emit(self, event: ProviderEvent) -> None:
        try:
            self._send.send_nowait(event)  # never WouldBlock: the stream is unbounded
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.warning("%s: an event after the runtime's end was not delivered: %r", self._name, event)

    def close(self) -> None:
        """The runtime ended: the reader sees the end of the stream after the events already emitted."""
        self._send.close()
