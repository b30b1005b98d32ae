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
  at once, in order, unless it answers `Deferred`: then from a task of its own), each notification to
  `on_notification`. When it ends, every waiter fails with `Gone` and every deferred answer is dropped.
- Lines are framed, written and read as every stdio provider's are (`wardian.providers.lines`): single-line ASCII
  JSON, written whole; `NotSent` means no byte of it left, `LineLost` that whether the agent read it is unknown.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from wardian.providers.lines import LineLost, LineReader, LineWriter, NotSent, encode

log = logging.getLogger("wardian.acp")

__all__ = ["Deferred", "Gone", "LineLost", "MethodNotFound", "NotSent", "Peer", "Pending", "RpcError"]

METHOD_NOT_FOUND = -32601

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Deferred:
    """What `on_request` returns for a request whose answer takes time (a person's approval): `answer` runs in a
    task of the reader's own, so the reader goes on routing meanwhile; its result is the request's answer."""

    answer: Callable[[], Awaitable[JsonObject]]


RequestHandler = Callable[[str, JsonObject], Awaitable["JsonObject | Deferred"]]
NotificationHandler = Callable[[str, JsonObject], None]


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


class Peer:
    """The JSON-RPC connection to one agent process (module docstring). Run `read` in a task; send with `request`,
    `call` and `notify`."""

    def __init__(self, name: str, stdin: anyio.abc.ByteSendStream, stdout: anyio.abc.ByteReceiveStream,
                 on_request: RequestHandler, on_notification: NotificationHandler) -> None:
        self._name = name
        self._writer = LineWriter(stdin, f"{name}'s agent")
        self._reader = LineReader(name, "the agent", stdout)
        self._on_request = on_request
        self._later: anyio.abc.TaskGroup | None = None
        self._on_notification = on_notification
        self._count = 0
        self._pending: dict[int, Pending] = {}
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

    @property
    def closed(self) -> bool:
        return self._writer.closed

    async def _send(self, message: JsonObject) -> None:
        if self.gone.is_set():
            raise NotSent(f"{self._name}'s agent has ended")
        await self._writer.send(encode(message))

    async def close(self) -> None:
        """Close the agent's input (an ACP agent exits at its end)."""
        await self._writer.close()

    async def read(self) -> None:
        """Read until the agent's output ends; then every waiter fails with `Gone`."""
        try:
            async with anyio.create_task_group() as later:
                self._later = later
                while (message := await self._reader.next()) is not None:
                    await self._route(message)
                later.cancel_scope.cancel()  # an answer still awaited can no longer reach the agent
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
            result = await self._on_request(method, params)
            if isinstance(result, Deferred):
                assert self._later is not None
                self._later.start_soon(self._answer_later, request_id, result)
                return
            reply: JsonObject = {"jsonrpc": "2.0", "id": request_id, "result": result}
        except MethodNotFound:
            reply = {"jsonrpc": "2.0", "id": request_id,
                     "error": {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"}}
        with contextlib.suppress(NotSent, LineLost):
            await self._send(reply)

    async def _answer_later(self, request_id: Any, deferred: Deferred) -> None:
        result = await deferred.answer()
        with contextlib.suppress(NotSent, LineLost):
            await self._send({"jsonrpc": "2.0", "id": request_id, "result": result})

