"""The book of requests in flight on the SDK's side of `wardian mcp serve`: those handed to the SDK and not yet
answered (`Outstanding`), and the waits its handler runs on anyio's worker threads (`SdkWaits`) (no `mcp` import).

Both are shared by the stdin thread, the SDK's loop and the end of stdin, so each keeps its counts under one lock.
The quick path keeps its own book (`_quick.QuickPath`).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from wardian.mcp._frames import JsonId

if TYPE_CHECKING:
    from wardian.mcp._calls import WaitExchange

log = logging.getLogger("wardian.mcp")
T = TypeVar("T")

# How long calls still running after stdin EOF may finish before the server exits anyway.
EOF_GRACE_S = 0.5


def _take(counter: Counter[JsonId], key: JsonId) -> bool:
    """Take one `key` from `counter` if it holds one; never below zero."""
    if counter.get(key, 0) <= 0:
        return False
    counter[key] -= 1
    if not counter[key]:
        del counter[key]
    return True


class Outstanding:
    """The client requests handed to the SDK and not yet answered, by id (shared by the stdin thread and the SDK's
    loop).

    A request is outstanding from the moment it is handed to the SDK until its answer is written or the host
    cancels it (`notifications/cancelled`, processed on the stdin thread as it is read): the host has stopped
    waiting, and MCP says a cancelled request gets no answer, so nothing need wait for it (the constant answers,
    the EOF grace). A cancelled request stays *unsettled* until the SDK is done with it: its handler ends without
    an answer (the SDK's `on_request_unanswered` hook, `unanswered`), or, if the SDK had started answering before
    it saw the cancellation, that answer reaches `answer` and is dropped. So nothing is written for an id after
    its cancellation was processed, nothing is answered twice, and no count goes below zero.

    Ids match exactly, as JSON-RPC compares them. The SDK (mcp 2.3.0) also takes a cancellation's "7" for request
    7; such a request is released when the SDK ends it unanswered.
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()  # notified whenever a request stops being outstanding
        self._waiting: Counter[JsonId] = Counter()
        self._unsettled: Counter[JsonId] = Counter()  # cancelled by the host, not yet settled by the SDK

    def add(self, id_: JsonId) -> None:
        with self._lock:
            self._waiting[id_] += 1

    def cancel(self, id_: JsonId) -> bool:
        """The host cancelled request `id_`: it stops being outstanding. False if no such request is."""
        with self._lock:
            if not _take(self._waiting, id_):
                return False
            self._unsettled[id_] += 1
            self._lock.notify_all()
        return True

    def answer(self, id_: JsonId, write: Callable[[], None]) -> bool:
        """Write the answer to request `id_` with `write`, unless the host cancelled it (then it is dropped).

        The write happens under the lock, so a cancellation is processed wholly before it (nothing is written) or
        after it (the answer went out first). A host that reuses a cancelled id before the SDK settled it (MCP
        forbids reuse) may lose the second request's answer instead; the counts stay exact.
        """
        with self._lock:
            if _take(self._unsettled, id_):
                log.debug("dropped the SDK's answer to request %r: the host cancelled it", id_)
                return False
            write()
            if _take(self._waiting, id_):
                self._lock.notify_all()
        return True

    def unanswered(self, id_: JsonId) -> None:
        """The SDK ended request `id_` without an answer: it saw the host's cancellation."""
        with self._lock:
            if not _take(self._unsettled, id_) and _take(self._waiting, id_):
                self._lock.notify_all()
        log.debug("request %r ended unanswered after the host cancelled it", id_)

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._waiting)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` until no request is outstanding; whether none is."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._waiting, timeout_s)

    def unsettled(self) -> int:
        """Cancelled requests the SDK has not yet ended (diagnostics and tests)."""
        with self._lock:
            return self._unsettled.total()


class SdkWaits:
    """The waits the SDK's handler runs on anyio's worker threads (shared by the SDK's loop, those threads and
    `StdioServer.finish`): their exchanges, so that the end of stdin can abort them, and the threads they hold.

    The handler aborts its wait's exchange itself when the SDK cancels it (the host's `notifications/cancelled`, or
    the session's end), as anyio abandons the thread. At stdin EOF (or the parent's death) `abandon` aborts every
    wait in flight, and any the SDK starts later, at once, each first taken off `Outstanding` as if the host had
    cancelled it: nothing waits for it, and its answer is dropped, as a quick wait's is.
    """

    def __init__(self, outstanding: Outstanding | None) -> None:
        self._lock = threading.Condition()  # notified whenever a thread leaves a wait
        self._live: dict[int, tuple[JsonId | None, WaitExchange]] = {}
        self._serials = itertools.count()
        self._abandoned = False
        self._outstanding = outstanding
        self.threads = 0  # worker threads in a wait's exchange now, aborted ones included (diagnostics and tests)

    @contextmanager
    def track(self, request_id: JsonId | None, exchange: WaitExchange) -> Iterator[WaitExchange]:
        """`exchange`, that of the wait `request_id`, kept while the handler runs it (on the SDK's loop)."""
        with self._lock:
            serial = next(self._serials)
            self._live[serial] = (request_id, exchange)
            abandoned = self._abandoned
        if abandoned:
            self._abandon(request_id, exchange)
        try:
            yield exchange
        finally:
            with self._lock:
                del self._live[serial]

    def run(self, request_id: JsonId | None, work: Callable[[], T]) -> T:
        """Run `work`, the exchange of the wait `request_id`, on this worker thread (counted in `threads`)."""
        with self._lock:
            self.threads += 1
        try:
            return work()
        finally:
            with self._lock:
                self.threads -= 1
                self._lock.notify_all()
                # Under the lock: logged before anything waiting for this count (the end of stdin) goes on.
                log.debug("the wait thread of request %r is free again (SDK path: %d wait(s) running)", request_id,
                          self.threads)

    def abandon(self) -> None:
        """Stdin ended: abort every wait in flight, and any started from now on."""
        with self._lock:
            self._abandoned = True
            live = list(self._live.values())
        for request_id, exchange in live:
            self._abandon(request_id, exchange)
        if live:
            log.debug("stdin ended: aborted %d wait(s) on the SDK path", len(live))

    def _abandon(self, request_id: JsonId | None, exchange: WaitExchange) -> None:
        if request_id is not None and self._outstanding is not None:
            self._outstanding.cancel(request_id)  # first: the answer the abort brings about is dropped
        exchange.abort("the MCP server is exiting")

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` until no worker thread is in a wait; whether none is."""
        with self._lock:
            return self._lock.wait_for(lambda: not self.threads, timeout_s)
