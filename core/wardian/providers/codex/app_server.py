"""A JSON-RPC client for `codex app-server` (newline-delimited JSON over a byte stream pair).

Invariants:
- One reader per connection. It routes each response to the one-shot waiter of its id and every
  notification to the subscriber stream. Server-initiated requests are answered here (it declines elicitations and
  refuses the rest), except the methods a caller registered a handler for (`handle`; the runtime's approvals,
  `approvals`): each of those runs in a task of its own, so a slow answer (a person deciding) never holds up the
  reader, an answer it cannot give is a JSON-RPC error, and a handler that returns None writes nothing (the request
  can no longer be answered).
- When the reader exits (EOF, a broken pipe, a malformed frame, notifications nobody reads), every pending waiter
  fails at once; no notification is ever dropped while the connection lives.
- No frame is logged, sent or received, so no request's params are (an `account/login/start` carries the agent's
  API key); a log line names the method at most.
- An optional `tap` sees every notification in the reader, in wire order, before any answer read after it is
  returned to its requester (the subscriber stream is read by another task, with no such order); it must not block.
- A caller that must see one notification (`account/login/completed`) registers for it with `expect` before it
  sends the request that causes it; the notification still goes to the subscriber stream too.
- Whether the request was written decides the error: a failed write is `ProviderUnavailable` (certainly
  not admitted: the peer never read a complete line); a written request whose answer is lost or late is
  `DeliveryUncertain`; an error answer is `AppServerError` with Codex's code and message.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import orjson

from wardian import errors
from wardian.providers.codex.transport import MessageStream

log = logging.getLogger("wardian.codex.app_server")

NOTIFICATION_BUFFER = 10_000


ServerRequestHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]
"""Answers one server-to-client request: its params in, its result out (raise WardianError to refuse it; None: no
answer is written, the request being over)."""


class _Overflow(Exception):
    """The reader's notification buffer is full."""


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: dict[str, Any]


class _Waiter:
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class Expected:
    """The first notification of one method seen while `AppServerClient.expect` is held."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.note: Notification | None = None
        self._done = anyio.Event()

    def _seen(self, note: Notification | None) -> None:
        if self.note is None and not self._done.is_set():
            self.note = note
            self._done.set()

    async def wait(self, timeout_s: float) -> Notification | None:
        """The notification; None when it did not come within `timeout_s`, or the connection ended first."""
        with anyio.move_on_after(timeout_s):
            await self._done.wait()
        return self.note


class AppServerClient:
    """One connection to a Codex app-server. Call `run()` in a task group, then `request()` freely."""

    def __init__(self, stream: MessageStream, *, name: str = "codex",
                 tap: Callable[[Notification], None] | None = None) -> None:
        self._stream = stream
        self._tap = tap
        self._name = name
        self._ids = itertools.count(1)
        self._waiters: dict[int, _Waiter] = {}
        self._write_lock = anyio.Lock()
        self._closed: BaseException | None = None
        self._expected: list[Expected] = []
        self._handlers: dict[str, ServerRequestHandler] = {}
        self._handler_tg: anyio.abc.TaskGroup | None = None
        self._notify_send, self.notifications = anyio.create_memory_object_stream[Notification](
            NOTIFICATION_BUFFER)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def handle(self, method: str, handler: ServerRequestHandler) -> None:
        """Answer the server's requests `method` with `handler` from now on."""
        self._handlers[method] = handler

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The reader loop. Returns when the peer closes; every pending waiter then fails (and every handler still
        answering is cancelled)."""
        async with anyio.create_task_group() as tg:
            self._handler_tg = tg
            try:
                await self._read(task_status)
            finally:
                self._handler_tg = None
                tg.cancel_scope.cancel()

    async def _read(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        task_status.started()
        reason: BaseException = EOFError("the app-server closed its output")
        try:
            while True:
                try:
                    line = await self._stream.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
                except anyio.DelimiterNotFound:
                    reason = ValueError("the app-server sent a frame over the size limit")
                    return
                try:
                    msg = orjson.loads(line)
                except orjson.JSONDecodeError:
                    log.warning("%s: skipped a frame that is not JSON: %r", self._name, line[:200])
                    continue
                try:
                    await self._route(msg)
                except _Overflow:
                    reason = OverflowError("the notification buffer is full")
                    return
        except BaseException as exc:  # cancellation included: waiters must not hang
            reason = exc
            raise
        finally:
            self._fail_all(reason)
            self._notify_send.close()

    async def _route(self, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" in msg:
            await self._answer_server_request(msg)
        elif "method" in msg:
            params = msg.get("params")
            note = Notification(str(msg["method"]), params if isinstance(params, dict) else {})
            if self._tap is not None:
                self._tap(note)
            for expected in self._expected:
                if expected.method == note.method:
                    expected._seen(note)
            try:
                self._notify_send.send_nowait(note)
            except anyio.WouldBlock:
                # Never drop one silently: a lost turn/completed would leave its tasks submitted forever. End the
                # connection instead; the owner then ends, and its submissions become uncertain (logged, durable).
                log.error("%s: %d notifications wait unread; closing the connection (its deliveries in flight "
                          "become uncertain)", self._name, NOTIFICATION_BUFFER)
                raise _Overflow from None
        elif "id" in msg:
            waiter = self._waiters.pop(msg["id"], None) if isinstance(msg["id"], int) else None
            if waiter is None:
                log.warning("%s: a response for an unknown id %r", self._name, msg.get("id"))
                return
            if "error" in msg:
                err = msg["error"] if isinstance(msg["error"], dict) else {}
                waiter.error = errors.AppServerError(str(err.get("message", "error")),
                                                     rpc_code=err.get("code"))
            else:
                waiter.result = msg.get("result")
            waiter.done.set()

    async def _answer_server_request(self, msg: dict[str, Any]) -> None:
        method = msg["method"]
        handler = self._handlers.get(method)
        if handler is not None and self._handler_tg is not None:
            self._handler_tg.start_soon(self._answer_with, handler, msg)
            return
        if method == "mcpServer/elicitation/request":
            # Nobody can fill in a server's form here (a tool's approval goes to the runtime's handler).
            reply: dict[str, Any] = {"id": msg["id"], "result": {"action": "decline"}}
        else:
            reply = {"id": msg["id"], "error": {"code": -32601, "message": f"wardian does not handle {method}"}}
        log.info("%s: answered server request %s", self._name, method)
        with contextlib.suppress(errors.ProviderUnavailable):
            await self._write(reply)

    async def _answer_with(self, handler: ServerRequestHandler, msg: dict[str, Any]) -> None:
        params = msg.get("params")
        try:
            result = await handler(params if isinstance(params, dict) else {})
            if result is None:
                log.info("%s: server request %s ended unanswered", self._name, msg["method"])
                return
            reply: dict[str, Any] = {"id": msg["id"], "result": result}
        except errors.WardianError as exc:
            log.warning("%s: could not answer server request %s: %s", self._name, msg["method"], exc.message)
            reply = {"id": msg["id"], "error": {"code": -32000, "message": exc.message}}
        log.info("%s: answered server request %s", self._name, msg["method"])
        with contextlib.suppress(errors.ProviderUnavailable):
            await self._write(reply)

    def _fail_all(self, reason: BaseException) -> None:
        self._closed = reason
        for expected in self._expected:
            expected._seen(None)
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.error = errors.DeliveryUncertain(
                f"the Codex app-server connection ended before it answered ({type(reason).__name__})")
            waiter.done.set()

    async def _write(self, msg: dict[str, Any]) -> None:
        frame = orjson.dumps(msg)
        async with self._write_lock:
            try:
                await self._stream.send(frame)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                raise errors.ProviderUnavailable(
                    f"the Codex app-server connection is closed ({type(exc).__name__}); nothing was sent"
                ) from None

    @contextlib.contextmanager
    def expect(self, method: str) -> Iterator[Expected]:
        """Catch the first `method` notification from now until the block ends (register before the request that
        causes it, so an early one is not missed)."""
        expected = Expected(method)
        self._expected.append(expected)
        if self._closed is not None:
            expected._seen(None)
        try:
            yield expected
        finally:
            self._expected.remove(expected)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self._write(msg)

    async def request(self, method: str, params: dict[str, Any] | None = None, *,
                      timeout_s: float = 30.0) -> Any:
        """Send a request and return its result.

        Raises:
            ProviderUnavailable: the connection was closed before the request was written.
            AppServerError: Codex answered with an error.
            DeliveryUncertain: written, but the answer was lost or did not come in time.
        """
        if self._closed is not None:
            raise errors.ProviderUnavailable("the Codex app-server connection is closed; nothing was sent")
        request_id = next(self._ids)
        waiter = _Waiter()
        self._waiters[request_id] = waiter
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            msg["params"] = params
        try:
            await self._write(msg)
        except errors.ProviderUnavailable:
            self._waiters.pop(request_id, None)
            raise
        with anyio.move_on_after(timeout_s):
            await waiter.done.wait()
        if not waiter.done.is_set():
            self._waiters.pop(request_id, None)
            raise errors.DeliveryUncertain(
                f"Codex did not answer {method} within {timeout_s:g} s; its outcome is unknown", method=method)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    async def aclose(self) -> None:
        """Close the connection, and the subscriber stream with it (its reader has ended by then)."""
        self.notifications.close()
        await self._stream.aclose()
