"""The app client used by the CLI and the MCP server: one blocking request/response exchange per call.

It is deliberately synchronous and stdlib only: the CLI's cold start is a product figure (the event-loop start of
anyio alone costs ~100 ms here), and the MCP server runs calls in worker threads. Frames go through the stdlib's C
json unless orjson is loaded already: orjson's import loads dataclasses, inspect, datetime and uuid and costs more
than the rest of `wardian message wait` together (docs/benchmarks.md), while a long-running caller (the MCP server)
has it anyway and gains its speed on large pages.

Whether a byte of the request was written decides the error: nothing written -> `TransportError`
(`AppNotRunning`, `AppIncompatible`: certainly no effect); anything after the first byte left ->
`DeliveryUncertain` (the app may have admitted it). The client never sends a request twice.

Before its first byte it makes sure it talks to this user's own app (`UntrustedSocket` otherwise, contract rule
HOME-5, docs/design/contract.md): `run/` must be a real directory and the socket a socket, both owned by the
effective uid and closed to everyone else (as the app makes them), and the process listening on the socket must run
as the effective uid. Root is no exception: a socket of another user is that user's, whoever connects. The file
checks give the clear message; the peer's credentials, read from the kernel after `connect()` (`wardian.peercred`),
are the check that counts, since whoever may write an ancestor of `run/` can swap the path between our `lstat` and
our `connect`, but cannot change who called `listen()`.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import stat
import struct
import sys
import time

from wardian import errors, peercred
from wardian.home import Home
from wardian.limits import CONTROL_GRACE_MS, CONTROL_IDLE_S, MAX_RESPONSE_FRAME_BYTES
from wardian.protocol.jsonrpc import error_from_object

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if sys.platform == "win32" or TYPE_CHECKING:  # the control channel is a named pipe there (wardian.pipes)
    from wardian import pipes

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from wardian.pipes import PipeStream


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
# Windows: a kept pipe connection quiet this long is replaced before a request is written. The app closes one idle
# for CONTROL_IDLE_S whole (app/connection.py: a pipe has no reading side to shut, as on POSIX), and a request that
# reaches it in that instant is lost; one written on a connection quiet for half that long cannot meet that close.
_PIPE_REUSE_S = CONTROL_IDLE_S / 2


class AppClient:
    """A connection to the running app of one home (opened lazily, reused across calls)."""

    def __init__(self, home: Home, *, connect_timeout_s: float = 5.0) -> None:
        self.home = home
        self._connect_timeout_s = connect_timeout_s
        self._sock: socket.socket | PipeStream | None = None
        self._buf = bytearray()
        self._timeout_s: float | None = None
        self._quiet_since = 0.0  # when the kept connection was opened or last answered (time.monotonic())
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

    def connect(self) -> socket.socket | PipeStream:
        """Connect now, unless connected already; the connection's socket (`mcp._calls.WaitExchange` aborts a wait
        through it).

        Raises:
            TransportError: the app is not running, or is incompatible, or its socket is not this user's
                (`UntrustedSocket`); nothing was sent.
        """
        self._drop_if_quiet()
        return self._connect()

    def _drop_if_quiet(self) -> None:
        """Windows: close the kept pipe connection if it has been quiet for `_PIPE_REUSE_S` (a new one is opened)."""
        if (self._sock is not None and not isinstance(self._sock, socket.socket)
                and time.monotonic() - self._quiet_since >= _PIPE_REUSE_S):
            self.close()

    def _connect(self) -> socket.socket | PipeStream:
        if self._sock is not None:
            return self._sock
        if sys.platform == "win32":
            self._sock = self._connect_pipe()
            self._quiet_since = time.monotonic()
            return self._sock
        path = str(self.home.socket_path)
        try:
            _check_private(os.path.dirname(path), stat.S_ISDIR, "directory")  # run/, without building a Path
            _check_private(path, stat.S_ISSOCK, "socket")
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise self._not_running(exc) from None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._timeout_s = None
        sock.settimeout(self._connect_timeout_s)
        try:
            sock.connect(path)
        except OSError as exc:
            sock.close()
            raise self._not_running(exc) from None
        try:
            _check_peer(sock, path)
        except errors.UntrustedSocket:
            sock.close()  # nothing was written: the listener reads EOF
            raise
        sock.settimeout(None)  # blocking; each call bounds its waits in the kernel (see `_set_timeout`)
        self._sock = sock
        return sock

    def _connect_pipe(self) -> PipeStream:
        """Windows: open the home's control pipe, served by this user's app (`pipes.connect_trusted`)."""
        self._timeout_s = None
        try:
            return pipes.connect_trusted(pipes.pipe_name(self.home.root), self._connect_timeout_s)
        except OSError as exc:
            raise self._not_running(exc) from None

    def _not_running(self, exc: OSError) -> errors.TransportError:
        """The error for a socket that is missing or refuses the connection."""
        others = self.home.other_version_sockets()
        if isinstance(exc, FileNotFoundError) and others:
            return errors.AppIncompatible(
                f"the app running for {self.home.root} speaks another control protocol "
                f"({others[0].name}); use the wardian that started it", field="home")
        if isinstance(exc, PermissionError):
            return errors.AppNotRunning(
                f"the app's socket for {self.home.root} refused this user ({exc.strerror})", field="home")
        return errors.AppNotRunning(
            f"no app is running for WARDIAN_HOME={self.home.root}; start it with `wardian app start`", field="home")

    def call(self, method: str, params: dict[str, Any] | None = None, *,
             timeout_s: float = DEFAULT_CALL_TIMEOUT_S, reconnect: bool = True) -> Any:
        """Send one request and return its result.

        Raises:
            TransportError: nothing was written (the app is not running or is incompatible, or its socket is not
                this user's: `UntrustedSocket`).
            DeliveryUncertain: the request left, but its answer did not arrive in time or intact.
            WardianError: the app's own error for this request.
        """
        frame = _frame({"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params or {}})
        if reconnect:  # an abortable exchange attached its connection already, through `connect`
            self._drop_if_quiet()
        # A kept connection the app closed fails the write before a byte leaves; `reconnect=False` for an exchange
        # another thread may abort by shutting the connection down, which fails the write the same way.
        reused = reconnect and self._sock is not None
        sock = self._connect()
        deadline = time.monotonic() + timeout_s
        sent = 0
        try:
            self._set_timeout(sock, timeout_s)
            while sent < len(frame):
                sent += sock.send(frame[sent:] if sent else frame)
        except OSError as exc:
            self.close()
            if sent == 0 and reused:
                # The app closed this kept connection (one idle too long, or the app restarted) so that a write
                # fails before any byte leaves: nothing of this request was read; send it once, on a new connection.
                return self.call(method, params, timeout_s=timeout_s)
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
        self._quiet_since = time.monotonic()
        try:
            fast = sys.modules.get("orjson")
            response = fast.loads(line) if fast is not None else json.loads(line)
        except ValueError:  # not JSON, or not UTF-8 (orjson's JSONDecodeError is a ValueError too)
            self.close()
            raise self._uncertain(method, "the answer was not valid JSON") from None
        if "error" in response:
            raise error_from_object(response["error"])
        return response.get("result")

    def call_wait(self, method: str, params: dict[str, Any], timeout_ms: int, *, reconnect: bool = True) -> Any:
        """A call whose own timeout is `timeout_ms`: the exchange is bounded by it plus a grace period."""
        return self.call(method, params, timeout_s=(timeout_ms + CONTROL_GRACE_MS) / 1000, reconnect=reconnect)

    def _set_timeout(self, sock: socket.socket | PipeStream, seconds: float) -> None:
        """Bound each blocking send/recv by `seconds` in the kernel (SO_SNDTIMEO/SO_RCVTIMEO).

        The socket itself stays in blocking mode: a Python-level timeout would cost a poll() before every
        send and recv and an ioctl per change, about half the syscalls of a call (`roundtrip_mailbox_wait`,
        docs/benchmarks.md).
        """
        if seconds == self._timeout_s:
            return
        seconds = max(0.001, seconds)
        if not isinstance(sock, socket.socket):  # Windows: the pipe bounds each wait itself (wardian.pipes)
            sock.timeout_ms = max(1, int(seconds * 1000))
            self._timeout_s = seconds
            return
        whole = int(seconds)
        timeval = struct.pack("ll", whole, int((seconds - whole) * 1_000_000))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
        self._timeout_s = seconds

    def _read_line(self, sock: socket.socket | PipeStream, deadline: float) -> bytes:
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


def _check_private(path: str, is_kind: Callable[[int], bool], kind: str) -> None:
    """Refuse `path` unless it is (not through a symlink) a `kind` owned by the effective uid that no other user may
    open: mode 0700 for `run/`, 0600 for the socket, as the app makes them.

    Raises:
        FileNotFoundError, NotADirectoryError: it does not exist (no app runs there).
        UntrustedSocket: anything else.
    """
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as exc:
        raise _untrusted(path, f"it cannot be examined ({exc.strerror})", None) from None
    if not is_kind(st.st_mode):
        what = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a " + kind
        raise _untrusted(path, f"it is {what}", st.st_uid)
    if st.st_uid != os.geteuid():
        raise _untrusted(path, f"it belongs to {_user(st.st_uid)}", st.st_uid)
    if st.st_mode & 0o077:
        raise _untrusted(path, f"it has mode {stat.S_IMODE(st.st_mode):o}, open to other users", st.st_uid)


def _check_peer(sock: socket.socket, path: str) -> None:
    """Refuse the connected `sock` unless the process listening at `path` runs as the effective uid (where the
    platform cannot tell, the file checks before it stand alone: see `wardian.peercred`).

    Raises:
        UntrustedSocket: another uid listens there, or the kernel would not say who does.
    """
    try:
        uid = peercred.peer_uid(sock)
    except OSError as exc:
        raise _untrusted(path, f"the credentials of the process listening on it cannot be read ({exc})",
                         None) from None
    if uid is not None and uid != os.geteuid():
        raise _untrusted(path, f"the process listening on it runs as {_user(uid)}", uid)


def _untrusted(path: str, why: str, owner_uid: int | None) -> errors.UntrustedSocket:
    """`owner_uid`: who owns `path`, or listens on it; None when that could not be read."""
    euid = os.geteuid()
    me = _user(euid)
    return errors.UntrustedSocket(
        f"refused {path}: {why}; nothing was sent. The app's run/ directory and socket, and the process listening "
        f"on it, must belong to {me} alone: check WARDIAN_HOME (a home of your own, where the app makes run/ 0700 and "
        "the socket 0600)", field="home",
        allowed=f"run/ and its socket owned by {me}, closed to other users, an app of {me} listening",
        path=path, owner_uid=owner_uid, owner=None if owner_uid is None else _user_name(owner_uid),
        expected_uid=euid)


def _user(uid: int) -> str:
    """`uid 1000 (alice)`, or `uid 1000` when the user database does not know it."""
    name = _user_name(uid)
    return f"uid {uid}" if name is None else f"uid {uid} ({name})"


def _user_name(uid: int) -> str | None:
    import pwd  # POSIX only, and for this error path alone: the CLI's cold start never loads it (docs/benchmarks.md)

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None
