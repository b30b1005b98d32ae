"""One accepted control connection on an asyncio transport: it splits the byte stream into frames for its handler
(`ControlServer._serve`), holds back a client that sends without reading, and tells its server how long it has been
idle.

Invariants:
- Reading pauses while too many frames of the connection wait, and its handler waits while the client does not read
  its answers, so no connection makes the app buffer without bound.
- EOF and the connection's loss end the waits in flight on it (`waits`, app/server.py).
- A connection that waits `listen.CONTROL_IDLE_S` for a request is closed by shutting its reading side
  (`close_idle`): a request already in the socket is still read and answered, and the client's next write fails
  before a byte of it leaves, so `AppClient` sends it on a new connection and nothing is ever uncertain for it. A
  wait in flight, or a frame still arriving, is never cut.

Why asyncio here (everywhere else the code is anyio only; decided by measurement, docs/benchmarks.md): anyio's Unix
socket stream adds a checkpoint to every receive and send and registers and removes an epoll reader for every receive
that waits. The per-connection handler tasks stay anyio's (`ControlServer.serve`'s task group owns them, so shutdown
cancels them); after the uid check the accepted socket moves to an asyncio transport whose BufferedProtocol reads into
one reused buffer. Side by side on this 2-core VM, together with the store-writer change,
the app's round trip p50 went 0.50 -> 0.28 ms (agent/list) and 0.69 -> 0.45 ms (mailbox/wait) on a loaded host; earlier
measurements here put anyio streams at about half the throughput of asyncio streams at 8-32 clients, and
asyncio.Protocol at the floor.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import deque
from contextlib import suppress

from wardian.app.signals import ConnectionWaits
from wardian.model import MAX_REQUEST_FRAME_BYTES

# Reading from a connection pauses while this much of its frames wait to be served, and resumes below half.
_PAUSE_BYTES = 2 * MAX_REQUEST_FRAME_BYTES
_RESUME_BYTES = MAX_REQUEST_FRAME_BYTES
_READ_BYTES = 65536


class Connection(asyncio.BufferedProtocol):
    """One accepted connection on an asyncio transport: splits the byte stream into frames for its handler.

    The handler task (`ControlServer._serve`) takes frames one at a time and writes one answer per request;
    this side only buffers. Reading pauses while more than `_PAUSE_BYTES` of frames wait, and the handler
    waits while the transport's write buffer is over its high-water mark, so neither a client that sends
    without reading nor one that stops reading makes the app buffer without bound. EOF and the connection's
    loss end the waits in flight on it (`waits`).
    """

    def __init__(self, sock: socket.socket | None) -> None:
        self.sock = sock  # None for a Windows named pipe, whose transport alone reaches it
        self.transport: asyncio.Transport | None = None
        self._read_buffer = memoryview(bytearray(_READ_BYTES))
        self._frames: deque[bytes | None] = deque()  # None stands for a refused oversize frame
        self._queued = 0
        self._partial = bytearray()
        self._discarding = False
        self._eof = False
        self.lost = False
        self._reading_paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self.waits = ConnectionWaits()
        self._since = time.monotonic()  # accepted, then: the handler began waiting for a frame (`idle_since`)
        self.started = False  # its handler serves it
        self._partial_seen = 0
        self.retired = False  # closed for idleness: its reading side is shut

    # --- asyncio.Protocol -------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        # One buffer per connection, reused for every read: a plain Protocol gets a fresh 256 KiB bytes per
        # read, which glibc serves with mmap/munmap, ~40 µs of a request's cost here (cProfile of the benchmarks).
        return self._read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        self._frames_from(self._read_buffer[:nbytes].tobytes())

    def _frames_from(self, data: bytes) -> None:
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            if self._discarding:
                self._discarding = False  # the rest of a refused frame, up to its newline
            elif self._partial:
                self._partial += data[start:nl]
                self._push(bytes(self._partial))
                self._partial.clear()
            else:
                self._push(data[start:nl])
            start = nl + 1
        if not self._discarding and start < len(data):
            self._partial += data[start:]
            if len(self._partial) > MAX_REQUEST_FRAME_BYTES:
                self._partial.clear()
                self._discarding = True
                self._frames.append(None)
        self._wake()
        if self._queued > _PAUSE_BYTES and not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._eof = True  # the client half-closed: its last requests are still answered; its waits end now
        if not self.retired:  # the app shut reading: the client is still there, and reads what a raced request gets
            self.waits.end()
        self._wake()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.waits.end()
        self._wake()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        if self._drained is None or self._drained.done():
            self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # --- the handler's side -----------------------------------------------------------------------------

    def _push(self, frame: bytes) -> None:
        if len(frame) > MAX_REQUEST_FRAME_BYTES:
            self._frames.append(None)  # completed in the read that crossed the cap: refused all the same
        else:
            self._frames.append(frame)
            self._queued += len(frame)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def next_frame(self) -> bytes | None:
        """The next frame, `None` for a refused oversize frame.

        Raises:
            EOFError: the client closed its side (or went away) and every frame it sent was taken.
        """
        if not self._frames:
            self._since = time.monotonic()
        while not self._frames:
            if self._eof or self.lost:
                raise EOFError
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        frame = self._frames.popleft()
        if frame is not None:
            self._queued -= len(frame)
            if self._reading_paused and self._queued <= _RESUME_BYTES and self.transport is not None:
                self._reading_paused = False
                self.transport.resume_reading()
        return frame

    def idle_since(self) -> float | None:
        """Since when the handler has waited for a frame (or the connection was accepted, until its handler starts);
        None while it serves one (`listen.Tracked`)."""
        return self._since if self._waiter is not None or not self.started else None

    def close_idle(self) -> bool:
        """Shut the reading side unless a frame has begun to arrive (`listen.Tracked`): bytes wait in the socket, or
        part of a frame grew since the last look. A request already in the socket is still read and answered."""
        if self.retired or self.lost:
            return True
        grew, self._partial_seen = len(self._partial) != self._partial_seen, len(self._partial)
        if self.sock is None:
            return self._close_idle_pipe(grew)
        try:
            if grew or self._frames or self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                return False
        except BlockingIOError:
            pass  # nothing waiting in the socket
        except OSError:
            return True  # broken: the transport sees it and ends the handler
        self.retired = True
        with suppress(OSError):
            self.sock.shutdown(socket.SHUT_RD)
        return True

    def _close_idle_pipe(self, grew: bool) -> bool:
        """`close_idle` for a named pipe, which has no reading side to shut: the transport's read is always pending,
        so what the client sent is in `_partial` or `_frames` already. Known gap: a request that reaches the pipe
        between this look and the close is lost, and its client reports it uncertain (a socket's shut reading side
        leaves it in the socket instead)."""
        if grew or self._frames:
            return False
        self.retired = True
        if self.transport is not None:
            self.transport.close()
        return True

    async def write(self, data: bytes) -> None:
        """Queue an answer; wait while the client is not reading what was already written."""
        if self.transport is None or self.lost or self.transport.is_closing():
            return
        self.transport.write(data)
        if self._drained is not None and not self._drained.done():
            await self._drained
