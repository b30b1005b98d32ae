"""The Agent Client Protocol's transport: JSON-RPC 2.0, one object per line, over the agent's stdin and stdout
(https://agentclientprotocol.com/protocol/transports). Both sides send requests: wardian asks `initialize`,
`session/new`, `session/prompt`; the agent asks `session/request_permission` and its own extensions (Qwen Code's
`craft/drainMidTurnQueue`, which carries no leading underscore).

Written here rather than on the official Python SDK (`agent-client-protocol`): the SDK runs on asyncio directly
(not anyio's structured task groups), routes an unknown agent request to the client only when its name starts with
an underscore (so Qwen Code's drain hook would be refused as method-not-found), and has no notion of whether a
request's line left the process, which is what decides between "not sent" and "outcome unknown" here.

Invariants:
- One reader: it routes each response to the one waiter of its id, each agent request to `on_request` (answered
  at once, in order), each notification to `on_notification`. When it ends, every waiter fails with `Gone`.
- A line is written whole, under a lock and shielded from cancellation: a cancelled writer never leaves half a line.
  `NotSent` means no byte of it left (the input was closed before); `LineLost` means the write failed part-way or
  after, and whether the agent read it is unknown.
- Every line is `json.dumps(ensure_ascii=True)`: one line of ASCII that decodes to the exact text given.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

log = logging.getLogger("wardian.acp")

MAX_LINE_BYTES = 256 * 1024 * 1024
"""The longest line read (a replayed history or a tool's output carries whole texts)."""
METHOD_NOT_FOUND = -32601

JsonObject = dict[str, Any]
RequestHandler = Callable[[str, JsonObject], Awaitable[JsonObject]]
NotificationHandler = Callable[[str, JsonObject], None]


class NotSent(Exception):
    """No byte of the line left: the agent's input was closed, or the process had already ended."""


class LineLost(Exception):
    """Writing the line failed part-way or after: whether the agent read it is unknown."""


class Gone(Exception):
    """The agent's output ended before it answered."""


@dataclass(eq=False)
class RpcError(Exception):
    """The agent answered a request with a JSON-RPC error."""

    code: int
    message: str
    data: Any = None

    def __str__(self) -> str:
        return f"{self.message} (code {self.code})"


class MethodNotFound(Exception):
    """Raised by a request handler for a method wardian does not serve: answered with -32601."""


@dataclass(eq=False)
class Pending:
    """A request sent: `result()` waits for its answer; `on_answer`, when set, is called by the reader as it
    arrives (before any waiter wakes)."""

    method: str
    on_answer: Callable[[Pending], None] | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)
    value: JsonObject | None = None
    error: RpcError | Gone | None = None

    def settle(self, value: JsonObject | None, error: RpcError | Gone | None) -> None:
        if self.answered.is_set():
            return
        self.value, self.error = value, error
        if self.on_answer is not None:
            self.on_answer(self)
        self.answered.set()

    async def result(self) -> JsonObject:
        """Raises: RpcError (the agent refused it), Gone (no answer: the agent's output ended)."""
        await self.answered.wait()
        if self.error is not None:
            raise self.error
        return self.value or {}


def encode(message: JsonObject) -> bytes:
    return json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"


class Peer:
    """The JSON-RPC connection to one agent process (module docstring). Run `read` in a task; send with `request`,
    `call` and `notify`."""

    def __init__(self, name: str, stdin: anyio.abc.ByteSendStream, stdout: anyio.abc.ByteReceiveStream,
                 on_request: RequestHandler, on_notification: NotificationHandler) -> None:
        self._name = name
        self._stdin = stdin
        self._stdout = BufferedByteReceiveStream(stdout)
        self._on_request = on_request
        self._on_notification = on_notification
        # Uncontended, taking it yields nothing: a prompt's line leaves in the loop step that claimed it.
        self._lock = anyio.Lock(fast_acquire=True)
        self._count = 0
        self._pending: dict[int, Pending] = {}
        self.closed = False
        self.gone = anyio.Event()

    async def request(self, method: str, params: JsonObject,
                      on_answer: Callable[[Pending], None] | None = None) -> Pending:
        """Send a request; its answer arrives on the returned `Pending`. Raises: NotSent, LineLost."""
        self._count += 1
        request_id = self._count
        pending = self._pending[request_id] = Pending(method, on_answer)
        try:
            await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        except NotSent:
            del self._pending[request_id]
            raise
        return pending

    async def call(self, method: str, params: JsonObject, timeout_s: float) -> JsonObject:
        """A request and its result. Raises: NotSent, LineLost, RpcError, Gone, TimeoutError."""
        pending = await self.request(method, params)
        with anyio.fail_after(timeout_s):
            return await pending.result()

    async def notify(self, method: str, params: JsonObject) -> None:
        """Raises: NotSent, LineLost."""
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _send(self, message: JsonObject) -> None:
        line = encode(message)
        async with self._lock:
            if self.closed or self.gone.is_set():
                raise NotSent(f"the input of {self._name}'s agent is closed")
            with anyio.CancelScope(shield=True):
                try:
                    await self._stdin.send(line)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self.closed = True
                    raise LineLost(type(exc).__name__) from None

    async def close(self) -> None:
        """Close the agent's input (an ACP agent exits at its end)."""
        async with self._lock:
            self.closed = True
            with anyio.CancelScope(shield=True), contextlib.suppress(anyio.BrokenResourceError, OSError):
                await self._stdin.aclose()

    async def read(self) -> None:
        """Read until the agent's output ends; then every waiter fails with `Gone`."""
        try:
            while (message := await self._next()) is not None:
                await self._route(message)
        finally:
            self.gone.set()
            for pending in list(self._pending.values()):
                pending.settle(None, Gone(f"{self._name}'s agent ended before it answered {pending.method}"))
            self._pending.clear()

    async def _route(self, message: JsonObject) -> None:
        method = message.get("method")
        if isinstance(method, str):
            params = message.get("params")
            params = params if isinstance(params, dict) else {}
            if "id" in message:
                await self._answer(message["id"], method, params)
            else:
                self._on_notification(method, params)
            return
        request_id = message.get("id")
        pending = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if pending is None:
            log.info("%s: an answer to no request of ours: %r", self._name, str(message)[:200])
            return
        error = message.get("error")
        if isinstance(error, dict):
            pending.settle(None, RpcError(int(error.get("code") or 0), str(error.get("message") or ""),
                                          error.get("data")))
        else:
            result = message.get("result")
            pending.settle(result if isinstance(result, dict) else {}, None)

    async def _answer(self, request_id: Any, method: str, params: JsonObject) -> None:
        try:
            reply: JsonObject = {"jsonrpc": "2.0", "id": request_id, "result": await self._on_request(method, params)}
        except MethodNotFound:
            reply = {"jsonrpc": "2.0", "id": request_id,
                     "error": {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"}}
        with contextlib.suppress(NotSent, LineLost):
            await self._send(reply)

    async def _next(self) -> JsonObject | None:
        """The next object on the agent's output, or None at its end (a line that is not one is logged, skipped)."""
        while True:
            try:
                raw = await self._stdout.receive_until(b"\n", MAX_LINE_BYTES)
            except (anyio.IncompleteRead, anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return None
            except anyio.DelimiterNotFound:
                log.error("%s: the agent printed a line over %d bytes; its output is no longer read", self._name,
                          MAX_LINE_BYTES)
                return None
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except ValueError:
                log.info("%s: the agent printed a line that is not JSON: %r", self._name, raw[:200])
                continue
            if isinstance(value, dict):
                return value
