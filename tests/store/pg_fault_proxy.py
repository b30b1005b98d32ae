"""A fault proxy on PostgreSQL's wire protocol: the fault the real server cannot produce on demand is "the COMMIT
reached the server, its answer never reached the client" (and its twin, "the connection died just before COMMIT").

`CommitCutter` listens on a Unix socket of its own (`<dir>/.s.PGSQL.<port>`, so a libpq URL with `host=<dir>` and
`port=<port>` reaches it) and relays every connection to the real server's socket byte for byte. It reads the
client's messages (v3 protocol: a type byte and a length; the untyped startup, SSL and GSS requests first) only to
know which SQL each one runs: `Q` carries it, `P` (Parse) names it, `B` (Bind) refers to a parsed statement by name,
so prepared statements are followed too. Once armed with a marker, the first connection whose messages carry the
marker (a message's unique text, in a Bind's parameters) has its next COMMIT cut:

- `after`: the COMMIT is relayed, the server commits, and the connection is closed before its answer is relayed;
- `before`: the connection is closed instead of relaying the COMMIT (the server rolls back).

One shot: `fired` is set, and later COMMITs pass.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Literal

UNTYPED = {80877103, 80877104}  # SSLRequest, GSSENCRequest: answered by one byte, then the real startup follows


class CommitCutter:
    def __init__(self, server_socket: str) -> None:
        self.server_socket = server_socket
        self.dir = tempfile.mkdtemp(prefix="wpx")
        self.port = 5432
        self.path = str(Path(self.dir) / f".s.PGSQL.{self.port}")
        self.marker: bytes | None = None
        self.mode: Literal["after", "before"] = "after"
        self.fired = threading.Event()
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(64)
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="pg-fault-proxy", daemon=True).start()

    def url(self, dbname: str, user: str) -> str:
        return f"postgresql:///{dbname}?host={self.dir}&port={self.port}&user={user}"

    def arm(self, marker: str, mode: Literal["after", "before"]) -> None:
        with self._lock:
            self.marker = marker.encode("utf-8")
            self.mode = mode
            self.fired.clear()

    def close(self) -> None:
        """Stop listening and end every relayed connection (shutdown first: it wakes a thread blocked in recv)."""
        self._closed = True
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    # --- relaying -------------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(self.server_socket)
            self._sockets += [client, server]
            mute = threading.Event()  # set: the server's answers are no longer relayed to this client
            threading.Thread(target=self._downstream, args=(server, client, mute), daemon=True).start()
            threading.Thread(target=self._upstream, args=(client, server, mute), daemon=True).start()

    @staticmethod
    def _downstream(server: socket.socket, client: socket.socket, mute: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                if mute.is_set():
                    return
                client.sendall(data)
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_RDWR)

    def _upstream(self, client: socket.socket, server: socket.socket, mute: threading.Event) -> None:
        reader = _MessageReader()
        statements: dict[bytes, bytes] = {}  # prepared statement name -> its SQL
        seen_marker = False
        try:
            while data := client.recv(65536):
                reader.feed(data)
                out = b""
                while (message := reader.next()) is not None:
                    if not reader.typed:
                        out += message
                        continue
                    kind, body = message[:1], message[5:]
                    sql = _sql_of(kind, body, statements)
                    with self._lock:
                        marker, mode = self.marker, self.mode
                    if marker is not None and marker in body:
                        seen_marker = True
                    if seen_marker and sql.strip().upper() == b"COMMIT" and marker is not None:
                        self._cut(client, server, mute, mode, out + message + reader.buffer)
                        return
                    out += message
                if out:
                    server.sendall(out)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)

    def _cut(self, client: socket.socket, server: socket.socket, mute: threading.Event, mode: str,
             through_commit: bytes) -> None:
        """Cut the connection at its COMMIT: `after` relays it (and its Execute/Sync) first, `before` does not."""
        with self._lock:
            self.marker = None  # one shot
        mute.set()
        if mode == "after":
            server.sendall(through_commit)
            time.sleep(0.5)  # the server commits; its answer is never relayed
        self.fired.set()
        for sock in (client, server):  # shutdown, not only close: the relay thread's recv ends
            sock.shutdown(socket.SHUT_RDWR)


class _MessageReader:
    """Splits the client's byte stream into whole v3 messages: first the untyped ones (startup, SSL and GSS
    requests: a length, then a code), then typed ones (a type byte, then a length)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.started = False  # past the untyped start-up messages
        self.typed = False  # whether the message `next` returned last is a typed one

    def feed(self, data: bytes) -> None:
        self.buffer += data

    def next(self) -> bytes | None:
        """The next whole message, or None until more bytes arrive; `typed` tells which kind it is."""
        self.typed = self.started
        if not self.started:
            if len(self.buffer) < 8:
                return None
            (length,) = struct.unpack("!I", self.buffer[:4])
            if len(self.buffer) < length:
                return None
            message, self.buffer = self.buffer[:length], self.buffer[length:]
            (code,) = struct.unpack("!I", message[4:8])
            self.started = code not in UNTYPED
            return message
        if len(self.buffer) < 5:
            return None
        (length,) = struct.unpack("!I", self.buffer[1:5])
        if len(self.buffer) < 1 + length:
            return None
        message, self.buffer = self.buffer[: 1 + length], self.buffer[1 + length :]
        return message


def _sql_of(kind: bytes, body: bytes, statements: dict[bytes, bytes]) -> bytes:
    """The SQL a typed message runs: `Q` carries it, `P` (Parse) names it for later, `B` (Bind) refers to it."""
    if kind == b"Q":
        return body.rstrip(b"\0")
    if kind == b"P":
        name, _, rest = body.partition(b"\0")
        statements[name] = rest.partition(b"\0")[0]
    elif kind == b"B":
        _portal, _, rest = body.partition(b"\0")
        return statements.get(rest.partition(b"\0")[0], b"")
    return b""
