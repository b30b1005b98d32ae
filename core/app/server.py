"""The control socket: NDJSON JSON-RPC 2.0 over a Unix socket, one request at a time per connection.

Invariants:
- The peer's uid is checked (SO_PEERCRED) before a single byte is read; another uid is logged and dropped.
- A frame is one line of at most MAX_REQUEST_FRAME_BYTES; a longer one gets an INVALID_REQUEST error, the
  rest of it is discarded up to its newline, and the connection goes on.
- Every request gets exactly one response line; notifications (no `id`) get none.
- A client that goes away never cancels an operation already handed to the store.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
from typing import Any

import anyio
import anyio.abc
import orjson
from anyio.abc import SocketAttribute

from wardian import errors
from wardian.app.service import AppService
from wardian.faults import crashpoint
from wardian.model import MAX_REQUEST_FRAME_BYTES
from wardian.protocol import jsonrpc

log = logging.getLogger("wardian.app.server")
audit = logging.getLogger("wardian.audit")

_CHUNK = 65536


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end, or None where the platform cannot tell."""
    if hasattr(socket, "SO_PEERCRED"):
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", raw)
        return int(uid)
    return None  # Known gap: macOS getpeereid is not wired up; the 0700 run/ directory still guards.


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
        self.connections = 0

    async def handle_connection(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            raw = stream.extra(SocketAttribute.raw_socket)
            uid = peer_uid(raw)
            if uid is not None and uid != os.geteuid():
                audit.warning("rejected a control connection from uid %d before reading it", uid)
                return
            self.connections += 1
            try:
                await self._serve(stream)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError):
                pass
            finally:
                self.connections -= 1

    async def _serve(self, stream: anyio.abc.SocketStream) -> None:
        buf = bytearray()
        discarding = False
        while True:
            try:
                chunk = await stream.receive(_CHUNK)
            except anyio.EndOfStream:
                return
            start = 0
            while True:
                nl = chunk.find(b"\n", start)
                if nl < 0:
                    break
                piece = chunk[start:nl]
                start = nl + 1
                if discarding:
                    discarding = False
                    buf.clear()
                    continue
                buf += piece
                line = bytes(buf)
                buf.clear()
                if len(line) > MAX_REQUEST_FRAME_BYTES:
                    # Completed in the same read that crossed the cap: refused all the same.
                    response: bytes | None = encode_frame(_error(
                        None, jsonrpc.INVALID_REQUEST, f"frame exceeds {MAX_REQUEST_FRAME_BYTES} bytes"))
                else:
                    response = await self.handle_line(line)
                if response is not None:
                    await stream.send(response)
                if self.service.stop_requested:
                    self.service.stop()
                    return
            if not discarding:
                buf += chunk[start:]
                if len(buf) > MAX_REQUEST_FRAME_BYTES:
                    buf.clear()
                    discarding = True
                    await stream.send(encode_frame(_error(
                        None, jsonrpc.INVALID_REQUEST,
                        f"frame exceeds {MAX_REQUEST_FRAME_BYTES} bytes; it is discarded up to its newline")))

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
