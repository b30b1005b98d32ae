"""The control channel on Windows: a named pipe per home, and the blocking client end of it (`wardian.client` uses it
where POSIX uses the Unix socket; the app's end is `wardian.app._pipe_server`).

A named pipe lives outside the file system, so its name is derived from the home: `\\\\.\\pipe\\wardian-<24 hex digits
of the SHA-256 of the home's normalised path>-app.v<protocol version>`. Anyone may create a pipe of any free name, so
the name proves nothing: the client checks, before it writes a byte, that the process serving the pipe runs as this
user (`GetNamedPipeServerProcessId`, then that process's token), as `wardian.peercred` does on POSIX.

Invariants:
- Every read and write is overlapped and bounded: it waits for its completion, the call's timeout, or an abort
  (`PipeStream.dup().shutdown()`, from another thread), whichever is first; a timed-out or aborted read is cancelled
  and waited for before it returns, so no read lands in a buffer after its call ended.
- A read that returns b"" is the end of the stream: the app closed its end.

Stdlib only (`_winapi`, ctypes), imported only on Windows.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import os
import threading
from pathlib import Path
from typing import Any

from wardian import errors, winsec
from wardian.limits import PROTOCOL_VERSION

# The stdlib's Win32 layer (multiprocessing's pipes use it); typeshed declares it for Windows only.
_winapi: Any = importlib.import_module("_winapi")

ERROR_FILE_NOT_FOUND = 2
ERROR_ACCESS_DENIED = 5
ERROR_BROKEN_PIPE = 109
ERROR_NO_DATA = 232
ERROR_PIPE_NOT_CONNECTED = 233
ERROR_OPERATION_ABORTED = 995
_ENDED = frozenset({ERROR_BROKEN_PIPE, ERROR_NO_DATA, ERROR_PIPE_NOT_CONNECTED})
_WAIT_OBJECT_0 = 0
_WAIT_TIMEOUT = 0x102


def pipe_name(root: Path) -> str:
    """The control pipe of the home at `root`."""
    digest = hashlib.sha256(os.path.normcase(os.path.abspath(root)).encode("utf-8")).hexdigest()[:24]
    return rf"\\.\pipe\wardian-{digest}-app.v{PROTOCOL_VERSION}"


def _kernel32() -> ctypes.CDLL:
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
    kernel32.CreateEventW.restype = ctypes.c_void_p
    kernel32.SetEvent.argtypes = (ctypes.c_void_p,)
    kernel32.GetCurrentProcess.restype = ctypes.c_void_p
    kernel32.GetNamedPipeServerProcessId.argtypes = (ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32))
    return kernel32


class Abort:
    """A way to end a `PipeStream`'s current and future I/O from another thread; it holds its own duplicate of the
    stream's abort event, so it never reaches a handle the stream's owner closed and the system reused."""

    def __init__(self, event: int) -> None:
        self._event: int | None = _winapi.DuplicateHandle(
            _winapi.GetCurrentProcess(), event, _winapi.GetCurrentProcess(), 0, False, _winapi.DUPLICATE_SAME_ACCESS)

    def shutdown(self, how: int = 2) -> None:
        if self._event is not None:
            _kernel32().SetEvent(self._event)

    def close(self) -> None:
        if self._event is not None:
            _winapi.CloseHandle(self._event)
            self._event = None


class PipeStream:
    """The client end of a connected control pipe, with the few calls `AppClient` makes on a socket."""

    def __init__(self, handle: int) -> None:
        self._handle = handle
        self._abort: int = _kernel32().CreateEventW(None, True, False, None)
        self._lock = threading.Lock()
        self.timeout_ms = _winapi.INFINITE

    @property
    def handle(self) -> int:
        return self._handle

    def dup(self) -> Abort:
        return Abort(self._abort)

    def _wait(self, ov: object) -> None:
        """Wait for the overlapped `ov` to finish; on timeout or abort cancel it, wait for the cancel, and raise."""
        waited = _winapi.WaitForMultipleObjects([ov.event, self._abort], False, self.timeout_ms)  # type: ignore[attr-defined]
        if waited == _WAIT_OBJECT_0:
            return
        ov.cancel()  # type: ignore[attr-defined]
        _, err = ov.GetOverlappedResult(True)  # type: ignore[attr-defined]
        if err == 0:
            return  # it finished while being cancelled: its result stands
        if waited == _WAIT_TIMEOUT:
            raise BlockingIOError("the pipe call timed out")  # as a socket's SO_RCVTIMEO reports it
        raise ConnectionAbortedError("the exchange was aborted")

    def send(self, data: bytes) -> int:
        """Write `data` (wholly: a pipe write completes whole or not at all); the number of bytes written.

        Raises:
            BrokenPipeError: the app closed its end. ConnectionAbortedError, BlockingIOError: aborted, timed out.
        """
        if _winapi.WaitForSingleObject(self._abort, 0) == _WAIT_OBJECT_0:
            raise ConnectionAbortedError("the exchange was aborted")
        try:
            ov, err = _winapi.WriteFile(self._handle, data, overlapped=True)
        except OSError as exc:
            raise BrokenPipeError(str(exc)) from None
        if err == _winapi.ERROR_IO_PENDING:
            self._wait(ov)
        written, err = ov.GetOverlappedResult(True)
        if err in _ENDED:
            raise BrokenPipeError("the app closed the pipe")
        if err:
            raise OSError(err, f"writing to the control pipe failed (Windows error {err})")
        return int(written)

    def recv(self, size: int) -> bytes:
        """Up to `size` bytes, b"" when the app closed its end.

        Raises:
            BlockingIOError: the timeout passed first. ConnectionAbortedError: aborted. OSError: the pipe failed.
        """
        try:
            ov, err = _winapi.ReadFile(self._handle, size, overlapped=True)
        except OSError as exc:
            if getattr(exc, "winerror", None) in _ENDED:
                return b""
            raise
        if err == _winapi.ERROR_IO_PENDING:
            self._wait(ov)
        _, err = ov.GetOverlappedResult(True)
        if err in _ENDED:
            return b""
        if err not in (0, _winapi.ERROR_MORE_DATA):
            raise OSError(err, f"reading the control pipe failed (Windows error {err})")
        return bytes(ov.getbuffer())

    def close(self) -> None:
        with self._lock:
            if self._handle:
                _winapi.CloseHandle(self._handle)
                _winapi.CloseHandle(self._abort)
                self._handle = 0


def connect(name: str, timeout_s: float) -> PipeStream:
    """Open the control pipe `name`, waiting up to `timeout_s` while all its instances are busy.

    Raises:
        FileNotFoundError: no such pipe (no app serves this home). PermissionError: its DACL refuses this user.
        TimeoutError: every instance stayed busy.
    """
    deadline_ms = max(1, int(timeout_s * 1000))
    while True:
        try:
            handle = _winapi.CreateFile(name, _winapi.GENERIC_READ | _winapi.GENERIC_WRITE, 0, _winapi.NULL,
                                        _winapi.OPEN_EXISTING, _winapi.FILE_FLAG_OVERLAPPED, _winapi.NULL)
            return PipeStream(handle)
        except OSError as exc:
            code = getattr(exc, "winerror", None)
            if code == ERROR_FILE_NOT_FOUND:
                raise FileNotFoundError(exc.errno, exc.strerror, name) from None
            if code == ERROR_ACCESS_DENIED:
                raise PermissionError(exc.errno, exc.strerror, name) from None
            if code != _winapi.ERROR_PIPE_BUSY:
                raise
        try:
            _winapi.WaitNamedPipe(name, deadline_ms)
        except OSError as exc:
            raise TimeoutError(f"every instance of {name} stayed busy") from exc


def server_user(stream: PipeStream) -> str:
    """The SID of the user whose process serves the pipe `stream` is connected to.

    Raises:
        OSError: Windows would not say.
    """
    pid = ctypes.c_uint32()
    if not _kernel32().GetNamedPipeServerProcessId(ctypes.c_void_p(stream.handle), ctypes.byref(pid)):
        raise OSError(ctypes.get_last_error(), "GetNamedPipeServerProcessId failed")  # type: ignore[attr-defined,unused-ignore]
    return winsec.process_user_sid(pid.value)


def connect_trusted(name: str, timeout_s: float) -> PipeStream:
    """`connect` to the control pipe `name`, then check, before a byte is written, that this user's process serves it;
    the pipe's DACL, set by the app, keeps other users from opening it at all.

    Raises:
        UntrustedSocket: another user's process serves it, or its user cannot be read; nothing was sent.
        OSError: as `connect`.
    """
    stream = connect(name, timeout_s)
    try:
        server, me = server_user(stream), winsec.user_sid()
    except OSError as exc:
        stream.close()
        raise _untrusted(name, f"the user of the process serving it cannot be read ({exc})", None) from None
    if server != me:
        stream.close()  # nothing was written: the app reads EOF
        raise _untrusted(name, f"the process serving it runs as {server}", server)
    return stream


def _untrusted(name: str, why: str, owner: str | None) -> errors.UntrustedSocket:
    """`owner` is the SID of the user serving the pipe `name`, None when that could not be read."""
    return errors.UntrustedSocket(
        f"refused {name}: {why}; nothing was sent. The app's control pipe must be served by an app of this user "
        "(check WARDIAN_HOME)", field="home", allowed="a control pipe served by an app of this user", path=name,
        owner=owner)
