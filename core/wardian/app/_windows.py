"""The app on Windows: its end of the control pipe (`wardian.pipes` names it and holds the client's end). Imported
by app/run.py and app/server.py only where `sys.platform == "win32"`.

Invariants:
- Every instance of the pipe is created with a protected DACL that admits this user alone (`winsec.OwnerOnly`), and
  with PIPE_REJECT_REMOTE_CLIENTS; the first with FILE_FLAG_FIRST_PIPE_INSTANCE, so a pipe of that name someone else
  made first (a squatter waiting for clients) fails the app's start instead of sharing its clients.
- A client is admitted only once the user of its process (`GetNamedPipeClientProcessId`, then that process's token)
  is this user: checked after the connection and before a byte is read, as `wardian.peercred` does on POSIX; another
  user's client is logged and its instance closed unread.
- The pipe instances are overlapped and served by asyncio's proactor (anyio's asyncio backend runs one on Windows):
  asyncio's own `start_serving_pipe` creates its instances with the default security descriptor and starts reading
  at once, so the accept is done here with the proactor's `accept_pipe`, the same call asyncio's pipe server makes
  (https://github.com/python/cpython/blob/3.12/Lib/asyncio/windows_events.py).
"""

from __future__ import annotations

import asyncio
import ctypes
import importlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from wardian import winsec

# The stdlib's Win32 layer (multiprocessing's pipes use it); typeshed declares it for Windows only.
_winapi: Any = importlib.import_module("_winapi")
windows_utils: Any = importlib.import_module("asyncio.windows_utils")

audit = logging.getLogger("wardian.audit")

PIPE_TYPE_BYTE = PIPE_READMODE_BYTE = PIPE_WAIT = 0  # a byte stream, as a socket is; blocking mode
PIPE_REJECT_REMOTE_CLIENTS = 0x00000008
FILE_FLAG_FIRST_PIPE_INSTANCE = 0x00080000
PIPE_BUFFER_BYTES = 65536


def client_user(handle: int) -> str:
    """The SID of the user whose process opened the connected pipe instance `handle`.

    Raises:
        OSError: Windows would not say (the client is gone, or its process cannot be opened).
    """
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
    pid = ctypes.c_uint32()
    if not kernel32.GetNamedPipeClientProcessId(ctypes.c_void_p(handle), ctypes.byref(pid)):
        raise OSError(ctypes.get_last_error(), "GetNamedPipeClientProcessId failed")  # type: ignore[attr-defined,unused-ignore]
    return winsec.process_user_sid(pid.value)


class PipeListener:
    """The control pipe of one home, ready for its first client once made (so a start that cannot have the name
    fails before readiness).

    Raises (constructor):
        OSError: the name is taken (PermissionError, ERROR_ACCESS_DENIED) or the pipe cannot be made.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.user = winsec.user_sid()
        self._security = winsec.OwnerOnly(self.user)
        self._next: Any = self._instance(first=True)

    def _instance(self, *, first: bool) -> Any:
        handle = _winapi.CreateNamedPipe(
            self.name,
            _winapi.PIPE_ACCESS_DUPLEX | _winapi.FILE_FLAG_OVERLAPPED | (FILE_FLAG_FIRST_PIPE_INSTANCE if first else 0),
            PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
            _winapi.PIPE_UNLIMITED_INSTANCES, PIPE_BUFFER_BYTES, PIPE_BUFFER_BYTES, _winapi.NMPWAIT_WAIT_FOREVER,
            self._security.address)
        return windows_utils.PipeHandle(handle)

    @property
    def handle(self) -> int:
        """The instance waiting for the next client (tests read its DACL back)."""
        return int(self._next.handle)

    async def accept_forever(self, admit: Callable[[Any], Awaitable[None]]) -> None:
        """Hand each connected client of this user to `admit` (a `PipeHandle`), until cancelled.

        Raises:
            OSError: a new instance cannot be made.
        """
        loop: Any = asyncio.get_running_loop()
        while True:
            pipe = self._next
            try:
                await loop._proactor.accept_pipe(pipe)
            except OSError as exc:
                audit.warning("a control pipe client went away before it was accepted: %s", exc)
                pipe.close()
                self._next = self._instance(first=False)
                continue
            self._next = self._instance(first=False)
            try:
                user = client_user(pipe.handle)
            except OSError as exc:
                audit.warning("rejected a control pipe client whose user cannot be read (%s) before reading it", exc)
                pipe.close()
                continue
            if user != self.user:
                audit.warning("rejected a control pipe client of %s before reading it", user)
                pipe.close()
                continue
            await admit(pipe)

    async def aclose(self) -> None:
        """Close the waiting instance: no client connects from now on (those connected are their handlers')."""
        self._next.close()
        self._security.close()


def attach(pipe: Any, protocol: asyncio.BaseProtocol) -> asyncio.BaseTransport:
    """An asyncio transport for the accepted instance `pipe`, feeding `protocol` (reading starts now)."""
    loop: Any = asyncio.get_running_loop()
    transport: asyncio.BaseTransport = loop._make_duplex_pipe_transport(pipe, protocol)
    return transport

