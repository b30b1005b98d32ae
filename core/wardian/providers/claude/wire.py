"""Claude Code's stream-json wire: the lines wardian writes to `claude -p --input-format stream-json` and the reader of
what it prints (`--output-format stream-json --verbose`), one JSON object per line each way.

One malformed input line ends the Claude Code process ("Error parsing streaming input line", exit 1), so every line
written here is built by `json.dumps` with `ensure_ascii=True`: a single line of ASCII (newlines and every non-ASCII
character escaped), which JSON-decodes to the exact text given. Each line is written whole, under a lock and
shielded from cancellation, so a cancelled writer never leaves half a line for the next one to complete.
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from wardian import errors

log = logging.getLogger("wardian.claude")

MAX_LINE_BYTES = 256 * 1024 * 1024
"""The longest stdout line read (a result or tool line carries whole texts; a task is at most 64 KiB)."""


class NotSent(Exception):
    """The line certainly did not reach Claude Code (its input was closed, or the process had already ended)."""


class LineLost(Exception):
    """Writing the line failed part-way: whether Claude Code read it is unknown."""


def encode(message: dict[str, Any]) -> bytes:
    """One input line: the object as single-line ASCII JSON, then a newline."""
    line = json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return line.encode("ascii") + b"\n"


def user_line(text: str, uuid: str, *, should_query: bool = True) -> bytes:
    """A user message under the uuid wardian chose (Claude Code keeps it as the transcript entry's uuid and answers
    with it in `command_lifecycle` and `user_message_uuids`). `should_query=False` adds it to the conversation
    without a model request (folded into a running turn like any message sent mid-turn)."""
    message: dict[str, Any] = {"type": "user", "message": {"role": "user", "content": text},
                               "parent_tool_use_id": None, "session_id": "", "uuid": uuid}
    if not should_query:
        message["shouldQuery"] = False
    return encode(message)


def control_line(request_id: str, request: dict[str, Any]) -> bytes:
    return encode({"type": "control_request", "request_id": request_id, "request": request})


def control_error(request_id: str, error: str) -> bytes:
    """The answer to a control request Claude Code sent that wardian does not serve (so it never waits on it)."""
    return encode({"type": "control_response", "response": {"subtype": "error", "request_id": request_id,
                                                            "error": error}})


class Controls:
    """The control requests wardian sent, each waiting for the `control_response` with its request id."""

    def __init__(self) -> None:
        self._count = 0
        self._waiting: dict[str, tuple[anyio.Event, list[dict[str, Any]]]] = {}

    def new(self, request: dict[str, Any]) -> tuple[str, bytes]:
        """A request id and the line asking `request` under it (then `wait` for its answer)."""
        self._count += 1
        request_id = f"wardian_{self._count}"
        self._waiting[request_id] = (anyio.Event(), [])
        return request_id, control_line(request_id, request)

    def answered(self, response: dict[str, Any]) -> None:
        waiter = self._waiting.get(str(response.get("request_id")))
        if waiter is not None:
            waiter[1].append(response)
            waiter[0].set()

    async def wait(self, request_id: str, subtype: str) -> dict[str, Any]:
        """The answer's `response`. Raises: ProviderError (refused, or the output ended first)."""
        done, answers = self._waiting[request_id]
        try:
            await done.wait()
        finally:
            del self._waiting[request_id]
        if not answers:
            raise errors.ProviderError(f"Claude Code ended before it answered {subtype}")
        if answers[0].get("subtype") != "success":
            raise errors.ProviderError(f"Claude Code refused {subtype}: {answers[0].get('error')}")
        return dict(answers[0].get("response") or {})

    def forget(self, request_id: str) -> None:
        self._waiting.pop(request_id, None)

    def end(self) -> None:
        """The output ended: no answer will come."""
        for done, _ in self._waiting.values():
            done.set()


class StdinWriter:
    """Writes whole lines to the process's input; closing it is the polite first step of a stop."""

    def __init__(self, stdin: anyio.abc.ByteSendStream) -> None:
        self._stdin = stdin
        # Uncontended, taking it yields nothing: a task's line leaves in the same loop step as its claim's COMMIT
        # (docs/benchmarks.md, `claude_admitted_to_message_queued`); contended, writers still queue in order.
        self._lock = anyio.Lock(fast_acquire=True)
        self.closed = False

    async def send(self, line: bytes) -> None:
        """Raises: NotSent (closed before any byte left), LineLost (failed part-way or after)."""
        async with self._lock:
            if self.closed:
                raise NotSent("Claude Code's input is closed")
            with anyio.CancelScope(shield=True):
                try:
                    await self._stdin.send(line)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self.closed = True
                    raise LineLost(type(exc).__name__) from None

    async def refuse(self, name: str, line: dict[str, Any]) -> None:
        """Answer a control request of Claude Code's with an error at once, so it never waits on wardian (none is
        expected: no permission prompt tool, no hooks)."""
        request = line.get("request") or {}
        log.warning("%s: Claude Code asked %r, which wardian does not serve", name, request.get("subtype"))
        with contextlib.suppress(NotSent, LineLost):
            await self.send(control_error(str(line.get("request_id")), "not served by wardian"))

    async def close(self) -> None:
        async with self._lock:
            self.closed = True
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(anyio.BrokenResourceError, OSError):
                    await self._stdin.aclose()


class StdoutReader:
    """Reads the process's output one JSON object at a time; a line that is not one is logged and skipped."""

    def __init__(self, name: str, stdout: anyio.abc.ByteReceiveStream) -> None:
        self._name = name
        self._stream = BufferedByteReceiveStream(stdout)

    async def next(self) -> dict[str, Any] | None:
        """The next object, or None at the end of the output."""
        while True:
            try:
                raw = await self._stream.receive_until(b"\n", MAX_LINE_BYTES)
            except (anyio.IncompleteRead, anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return None
            except anyio.DelimiterNotFound:
                log.error("%s: Claude Code printed a line over %d bytes; its output is no longer read", self._name,
                          MAX_LINE_BYTES)
                return None
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except ValueError:
                log.info("%s: Claude Code printed a line that is not JSON: %r", self._name, raw[:200])
                continue
            if isinstance(value, dict):
                return value
