"""The quick path of `wardian mcp serve`: a plain `tools/call` of any of the eight tools, run on thread pools of the
server instead of the SDK's (no `mcp` import).

The SDK's per-call machinery cost ~1.5 ms of CPU per call here, more than the app's durable send, and a first wait
served by the SDK waited for its import. `_front.Front` decides what comes here (`QuickCall`); the result code is the
SDK handler's own (`_calls`), written in the SDK's form (tests/mcp/test_mcp_quick_path.py compares them call by call).

Invariants:
- An answer is written only by taking its call out of the live calls, under the lock, so a cancellation or the end
  of the EOF grace (which empty them) is processed wholly before or after any write: a cancelled call is never
  answered, and no call is answered twice.
- Waits (`QuickCall.waits`) have a pool of their own, so a minute-long wait never delays a send; when every wait
  thread is taken, `start` declines and the SDK serves the call.
- A cancelled wait's exchange is aborted at once, so its thread is free again; a wait cancelled before its thread
  began never reaches the app. Any other call keeps its exchange to the end: aborting a send could leave its
  delivery uncertain.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from wardian.mcp._book import EOF_GRACE_S
from wardian.mcp._frames import JsonId, encode_message
from wardian.mcp._front import QuickCall
from wardian.protocol.jsonrpc import INTERNAL_ERROR

if TYPE_CHECKING:
    from wardian.mcp._calls import Caller, WaitExchange

log = logging.getLogger("wardian.mcp")

# Threads for calls that never wait: each takes a few ms, so a few serve any host, and a burst queues only briefly.
QUICK_WORKERS = 4
# Threads for waits (`QuickCall.waits`: `wait_agent`, `receive_messages` with `timeout_ms`). A wait may block up to
# MAX_WAIT_MS (60 s) on an app connection of its own, so waits get their own threads: they never hold up a send,
# and never queue behind one another. A model's loop waits once at a time; a host running tool calls in parallel
# adds a few (a cancelled wait's exchange is aborted, so its thread is free again at once). Eight cover that with
# room to spare at ~1 idle thread each; a wait beyond them goes to the SDK, which runs it on anyio's worker
# threads, rather than queue here behind a minute-long one.
QUICK_WAIT_WORKERS = 8


class QuickPath:
    """The quick tool calls of one connection: started from the stdin thread, answered through `write` from pooled
    threads, calling the app through the shared `caller`."""

    def __init__(self, write: Callable[[bytes], None], caller: Callable[[], Caller]) -> None:
        self._write = write
        self._caller = caller
        self._lock = threading.Condition()
        # The calls started and neither answered nor cancelled (see the module's invariants).
        self._live: dict[int, QuickCall] = {}
        # The exchanges of the waits among them whose thread has begun, which a cancellation aborts.
        self._exchanges: dict[int, WaitExchange] = {}
        self._serials = itertools.count()
        self._pool: ThreadPoolExecutor | None = None
        self._wait_pool: ThreadPoolExecutor | None = None
        self._waits_running = 0  # threads of `_wait_pool` in use, those of cancelled waits included

    def waits(self) -> int:
        """Threads held by waits now, those of cancelled waits included."""
        with self._lock:
            return self._waits_running

    def start(self, call: QuickCall) -> bool:
        """Run a quick tool call on a pooled thread (the stdin thread keeps reading) that writes its answer.

        False when `call` is a wait and every wait thread is taken.
        """
        with self._lock:
            if call.waits:
                if self._waits_running >= QUICK_WAIT_WORKERS:
                    log.debug("tools/call %s goes to the SDK: %d waits are in flight", call.spec.name,
                              self._waits_running)
                    return False
                self._waits_running += 1
                if self._wait_pool is None:
                    self._wait_pool = ThreadPoolExecutor(max_workers=QUICK_WAIT_WORKERS,
                                                         thread_name_prefix="wardian-mcp-wait")
                pool = self._wait_pool
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=QUICK_WORKERS, thread_name_prefix="wardian-mcp-call")
                pool = self._pool
            serial = next(self._serials)
            self._live[serial] = call
        log.debug("tools/call %s on the quick path", call.spec.name)
        pool.submit(self._run, serial, call)
        return True

    def cancel(self, request_id: JsonId) -> bool:
        """The host cancelled `request_id`: no quick call of that id is answered from now on, and the exchanges of
        its waits are aborted. Whether any quick call had that id."""
        with self._lock:
            quick = [serial for serial, call in self._live.items() if call.id == request_id]
            for serial in quick:
                del self._live[serial]
            exchanges = [exchange for serial in quick if (exchange := self._exchanges.pop(serial, None))]
            if quick:
                self._lock.notify_all()
        for exchange in exchanges:
            exchange.abort("the host cancelled it")  # a wait: its thread is free again at once
        return bool(quick)

    def _run(self, serial: int, call: QuickCall) -> None:
        try:
            data = self._outcome(serial, call)
            if data is None:
                return
            with self._lock:
                if self._live.pop(serial, None) is None:
                    log.debug("dropped the answer to request %r (%s): the host cancelled it, or the server is "
                              "exiting", call.id, call.spec.name)
                    return
                self._lock.notify_all()
                self._write(data)  # under the lock: see `_live`
        except OSError:
            log.exception("the stdio transport failed")
        finally:
            if call.waits:
                with self._lock:
                    self._waits_running -= 1
                    self._lock.notify_all()
                    # Under the lock: logged before anything waiting for this count (the end of stdin) goes on.
                    log.debug("the wait thread of request %r is free again (quick path: %d wait(s) running)", call.id,
                              self._waits_running)

    def _outcome(self, serial: int, call: QuickCall) -> bytes | None:
        """The answer line to `call` (an internal error if the call failed here); None if it was cancelled before
        its wait began."""
        try:
            # pydantic and the client (~0.1 s): a first call's, never the server's start (as `StdioServer.caller`).
            from wardian.mcp._calls import WaitExchange, call_tool_result, tool_outcome

            exchange = None
            if call.waits:
                exchange = WaitExchange()
                with self._lock:
                    if serial not in self._live:
                        log.debug("request %r (%s) was cancelled before its wait began", call.id, call.spec.name)
                        return None
                    self._exchanges[serial] = exchange
            try:
                outcome = tool_outcome(self._caller(), call.spec, call.arguments, exchange)
            finally:
                if exchange is not None:
                    with self._lock:
                        self._exchanges.pop(serial, None)
            return call.answer(call_tool_result(*outcome))
        except Exception:
            log.exception("the quick path failed for %s", call.spec.name)
            return encode_message({"jsonrpc": "2.0", "id": call.id, "error": {
                "code": INTERNAL_ERROR, "message": f"Internal error: {call.spec.name} failed inside the MCP "
                "server; whether the app carried it out is unknown: do not resend automatically"}})

    def finish(self) -> None:
        """Stdin ended: waits are abandoned at once (their exchanges aborted, their answers dropped); other calls
        under way get the same grace as the SDK's, then the rest are abandoned: their answers (their exchanges may
        end later) are dropped, and the pools are let go."""
        with self._lock:
            waits = [serial for serial, call in self._live.items() if call.waits]
            for serial in waits:
                del self._live[serial]
            exchanges = [exchange for serial in waits if (exchange := self._exchanges.pop(serial, None))]
        for exchange in exchanges:
            exchange.abort("the MCP server is exiting")
        if waits:
            log.debug("stdin ended: aborted %d wait(s) on the quick path", len(waits))
        with self._lock:
            # The aborted waits' threads are free again within moments; the grace bounds that too.
            self._lock.wait_for(lambda: not self._live and not self._waits_running, timeout=EOF_GRACE_S)
            if self._live:
                log.debug("abandoned %d quick call(s) still running at the end of the grace", len(self._live))
            self._live.clear()
            pools = [self._pool, self._wait_pool]
            self._pool = self._wait_pool = None
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
