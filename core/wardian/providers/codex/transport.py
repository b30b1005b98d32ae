"""Message transports to a Codex app-server: NDJSON over stdio, and WebSocket over a Unix socket.

`codex app-server` speaks one JSON-RPC message per line on stdio; `codex app-server --listen unix://PATH`
speaks one message per WebSocket text frame over the Unix socket (an HTTP upgrade first;
docs/providers/codex.md#attached-terminals).
Both look the same to `AppServerClient`: `send(message)` and `receive() -> message`.

The WebSocket side is `wsproto` (sans-I/O, python-hyper) driven over an anyio stream, so it keeps anyio's
structured cancellation instead of bringing a second event-loop library.
"""

from __future__ import annotations

from typing import Protocol

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

from wardian import errors

MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class MessageStream(Protocol):
    async def send(self, message: bytes) -> None:
        """Send one JSON message. Raises anyio.BrokenResourceError/ClosedResourceError when closed."""
        ...

    async def receive(self) -> bytes:
        """Receive one JSON message. Raises anyio.EndOfStream when the peer closed."""
        ...

    async def aclose(self) -> None: ...


class NdjsonStream:
    """One JSON message per line over a byte stream pair (a child's stdin and stdout)."""

    def __init__(self, send: anyio.abc.ByteSendStream, receive: anyio.abc.ByteReceiveStream) -> None:
        self._send = send
        self._receive = BufferedByteReceiveStream(receive)

    async def send(self, message: bytes) -> None:
        await self._send.send(message + b"\n")

    async def receive(self) -> bytes:
        while True:
            try:
                line = await self._receive.receive_until(b"\n", MAX_MESSAGE_BYTES)
            except anyio.IncompleteRead:
                raise anyio.EndOfStream from None
            if line.strip():
                return line

    async def aclose(self) -> None:
        await self._send.aclose()


class WebSocketStream:
    """A client WebSocket (text frames) over an already connected byte stream."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._pending: list[bytes] = []
        self._partial: list[str] = []
        self._closed = False

    async def handshake(self, host: str = "localhost", target: str = "/") -> None:
        """The HTTP upgrade. Raises ProviderUnavailable when the server refuses it."""
        await self._stream.send(self._ws.send(Request(host=host, target=target)))
        while True:
            data = await self._stream.receive()
            self._ws.receive_data(data)
            for event in self._ws.events():
                if isinstance(event, AcceptConnection):
                    return
                if isinstance(event, (RejectConnection, RejectData)):
                    raise errors.ProviderUnavailable("the Codex app-server refused the WebSocket upgrade")

    async def send(self, message: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        await self._stream.send(self._ws.send(TextMessage(data=message.decode("utf-8"))))

    async def receive(self) -> bytes:
        while not self._pending:
            if self._closed:
                raise anyio.EndOfStream
            try:
                data = await self._stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                self._closed = True
                raise anyio.EndOfStream from None
            self._ws.receive_data(data)
            for event in self._ws.events():
                if isinstance(event, TextMessage):
                    self._partial.append(event.data)
                    if event.message_finished:
                        self._pending.append("".join(self._partial).encode("utf-8"))
                        self._partial.clear()
                elif isinstance(event, BytesMessage):
                    if event.message_finished:
                        self._pending.append(bytes(event.data))
                elif isinstance(event, Ping):
                    await self._stream.send(self._ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    self._closed = True
                    with anyio.move_on_after(1):
                        await self._stream.send(self._ws.send(event.response()))
        return self._pending.pop(0)

    async def aclose(self) -> None:
        self._closed = True
        await self._stream.aclose()


async def connect_unix_websocket(path: str) -> WebSocketStream:
    """Connect to `codex app-server --listen unix://PATH` and complete the WebSocket upgrade.

    Raises:
        ProviderUnavailable: nothing listens there, or the upgrade was refused.
    """
    try:
        stream = await anyio.connect_unix(path)
    except OSError as exc:
        raise errors.ProviderUnavailable(f"no Codex app-server listens on {path} ({exc.strerror})") from None
    ws = WebSocketStream(stream)
    try:
        await ws.handshake()
    except BaseException:
        await stream.aclose()
        raise
    return ws
