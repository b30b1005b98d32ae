"""The app client used by the CLI and the MCP server: one blocking request/response exchange per call.

It is deliberately synchronous and stdlib only: the CLI's cold start is a product figure (the event-loop start of
anyio alone costs ~100 ms here), and the MCP server runs calls in worker threads. Frames go through the stdlib's C
json unless orjson is loaded already: orjson's import loads dataclasses, inspect, datetime and uuid and costs more
than the rest of `wardian message wait` together (docs/benchmarks.md), while a long-running caller (the MCP server)
has it anyway and gains its speed on large pages.

Whether a byte of the request was written decides the error: nothing written -> `TransportError`
(`AppNotRunning`, `AppIncompatible`: certainly no effect); anything after the first byte left ->
`DeliveryUncertain` (the app may have admitted it). The client never sends a request twice.
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
import sys
import time

from wardian import errors
from wardian.home import Home
from wardian.limits import CONTROL_GRACE_MS, MAX_RESPONSE_FRAME_BYTES
from wardian.protocol.jsonrpc import error_from_object

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _frame(request: dict[str, Any]) -> bytes:
    """One NDJSON request frame. A process that has orjson loaded already (the MCP server, the app's own tools) frames
    with it, the rest with the C json: loading orjson just for this would cost more than the call.

    Raises:
        InvalidText: the request holds text that is not valid Unicode (a lone surrogate, as from a command-line
            argument that was not UTF-8); nothing was sent.
    """
    try:
        fast = sys.modules.get("orjson")
        if fast is not None:
            return fast.dumps(request) + b"\n"
        return json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    except (UnicodeEncodeError, TypeError) as exc:  # orjson's JSONEncodeError is a TypeError
        raise errors.InvalidText(f"the request holds text that is not valid UTF-8 ({exc.__class__.__name__}); "
                                 "nothing was sent",
                                 field="text", allowed="valid Unicode text (no lone surrogates)") from None


# Calls that do not wait are still bounded: a store stalled on a full disk must not hang a caller.
DEFAULT_CALL_TIMEOUT_S = 30.0
_ids = itertools.count(1)
# Under glibc's mmap threshold: a 1 MiB recv buffer cost an mmap, an mremap and an munmap per call.
_RECV_BYTES = 65536


class AppClient:
    """A connection to the running app of one home (opened lazily, reused across calls)."""

    def __init__(self, home: Home, *, connect_timeout_s: float = 5.0) -> None:
        self.home = home
        self._connect_timeout_s = connect_timeout_s
        self._sock: socket.socket | None = None
        self._buf = bytearray()
        self._timeout_s: float | None = None
        self.requests_written = 0  # frames this client has put on the wire (tests count retries with it)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buf.clear()

    def __enter__(self) -> AppClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> socket.socket:
        """Connect now, unless connected already; the connection's socket (`mcp._calls.WaitExchange` aborts a wait
        through it).

        Raises:
            TransportError: the app is not running, or is incompatible.
        """
        return self._connect()

    def _connect(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._timeout_s = None
        sock.settimeout(self._connect_timeout_s)
        try:
            sock.connect(str(self.home.socket_path))
        except (FileNotFoundError, ConnectionRefusedError, PermissionError, OSError) as exc:
            sock.close()
            others = self.home.other_version_sockets()
            if isinstance(exc, FileNotFoundError) and others:
                raise errors.AppIncompatible(
                    f"the app running for {self.home.root} speaks another control protocol "
                    f"({others[0].name}); use the wardian that started it", field="home") from None
            if isinstance(exc, PermissionError):
                raise errors.AppNotRunning(
                    f"the app's socket for {self.home.root} refused this user ({exc.strerror})",
                    field="home") from None
            raise errors.AppNotRunning(
                f"no app is running for WARDIAN_HOME={self.home.root}; start it with `wardian app start`",
                field="home") from None
        sock.settimeout(None)  # blocking; each call bounds its waits in the kernel (see `_set_timeout`)
        self._sock = sock
        return sock

    def call(self, method: str, params: dict[str, Any] | None = None, *,
             timeout_s: float = DEFAULT_CALL_TIMEOUT_S) -> Any:
        """Send one request and return its result.

        Raises:
            TransportError: nothing was written (the app is not running or is incompatible).
            DeliveryUncertain: the request left, but its answer did not arrive in time or intact.
            WardianError: the app's own error for this request.
        """
        frame = _frame({"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params or {}})
        sock = self._connect()
        deadline = time.monotonic() + timeout_s
        sent = 0
        try:
            self._set_timeout(sock, timeout_s)
            while sent < len(frame):
                sent += sock.send(frame[sent:] if sent else frame)
        except OSError as exc:
            self.close()
            if sent == 0:
                raise errors.AppNotRunning(f"the app closed the connection before the request was sent "
                                           f"({exc.__class__.__name__})", field="home") from None
            raise self._uncertain(method, f"the connection failed while sending ({exc.__class__.__name__})") from None
        finally:
            if sent:
                self.requests_written += 1
        try:
            line = self._read_line(sock, deadline)
        except (OSError, EOFError) as exc:
            self.close()
            reason = "no answer in time" if isinstance(exc, TimeoutError) else "the connection was lost"
            raise self._uncertain(method, reason) from None
        try:
            fast = sys.modules.get("orjson")
            response = fast.loads(line) if fast is not None else json.loads(line)
        except ValueError:  # not JSON, or not UTF-8 (orjson's JSONDecodeError is a ValueError too)
            self.close()
            raise self._uncertain(method, "the answer was not valid JSON") from None
        if "error" in response:
            raise error_from_object(response["error"])
        return response.get("result")

    def call_wait(self, method: str, params: dict[str, Any], timeout_ms: int) -> Any:
        """A call whose own timeout is `timeout_ms`: the exchange is bounded by it plus a grace period."""
        return self.call(method, params, timeout_s=(timeout_ms + CONTROL_GRACE_MS) / 1000)

    def _set_timeout(self, sock: socket.socket, seconds: float) -> None:
        """Bound each blocking send/recv by `seconds` in the kernel (SO_SNDTIMEO/SO_RCVTIMEO).

        The socket itself stays in blocking mode: a Python-level timeout would cost a poll() before every
        send and recv and an ioctl per change, about half the syscalls of a call (`roundtrip_mailbox_wait`,
        docs/benchmarks.md).
        """
        if seconds == self._timeout_s:
            return
        seconds = max(0.001, seconds)
        whole = int(seconds)
        timeval = struct.pack("ll", whole, int((seconds - whole) * 1_000_000))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
        self._timeout_s = seconds

    def _read_line(self, sock: socket.socket, deadline: float) -> bytes:
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[:nl + 1]
                return line
            if len(self._buf) > MAX_RESPONSE_FRAME_BYTES:
                raise EOFError("response frame too large")
            try:
                chunk = sock.recv(_RECV_BYTES)
            except BlockingIOError:  # SO_RCVTIMEO expired
                raise TimeoutError from None
            if not chunk:
                raise EOFError
            if not self._buf and chunk[-1:] == b"\n" and chunk.find(b"\n") == len(chunk) - 1:
                return chunk[:-1]  # the usual case: exactly one whole answer in one read, no copying
            self._buf += chunk
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self._set_timeout(sock, remaining)

    @staticmethod
    def _uncertain(method: str, reason: str) -> errors.DeliveryUncertain:
        return errors.DeliveryUncertain(
            f"{reason}: the app may or may not have carried out {method}; do not resend it automatically "
            "(check with `wardian message receive` or the recipient)", method=method)
