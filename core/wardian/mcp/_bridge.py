"""The hand-over from the stdin thread of `wardian mcp serve` to the SDK's thread (no `mcp` import: that thread
imports the SDK, `_sdk`, while the stdin thread already serves).

Invariants:
- Messages reach the SDK in arrival order: those read before its loop attaches are kept and handed over first.
- If the SDK cannot start (or its loop is gone), every request kept or still to come gets a JSON-RPC internal error
  instead, so no request of the host hangs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wardian.mcp._book import Outstanding, SdkWaits
    from wardian.mcp._calls import Caller
    from wardian.mcp._front import Front

log = logging.getLogger("wardian.mcp")


class Inbox:
    """Messages for the SDK in arrival order: kept until its loop attaches, then sent into that loop.

    `None` marks stdin EOF. If the SDK cannot start, requests get a JSON-RPC internal error instead.
    """

    def __init__(self, reject: Callable[[dict[str, Any]], None]) -> None:
        self._lock = threading.Lock()
        self._backlog: list[dict[str, Any] | None] = []
        self._send: Callable[[dict[str, Any] | None], None] | None = None
        self._failed = False
        self._reject = reject
        self.attached = threading.Event()

    def put(self, item: dict[str, Any] | None) -> None:
        with self._lock:
            if self._send is None and not self._failed:
                self._backlog.append(item)
                return
            send = None if self._failed else self._send
        if send is not None:
            try:
                send(item)  # waits while the SDK's buffer is full
                return
            except Exception:  # the SDK's loop is gone (it failed, or the server is exiting)
                log.debug("the SDK loop ended before a message could be handed to it")
        if item is not None:
            self._reject(item)

    def attach(self, send: Callable[[dict[str, Any] | None], None]) -> list[dict[str, Any] | None]:
        """Called on the SDK's loop: returns what arrived so far; later messages go to `send`."""
        with self._lock:
            backlog, self._backlog = self._backlog, []
            self._send = send
        self.attached.set()
        return backlog

    def fail(self) -> None:
        """The SDK cannot serve: reject every request kept or still to come."""
        with self._lock:
            self._failed = True
            backlog, self._backlog = self._backlog, []
        for item in backlog:
            if item is not None:
                self._reject(item)
        self.attached.set()


def run_sdk(write: Callable[[bytes], None], get_caller: Callable[[], Caller], inbox: Inbox,
            outstanding: Outstanding, front: Front, waits: SdkWaits) -> None:
    """The SDK thread: import the SDK and serve until stdin ends; on failure, requests get an error."""
    try:
        # The quick path's modules first (pydantic, the app client, ~0.1 s): a quick call then never waits for the
        # SDK's own import (~1 s), whose finders hold the interpreter's import lock now and then.
        get_caller()
        from wardian.mcp._sdk import serve_sdk  # the SDK and anyio (~1 s): on this thread, while the stdin one serves

        serve_sdk(write, get_caller, inbox, outstanding, front, waits)
    except BaseException:
        log.exception("the MCP SDK server failed")
        inbox.fail()
