"""The control socket: NDJSON JSON-RPC 2.0 over a Unix socket, one request at a time per connection.

Invariants:
- The peer's uid is checked (SO_PEERCRED) before a single byte is read; another uid is logged and dropped.
- A frame is one line of at most MAX_REQUEST_FRAME_BYTES; a longer one gets an INVALID_REQUEST error, the
  rest of it is discarded up to its newline, and the connection goes on.
- Every request gets exactly one response line while its connection can carry one (the answers due on a lost
  connection are dropped); notifications (no `id`) get none.
- A client that goes away never cancels an operation already handed to the store.
- Waits are the exception (`mailbox/wait`, `mailbox/receive` and `operator/receive` with a timeout): they hand the
  store nothing while they wait. When a connection reaches EOF or is lost, every wait in flight on it ends at once,
  as if its time ran out, and unsubscribes; it reads and writes nothing more (it takes no provider context and
  acknowledges nothing it had not yet), and a wait that starts on it later ends the same way at once (a
  half-closed client still gets that answer). So a client that gives up on a wait (the MCP server aborting a
  cancelled one, an interrupted CLI) frees it in the app at once. The connection's handler task holds its
  `signals.ConnectionWaits` in `signals.CONNECTION`, set once per connection: requests pay nothing for it.
- Reading pauses while too many frames of one connection wait, and its handler waits while the client does
  not read its answers, so no connection makes the app buffer without bound.

Why asyncio here (everywhere else the code is anyio only; decided by measurement, docs/benchmarks.md): anyio's Unix
socket stream adds a checkpoint to every receive and send and registers and removes an epoll reader for every receive
that waits. The listener and the per-connection handler task stay anyio's (the listener's task group owns them, so
shutdown cancels them as before); after the uid check the accepted socket moves to an asyncio transport whose
BufferedProtocol reads into one reused buffer. Side by side on this 2-core VM, together with the store-writer change,
the app's round trip p50 went 0.50 -> 0.28 ms (agent/list) and 0.69 -> 0.45 ms (mailbox/wait) on a loaded host; earlier
measurements here put anyio streams at about half the throughput of asyncio streams at 8-32 clients, and
asyncio.Protocol at the floor.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from collections import deque
from typing import Any

import anyio
import anyio.abc
import orjson
from anyio.abc import SocketAttribute

from wardian import errors, peercred
from wardian.app.service import AppService
from wardian.app.signals import CONNECTION, ConnectionWaits
from wardian.faults import crashpoint
from wardian.model import MAX_REQUEST_FRAME_BYTES
from wardian.protocol import jsonrpc

log = logging.getLogger("wardian.app.server")
audit = logging.getLogger("wardian.audit")

# Reading from a connection pauses while this much of its frames wait to be served, and resumes below half.
_PAUSE_BYTES = 2 * MAX_REQUEST_FRAME_BYTES
_RESUME_BYTES = MAX_REQUEST_FRAME_BYTES
_READ_BYTES = 65536


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end, or None where the platform cannot tell (`wardian.peercred`: Linux,
    macOS and FreeBSD tell; elsewhere the 0700 run/ directory alone guards)."""
    return peercred.peer_uid(sock)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_frame(line: bytes) -> Any:
    """Parse one frame strictly: UTF-8 JSON without NaN/Infinity.

    A lone surrogate escape is still valid JSON; orjson refuses it, so such frames are parsed again by the
    standard library and left for the validators to reject as `invalid_text`.

    Raises:
        ValueError: not JSON.
    """
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    text = line.decode("utf-8")  # raises UnicodeDecodeError (a ValueError) on invalid UTF-8
    if text.startswith("\ufeff"):
        raise ValueError("a byte order mark is not allowed")
    return json.loads(text, parse_constant=_reject_constant)


def encode_frame(message: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(message) + b"\n"
    except TypeError:
        # Text the caller sent with a lone surrogate is never stored, but may be echoed in an error.
        return json.dumps(message, ensure_ascii=True).encode("ascii") + b"\n"


def _error(id_: Any, code: int, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": err}


class _Connection(asyncio.BufferedProtocol):
    """One accepted connection on an asyncio transport: splits the byte stream into frames for its handler.

    The handler task (`ControlServer._serve`) takes frames one at a time and writes one answer per request;
    this side only buffers. Reading pauses while more than `_PAUSE_BYTES` of frames wait, and the handler
    waits while the transport's write buffer is over its high-water mark, so neither a client that sends
    without reading nor one that stops reading makes the app buffer without bound. EOF and the connection's
    loss end the waits in flight on it (`waits`).
    """

    def __init__(self) -> None:
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

    async def write(self, data: bytes) -> None:
        """Queue an answer; wait while the client is not reading what was already written."""
        if self.transport is None or self.lost or self.transport.is_closing():
            return
        self.transport.write(data)
        if self._drained is not None and not self._drained.done():
            await self._drained


class ControlServer:
    def __init__(self, service: AppService) -> None:
        self.service = service
        self.connections = 0

    async def handle_connection(self, stream: anyio.abc.SocketStream) -> None:
        """Serve one accepted connection: check the peer, then hand the socket to an asyncio transport."""
        async with stream:
            raw = stream.extra(SocketAttribute.raw_socket)
            uid = peer_uid(raw)
            if uid is not None and uid != os.geteuid():
                audit.warning("rejected a control connection from uid %d before reading it", uid)
                return
            # The socket leaves anyio's stream (which never read from it) for a transport; this task, owned
            # by the listener's task group, stays the connection's handler, so shutdown still cancels it.
            sock = socket.socket(fileno=raw.detach())
            loop = asyncio.get_running_loop()
            transport, conn = await loop.connect_accepted_socket(_Connection, sock)
            self.connections += 1
            token = CONNECTION.set(conn.waits)  # this task's own context: the waits it serves are this connection's
            try:
                await self._serve(conn)
            finally:
                CONNECTION.reset(token)
                self.connections -= 1
                transport.close()  # after the answers already written have been flushed

    async def _serve(self, conn: _Connection) -> None:
        while True:
            try:
                frame = await conn.next_frame()
            except EOFError:
                return
            if frame is None:
                response: bytes | None = encode_frame(_error(
                    None, jsonrpc.INVALID_REQUEST,
                    f"frame exceeds {MAX_REQUEST_FRAME_BYTES} bytes; it is discarded up to its newline"))
            else:
                response = await self.handle_line(frame)
            if response is not None:
                await conn.write(response)
                crashpoint("after_reply_write")
            if self.service.stop_requested:
                self.service.stop()
                return
            if conn.lost:
                return  # nobody reads the answers to whatever else it sent

    async def handle_line(self, line: bytes) -> bytes | None:
        """One request frame in, one response frame out (None for notifications and blank lines)."""
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            return None
        try:
            msg = decode_frame(line)
        except (ValueError, RecursionError):
            return encode_frame(_error(None, jsonrpc.PARSE_ERROR, "parse error: the frame is not UTF-8 JSON"))
        if not isinstance(msg, dict):
            return encode_frame(_error(None, jsonrpc.INVALID_REQUEST, "a request must be a JSON object"))
        id_ = msg.get("id")
        valid_id = id_ is None or (isinstance(id_, (str, int)) and not isinstance(id_, bool))
        if msg.get("jsonrpc") != "2.0" or not isinstance(msg.get("method"), str) or not valid_id:
            return encode_frame(_error(id_ if valid_id else None, jsonrpc.INVALID_REQUEST,
                                       "not a JSON-RPC 2.0 request (jsonrpc, method and id are required)"))
        if "id" not in msg:
            return None  # a notification: the app defines none, and answers none
        method: str = msg["method"]
        crashpoint("before_begin")
        try:
            result = await self.service.handle(method, msg.get("params"))
        except errors.MethodNotFound as exc:
            return encode_frame(_error(id_, jsonrpc.METHOD_NOT_FOUND, exc.message, exc.to_data()))
        except errors.WardianError as exc:
            log.info("%s -> %s", method, exc.code)
            return encode_frame({"jsonrpc": "2.0", "id": id_, "error": jsonrpc.error_object(exc)})
        except Exception:
            log.exception("internal error in %s", method)
            exc2 = errors.InternalError("internal error; see the app log")
            return encode_frame({"jsonrpc": "2.0", "id": id_, "error": jsonrpc.error_object(exc2)})
        crashpoint("after_commit_before_reply_write")
        return encode_frame({"jsonrpc": "2.0", "id": id_, "result": result})
