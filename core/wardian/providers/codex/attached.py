"""Attached mode: the threads a person's Codex TUI starts on the app-owned app-server, which the runtime follows.

The TUI's thread is the latest non-ephemeral, user-started thread: the app-server announces every thread it starts
(`thread/started`) with its source. The runtime adopts each in turn (first attach, or /new), never under a running
turn.
"""

from __future__ import annotations

from contextlib import suppress

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from wardian.providers.codex import messages as m


class TuiThreads:
    """The TUI's threads, in the order announced; `receive` is read by the runtime's follower."""

    def __init__(self) -> None:
        self._send: MemoryObjectSendStream[str]
        self.receive: MemoryObjectReceiveStream[str]
        self._send, self.receive = anyio.create_memory_object_stream[str](100)

    def announced(self, thread: m.Thread) -> None:
        """A thread the app-server started: queued to be followed when it is a TUI's own."""
        if thread.ephemeral is False and thread.thread_source == "user":
            with suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._send.send_nowait(thread.id)

    def close(self) -> None:
        self._send.close()
        self.receive.close()
