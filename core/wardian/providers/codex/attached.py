"""Attached mode: the threads a person's Codex TUI starts on the app-owned app-server, which the runtime follows, and
what this connection saw of the thread while it was not yet subscribed to it.

The TUI's thread is the latest non-ephemeral, user-started thread: the app-server announces every thread it starts
(`thread/started`) with its source. The runtime adopts each in turn (first attach, or /new), never under a running
turn.

A TUI's brand-new thread cannot be resumed before its first turn has written a rollout, so the runtime's first
`turn/start` on it goes out unsubscribed, and it subscribes (`thread/resume`) right after. The resume's answer lists
the turn, but Codex lists every unterminated turn as `interrupted` whenever its live state shows no running turn:
also in the moment after it accepted the turn/start and recorded the turn's start, before its live state took the
turn up. So only a `completed` listing proves the end by itself. Any other listed end is believed only when this
connection saw the thread's status go active and then leave active since the turn/start was sent: Codex sends
every connection `thread/status/changed`, subscribed or not, and the reader sees those in wire order, before the
resume's answer (`saw` runs in the reader, `AppServerClient(tap=...)`). And even then a listed end other than
`completed` may be stale: the listing can lag the idle status, so it is re-read until it says `completed`, bounded
(`threads.settled_end`). docs/providers/codex.md#attached-terminals
has the facts.
"""

from __future__ import annotations

from contextlib import suppress

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from wardian.providers.codex import messages as m
from wardian.providers.codex.app_server import Notification


class TuiThreads:
    """The TUI's threads, in the order announced; `receive` is read by the runtime's follower."""

    def __init__(self) -> None:
        self._send: MemoryObjectSendStream[str]
        self.receive: MemoryObjectReceiveStream[str]
        self._send, self.receive = anyio.create_memory_object_stream[str](100)
        self._watched: str | None = None  # the thread a turn/start was last sent on
        self._ran = False  # since then, its status was seen active ...
        self._stopped = False  # ... and then no longer active

    def announced(self, thread: m.Thread) -> None:
        """A thread the app-server started: queued to be followed when it is a TUI's own."""
        if thread.ephemeral is False and thread.thread_source == "user":
            with suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._send.send_nowait(thread.id)

    def turn_sent(self, thread_id: str | None) -> None:
        """A turn/start is about to be written on `thread_id`: watch its status from now on."""
        self._watched, self._ran, self._stopped = thread_id, False, False

    def saw(self, note: Notification) -> None:
        """Every notification, in wire order (the client's reader calls it; it never blocks)."""
        if note.method != "thread/status/changed" or note.params.get("threadId") != self._watched:
            return
        status = note.params.get("status")
        if isinstance(status, dict) and status.get("type") == "active":
            self._ran = True
        elif self._ran:
            self._stopped = True

    def ran_and_stopped(self, thread_id: str | None) -> bool:
        """Whether `thread_id` was seen to go active, then leave active, since the last turn/start on it."""
        return thread_id is not None and thread_id == self._watched and self._stopped

    def close(self) -> None:
        self._send.close()
        self.receive.close()
