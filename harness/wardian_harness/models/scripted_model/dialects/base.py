"""The interface every wire dialect implements, and what the dialects share: the chunked Server-Sent Events writer
and the life of a held response.

A dialect turns one scripted step into its API's answer on one HTTP exchange (`Wire`), and reads its API's request
bodies (the tool results sent back, the tools offered). The HTTP server knows dialects only through this interface,
so a further API (for example Anthropic's Messages) is one more module beside `responses` and `chat`.
"""

from __future__ import annotations

import json
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from wardian_harness.models.scripted_model.reading import FunctionCallOutput
from wardian_harness.models.scripted_model.steps import Hold, HoldOutcome, JsonDict, Step

if TYPE_CHECKING:
    from wardian_harness.models.scripted_model.requests import RecordedRequest


class Wire(Protocol):
    """The HTTP exchange a dialect answers on (the server's request handler)."""

    close_connection: bool

    @property
    def connection(self) -> socket.socket: ...

    def send_bytes(self, data: bytes) -> bool:
        """Write and flush `data`; False once the client has gone away (then the connection is closed after)."""
        ...

    def send_json_error(self, status: int, message: str) -> None:
        """A non-streaming HTTP error with a JSON body."""
        ...

    def send_json(self, status: int, payload: JsonDict) -> None:
        """A non-streaming answer with `payload` as its JSON body."""
        ...

    def start_stream(self) -> None:
        """Status 200 and the headers of a chunked event stream."""
        ...

    def next_id(self) -> int:
        """A number unique on this server, for response, item and call ids."""
        ...

    def holding(self, hold: Hold, *, add: bool) -> None:
        """Track a hold in progress, so stopping the server ends it."""
        ...


class Dialect(ABC):
    """One model API's wire form: the path it is served at and how it answers and reads requests."""

    path: tuple[str, ...]
    """The path under `/agents/<name>/` (e.g. `("v1", "responses")`)."""
    side_paths: tuple[tuple[str, ...], ...] = ()
    """Further paths served (e.g. Messages' `count_tokens`): only `side` answers them."""

    def serves(self, path: Sequence[str]) -> bool:
        """Whether the dialect answers at `path` (the parts after `/agents/<name>/`)."""
        return tuple(path) == self.path or tuple(path) in self.side_paths

    @abstractmethod
    def owns(self, body: Mapping[str, Any]) -> bool:
        """Whether a request body is of this dialect (the readers dispatch on the body alone)."""

    def side(self, wire: Wire, path: Sequence[str], body: Mapping[str, Any]) -> bool:
        """Answer a request that is not the conversation (no step is taken, nothing is logged as a request); False
        when `body` at `path` is a conversation request for `answer`."""
        return False

    def before(self, step: Step, body: Mapping[str, Any]) -> Step | None:
        """A step a real model would answer with before `step` (Messages: loading a deferred tool through
        ToolSearch); `step` then stays first in the script. None: answer with `step`."""
        return None

    @abstractmethod
    def answer(self, wire: Wire, step: Step, recorded: RecordedRequest) -> None:
        """Answer one request with `step` (never a callable: the server has resolved it)."""

    @abstractmethod
    def tool_outputs(self, body: Mapping[str, Any]) -> list[FunctionCallOutput]:
        """Every tool result in the request, in order, named after its matching call."""

    @abstractmethod
    def offered_tools(self, body: Mapping[str, Any], namespace: str) -> dict[str, JsonDict]:
        """The function tools offered inside MCP namespace `namespace`, by tool name."""


class SseStream:
    """Writes one event-stream response with chunked transfer encoding; tolerates a client that has gone away."""

    def __init__(self, wire: Wire, response_id: str) -> None:
        self._wire = wire
        self.response_id = response_id
        self.closed = False

    def end(self) -> None:
        self.write(b"0\r\n\r\n")

    def data(self, text: str) -> None:
        """One chunk holding `text` (a complete SSE block, its blank line included)."""
        if self.closed:
            return
        data = text.encode()
        self.write(b"%x\r\n%s\r\n" % (len(data), data))

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if not self._wire.send_bytes(data):
            self.closed = True


def begin(wire: Wire, step: Step) -> int:
    """The common start of a streamed answer: claim a hold (single use), send the stream's headers; returns the
    answer's number."""
    if isinstance(step, Hold):
        step._claim()
    wire.start_stream()
    return wire.next_id()


def run_hold(wire: Wire, stream: SseStream, hold: Hold, recorded: RecordedRequest, *,
             released: Callable[[], None], timed_out: Callable[[], None]) -> None:
    """Block on `hold` (its delta already streamed) until it is released, the client goes, the server stops or it
    times out; then finish the answer the dialect's way (`released`, `timed_out`) or drop the connection."""
    hold.request = recorded
    wire.holding(hold, add=True)
    hold._started.set()
    outcome: HoldOutcome = "disconnected"
    try:
        outcome = "disconnected" if stream.closed else hold._wait(wire.connection)
        if outcome == "released":
            released()
        elif outcome == "timed_out":
            timed_out()
        else:
            wire.close_connection = True
    finally:
        wire.holding(hold, add=False)
        hold._finish(outcome)


def arguments_text(arguments: Mapping[str, Any] | str) -> str:
    """A tool call's arguments as the JSON string both dialects carry."""
    return arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
