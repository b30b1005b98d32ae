"""Pi's RPC mode as a transport (`pi --mode rpc`,
https://github.com/badlogic/pi-mono/blob/main/packages/coding-agent/docs/rpc.md): commands on stdin, each carrying an
`id`, are answered by a `response` line with the same id; everything else on stdout is an event of the session (no
id), or an `extension_ui_request` an extension made, which a dialog method (`confirm`, `select`, `input`, `editor`)
waits on until the client sends an `extension_ui_response` with its id.

Invariants:
- One reader: it routes each response to the one waiter of its id, each event to `on_event`, each dialog request to
  `on_dialog` (whose answer is written back at once, or later with `answer_dialog` when it returns None: a person
  deciding never holds up the reader). When the output ends, every waiter fails with `Gone`.
- Only commands Pi knows are sent: Pi answers an unknown one without its id, so no waiter would ever be woken.
- Lines are framed, written and read as every stdio provider's are (`wardian.providers.lines`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from wardian.providers.lines import LineLost, LineReader, LineWriter, NotSent, encode

log = logging.getLogger("wardian.pi")

__all__ = ["Gone", "LineLost", "NotSent", "Peer", "Pending", "Refused"]

JsonObject = dict[str, Any]
EventHandler = Callable[[JsonObject], None]
DialogHandler = Callable[[JsonObject], "JsonObject | None"]
IGNORED = (b'{"type":"message_update"', b'{"type":"tool_execution_update"')
"""The starts of the lines of Pi's streaming events, which the runtime never reads: each carries the whole message or
tool output so far, so they are dropped undecoded (`wardian.providers.lines`). Pi writes `type` first
(`JSON.stringify` of an object made with it first); were it not, the line is decoded and then ignored all the same."""
DIALOGS = ("select", "confirm", "input", "editor")
"""The `extension_ui_request` methods that wait for an answer (the others are fire-and-forget)."""


class Gone(Exception):
    """Pi's output ended before it answered."""


class Refused(Exception):
    """Pi answered a command with `success: false`; the message is Pi's `error`."""


@dataclass(eq=False)
class Pending:
    """A command sent: `result()` waits for its response."""

    command: str
    answered: anyio.Event = field(default_factory=anyio.Event)
    data: Any = None
    error: Refused | Gone | None = None

    def settle(self, data: Any, error: Refused | Gone | None) -> None:
        if not self.answered.is_set():
            self.data, self.error = data, error
            self.answered.set()

    async def result(self) -> Any:
        """The response's `data`. Raises: Refused, Gone."""
        await self.answered.wait()
        if self.error is not None:
            raise self.error
        return self.data


class Peer:
    """The RPC connection to one Pi process (module docstring). Run `read` in a task; send with `send`."""

    def __init__(self, name: str, stdin: anyio.abc.ByteSendStream, stdout: anyio.abc.ByteReceiveStream,
                 on_event: EventHandler, on_dialog: DialogHandler) -> None:
        self._name = name
        self._writer = LineWriter(stdin, "Pi")
        self._reader = LineReader(name, "Pi", stdout, ignore=IGNORED)
        self._on_event = on_event
        self._on_dialog = on_dialog
        self._count = 0
        self._pending: dict[str, Pending] = {}
        self.gone = anyio.Event()

    async def send(self, command: str, fields: JsonObject | None = None) -> Pending:
        """Send a command; its response arrives on the returned `Pending`. Raises: NotSent, LineLost."""
        if self.gone.is_set():
            raise NotSent(f"{self._name}'s Pi has ended")
        self._count += 1
        command_id = f"w{self._count}"
        pending = self._pending[command_id] = Pending(command)
        try:
            await self._writer.send(encode({"id": command_id, "type": command, **(fields or {})}))
        except NotSent:
            del self._pending[command_id]
            raise
        return pending

    async def call(self, command: str, fields: JsonObject | None, timeout_s: float) -> Any:
        """A command and its response's data. Raises: NotSent, LineLost, Refused, Gone, TimeoutError."""
        pending = await self.send(command, fields)
        with anyio.fail_after(timeout_s):
            return await pending.result()

    async def answer_dialog(self, request_id: str, answer: JsonObject) -> None:
        """Answer a dialog `on_dialog` left open (None), later; nothing when Pi has ended."""
        with contextlib.suppress(NotSent, LineLost):
            await self._writer.send(encode({"type": "extension_ui_response", "id": request_id, **answer}))

    async def close(self) -> None:
        """Close Pi's input (RPC mode exits at its end)."""
        await self._writer.close()

    async def read(self) -> None:
        """Read until Pi's output ends; then every waiter fails with `Gone`."""
        try:
            while (message := await self._reader.next()) is not None:
                await self._route(message)
        finally:
            self.gone.set()
            for pending in list(self._pending.values()):
                pending.settle(None, Gone(f"{self._name}'s Pi ended before it answered {pending.command}"))
            self._pending.clear()

    async def _route(self, message: JsonObject) -> None:
        kind = message.get("type")
        if kind == "response":
            command_id = message.get("id")
            pending = self._pending.pop(command_id, None) if isinstance(command_id, str) else None
            if pending is None:
                log.info("%s: a response to no command of ours: %r", self._name, str(message)[:200])
            elif message.get("success") is True:
                pending.settle(message.get("data"), None)
            else:
                pending.settle(None, Refused(str(message.get("error") or "refused")[:2000]))
            return
        if kind == "extension_ui_request":
            if message.get("method") in DIALOGS:
                answer = self._on_dialog(message)
                if answer is not None:
                    with contextlib.suppress(NotSent, LineLost):
                        await self._writer.send(encode({"type": "extension_ui_response", "id": message.get("id"),
                                                        **answer}))
            return
        self._on_event(message)
