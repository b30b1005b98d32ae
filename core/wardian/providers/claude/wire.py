"""Claude Code's stream-json wire: the lines wardian writes to `claude -p --input-format stream-json` and the reader of
what it prints (`--output-format stream-json --verbose`), one JSON object per line each way.

How lines are framed, written and read is shared with every provider that speaks over its process's standard streams
(`wardian.providers.lines`): one malformed input line ends the Claude Code process ("Error parsing streaming input
line", exit 1), so every line is single-line ASCII JSON, written whole.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import anyio
import anyio.abc

from wardian import errors
from wardian.providers.lines import LineLost, LineReader, LineWriter, NotSent, encode

log = logging.getLogger("wardian.claude")

__all__ = ["Controls", "LineLost", "NotSent", "StdinWriter", "StdoutReader", "encode", "user_line"]


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


class StdinWriter(LineWriter):
    """Writes whole lines to Claude Code's input (`lines.LineWriter`), and refuses its control requests."""

    def __init__(self, stdin: anyio.abc.ByteSendStream) -> None:
        super().__init__(stdin, "Claude Code")

    async def refuse(self, name: str, line: dict[str, Any]) -> None:
        """Answer a control request of Claude Code's with an error at once, so it never waits on wardian (none is
        expected: no permission prompt tool, no hooks)."""
        request = line.get("request") or {}
        log.warning("%s: Claude Code asked %r, which wardian does not serve", name, request.get("subtype"))
        with contextlib.suppress(NotSent, LineLost):
            await self.send(control_error(str(line.get("request_id")), "not served by wardian"))


class StdoutReader(LineReader):
    """Reads Claude Code's output one JSON object at a time (`lines.LineReader`)."""

    def __init__(self, name: str, stdout: anyio.abc.ByteReceiveStream) -> None:
        super().__init__(name, "Claude Code", stdout)
