"""The control socket: NDJSON JSON-RPC 2.0 over a Unix socket (a named pipe on Windows: app/_windows.py), one request
at a time per connection.

Invariants:
- The peer's uid is checked (`wardian.peercred`: SO_PEERCRED, LOCAL_PEERCRED; on Windows the client process's user
  SID) before a single byte is read; another uid is logged and dropped.
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
- No connection makes the app buffer without bound, and none is kept open by a silent client: see
  app/connection.py. Connections are capped (app/listen.py); at the cap with every connection busy, a new one gets
  one `app_busy` error line and is closed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import orjson

from wardian import errors, peercred
from wardian.app.connection import Connection
from wardian.app.listen import CONTROL_IDLE_S, MAX_CONTROL_CONNECTIONS, Connections, accept_forever, connection_cap
from wardian.app.service import AppService
from wardian.app.signals import CONNECTION
from wardian.faults import crashpoint
from wardian.model import MAX_REQUEST_FRAME_BYTES
from wardian.protocol import jsonrpc

if sys.platform == "win32" or TYPE_CHECKING:
    from wardian.app import _windows

log = logging.getLogger("wardian.app.server")
audit = logging.getLogger("wardian.audit")


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


class ControlServer:
    def __init__(self, service: AppService) -> None:
        self.service = service
        self.connections: Connections[Connection] = Connections(
            connection_cap(MAX_CONTROL_CONNECTIONS), CONTROL_IDLE_S, "the control socket")

    async def serve(self, sock: socket.socket, *,
                    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Accept connections on the listening socket `sock` and serve them until cancelled; their handlers run in
        this task group, so cancelling it ends them all.

        Raises:
            OSError: accepting failed otherwise than for a shortage of descriptors or memory (app/listen.py).
        """
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.connections.sweep)

            async def admit(accepted: socket.socket) -> None:
                conn = self._admit(accepted)
                if isinstance(conn, Connection):
                    tg.start_soon(self.handle_connection, conn)
                elif conn is not None:
                    tg.start_soon(self.connections.refuse, accepted, conn)

            task_status.started()
            await accept_forever(sock, admit, self.connections.make_room, "the control socket")

    async def serve_pipe(self, listener: _windows.PipeListener, *,
                         task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Windows: `serve` for the control pipe of `listener`, whose clients it checked before they reach here.

        Raises:
            OSError: a new pipe instance could not be made.
        """
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.connections.sweep)

            async def admit(pipe: Any) -> None:
                conn = Connection(None)
                if not self.connections.admit(conn):
                    _windows.attach(pipe, conn)
                    busy = errors.AppBusy(
                        f"the app holds its cap of {self.connections.cap} control connections, each with a request "
                        "in flight, and read nothing of this one; call again once some have ended", field="home")
                    await conn.write(encode_frame({"jsonrpc": "2.0", "id": None, "error": jsonrpc.error_object(busy)}))
                    if conn.transport is not None:
                        conn.transport.close()  # after the answer is flushed
                    return
                tg.start_soon(self.handle_connection, conn, lambda c: _windows.attach(pipe, c))

            task_status.started()
            await listener.accept_forever(admit)

    def _admit(self, sock: socket.socket) -> Connection | bytes | None:
        """Check the peer before reading a byte, then count the connection in; else the answer that refuses it, or
        None for a peer that is dropped unanswered."""
        uid = peer_uid(sock)
        if uid is not None and uid != os.geteuid():
            audit.warning("rejected a control connection from uid %d before reading it", uid)
            sock.close()
            return None
        conn = Connection(sock)
        if not self.connections.admit(conn):
            busy = errors.AppBusy(
                f"the app holds its cap of {self.connections.cap} control connections, each with a request in "
                "flight, and read nothing of this one; call again once some have ended", field="home")
            return encode_frame({"jsonrpc": "2.0", "id": None, "error": jsonrpc.error_object(busy)})
        return conn

    async def handle_connection(self, conn: Connection,
                                attach: Callable[[Connection], asyncio.BaseTransport] | None = None) -> None:
        """Serve one admitted connection on an asyncio transport until it ends (`attach` makes a pipe's transport on
        Windows; a socket's is asyncio's own)."""
        loop = asyncio.get_running_loop()
        try:
            if attach is not None:
                transport = attach(conn)
            else:
                assert conn.sock is not None
                transport, _ = await loop.connect_accepted_socket(lambda: conn, conn.sock)
        except BaseException:
            self.connections.discard(conn)
            if conn.sock is not None:
                conn.sock.close()
            raise
        token = CONNECTION.set(conn.waits)  # this task's own context: the waits it serves are this connection's
        conn.started = True
        try:
            await self._serve(conn)
        finally:
            CONNECTION.reset(token)
            self.connections.discard(conn)
            transport.close()  # after the answers already written have been flushed

    async def _serve(self, conn: Connection) -> None:
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
