"""What a script holds: the steps that answer model requests, and the constants the dialects share."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from wardian_harness.models.scripted_model.requests import RecordedRequest

JsonDict: TypeAlias = dict[str, Any]
Phase: TypeAlias = Literal["commentary", "final_answer"]
HoldOutcome: TypeAlias = Literal["released", "disconnected", "timed_out", "shutdown"]

EXHAUSTED_TEXT = "script exhausted"
TITLE_PROMPT = "Generate a concise, single-line task title"
"""Codex asks for a thread title (a helper thread) on a TUI's first message; such requests consume no step."""
TITLE_TEXT = "Scripted task"
"""The assistant text sent when an agent's script has no step left for a request."""
CHAT_TITLE_PROMPT = "You are a title generator"
"""OpenCode's title helper (its system prompt) for a session created without a title; consumes no step."""


class ScriptedModelError(AssertionError):
    """A script or the server misbehaved (a step raised, an unknown agent was addressed, a body was unreadable)."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("the scripted model recorded errors:\n" + "\n---\n".join(errors))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class Message:
    """One assistant message; `phase` passes through to Codex's agentMessage item."""

    text: str
    phase: Phase | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call in namespace form: Codex runs MCP tool `name` of server `namespace[len("mcp__"):]`."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    namespace: str | None = "mcp__wardian"
    call_id: str | None = None  # generated (unique per server) when None


@dataclass(frozen=True, slots=True)
class Usage:
    """What a response says it cost, which each dialect reports in its own words: `input` tokens read, of which
    `cached` came from a prompt cache, and `output` tokens written."""

    input: int = 10
    output: int = 5
    cached: int = 0


DEFAULT_USAGE = Usage()
"""The usage of every response whose step names none (a plain Message or ToolCall, a Hold, a side request)."""


@dataclass(frozen=True, slots=True)
class Response:
    """Several output items in one response, streamed in order, reporting `usage`."""

    items: Sequence[Message | ToolCall]
    usage: Usage = DEFAULT_USAGE


@dataclass(frozen=True, slots=True)
class Fail:
    """A `response.failed` event instead of `response.completed`."""

    message: str = "scripted failure"
    code: str = "server_error"


@dataclass(frozen=True, slots=True)
class Disconnect:
    """End the stream before `response.completed`, optionally after a partial assistant message delta."""

    partial_text: str | None = None


@dataclass(frozen=True, slots=True)
class HttpError:
    """Answer with a non-streaming HTTP error (Codex maps 500 to `internalServerError`)."""

    status: int = 500
    message: str = "scripted http error"


class Hold:
    """Stream `delta` as the start of a message, then block until released, disconnected, stopped or timed out.

    After `release()` the message is completed with `text` (default: `delta`) and the response completes
    normally. The handler thread watches the connection while it waits, so a client that cancels the stream
    ends the hold at once with outcome "disconnected".
    """

    def __init__(self, delta: str = "working", *, text: str | None = None, phase: Phase | None = None,
                 timeout_s: float = 60.0) -> None:
        self.delta = delta
        self.text = delta if text is None else text
        self.phase: Phase | None = phase
        self.timeout_s = timeout_s
        self.request: RecordedRequest | None = None
        self.outcome: HoldOutcome | None = None
        self._started = threading.Event()
        self._finished = threading.Event()
        self._lock = threading.Lock()
        self._claimed = False
        self._stop: HoldOutcome | None = None
        # A socketpair wakes the handler's select() on release or shutdown, next to the client socket.
        self._wake_r, self._wake_w = socket.socketpair()

    def __repr__(self) -> str:
        return f"Hold(delta={self.delta!r})"

    @property
    def started(self) -> bool:
        """Whether a request has reached this hold and its delta was sent."""
        return self._started.is_set()

    def wait_started(self, timeout_s: float = 30.0) -> RecordedRequest:
        """Block until a request is being held and return it.

        Raises:
            TimeoutError: no request reached the hold within `timeout_s`.
        """
        if not self._started.wait(timeout_s):
            raise TimeoutError(f"no model request reached {self!r} within {timeout_s}s")
        assert self.request is not None
        return self.request

    def release(self) -> None:
        """Let the held response complete (no effect once the hold has ended)."""
        self._signal("released")

    def wait_finished(self, timeout_s: float = 30.0) -> HoldOutcome:
        """Block until the held response has ended and return how it ended.

        Raises:
            TimeoutError: the hold did not end within `timeout_s`.
        """
        if not self._finished.wait(timeout_s):
            raise TimeoutError(f"{self!r} did not end within {timeout_s}s")
        assert self.outcome is not None
        return self.outcome

    def _signal(self, outcome: HoldOutcome) -> None:
        with self._lock:
            if self._stop is None:
                self._stop = outcome
        with contextlib.suppress(OSError):  # already closed: the hold has ended
            self._wake_w.send(b"x")

    def _claim(self) -> None:
        with self._lock:
            if self._claimed:
                raise RuntimeError(f"{self!r} was used by a second request; a Hold is single-use")
            self._claimed = True

    def _wait(self, conn: socket.socket) -> HoldOutcome:
        deadline = time.monotonic() + self.timeout_s
        watch: list[socket.socket] = [conn, self._wake_r]
        while True:
            with self._lock:
                if self._stop is not None:
                    return self._stop
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timed_out"
            readable, _, _ = select.select(watch, [], [], remaining)
            if self._wake_r in readable:
                self._wake_r.recv(64)
                continue  # a release or shutdown wins over a disconnect seen in the same wake-up
            if conn in readable:
                try:
                    peeked = conn.recv(1, socket.MSG_PEEK)
                except OSError:
                    return "disconnected"
                if not peeked:
                    return "disconnected"
                watch = [self._wake_r]  # the client pipelined bytes; stop watching rather than spin

    def _finish(self, outcome: HoldOutcome) -> None:
        self.outcome = outcome
        self._wake_r.close()
        self._wake_w.close()
        self._finished.set()


Step: TypeAlias = "Message | Response | ToolCall | Fail | Disconnect | HttpError | Hold | Callable[[JsonDict], Step]"
"""One scripted answer to one model request (see the package docstring)."""
