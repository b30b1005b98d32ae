"""One JSON object per line over a child's stdin and stdout: the wire of every provider that speaks through its
process's standard streams (Claude Code's stream-json, the Agent Client Protocol's stdio transport).

Invariants, the same for each such provider:
- Every line written is `json.dumps(ensure_ascii=True)`: one line of ASCII (newlines and every non-ASCII character
  escaped) that JSON-decodes to the exact text given. One malformed input line can end the process (Claude Code:
  "Error parsing streaming input line", exit 1).
- A line is written whole, under a lock and shielded from cancellation, so a cancelled writer never leaves half a
  line for the next one to complete. `NotSent` means no byte of it left (the input was closed before);
  `LineLost` means the write failed part-way or after, and whether the process read it is unknown. The difference
  decides between a definite "not delivered" and an uncertain delivery (docs/reliability.md).
- The reader returns one JSON object at a time; a line that is not one is logged and skipped; an over-long line
  ends the reading (the rest of the stream cannot be framed). A line that starts with one of the reader's `ignore`
  prefixes is dropped undecoded: a provider's streaming events its runtime never reads (Pi's `message_update` carries
  the whole message so far with every delta, so decoding them all costs the event loop time quadratic in the
  answer's length: 63 ms for a 2,000-delta answer on this 2-core VM, against 0.7 ms to test the prefixes).
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

log = logging.getLogger("wardian.providers.lines")

MAX_LINE_BYTES = 256 * 1024 * 1024
"""The longest line read (a result, a tool's output or a replayed history carries whole texts; a task is at most
64 KiB)."""


class NotSent(Exception):
    """No byte of the line left: the process's input was closed, or the process had already ended."""


class LineLost(Exception):
    """Writing the line failed part-way or after: whether the process read it is unknown."""


def encode(message: dict[str, Any]) -> bytes:
    """One input line: the object as single-line ASCII JSON, then a newline."""
    return json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"


class LineWriter:
    """Writes whole lines to the process's input; closing it is the polite first step of a stop. `peer` names the
    process in errors ("Claude Code")."""

    def __init__(self, stdin: anyio.abc.ByteSendStream, peer: str) -> None:
        self._stdin = stdin
        self._peer = peer
        # Uncontended, taking it yields nothing: a task's line leaves in the same loop step as its claim's COMMIT
        # (docs/benchmarks.md, `claude_admitted_to_message_queued`); contended, writers still queue in order.
        self._lock = anyio.Lock(fast_acquire=True)
        self.closed = False

    async def send(self, line: bytes) -> None:
        """Raises: NotSent (closed before any byte left), LineLost (failed part-way or after)."""
        async with self._lock:
            if self.closed:
                raise NotSent(f"the input of {self._peer} is closed")
            with anyio.CancelScope(shield=True):
                try:
                    await self._stdin.send(line)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self.closed = True
                    raise LineLost(type(exc).__name__) from None

    async def close(self) -> None:
        async with self._lock:
            self.closed = True
            with anyio.CancelScope(shield=True), contextlib.suppress(anyio.BrokenResourceError, OSError):
                await self._stdin.aclose()


class LineReader:
    """Reads the process's output one JSON object at a time. `name` is the agent's (for the log), `peer` names the
    process ("Claude Code")."""

    def __init__(self, name: str, peer: str, stdout: anyio.abc.ByteReceiveStream,
                 ignore: tuple[bytes, ...] = ()) -> None:
        self._name = name
        self._peer = peer
        self._stream = BufferedByteReceiveStream(stdout)
        self._ignore = ignore

    async def next(self) -> dict[str, Any] | None:
        """The next object, or None at the end of the output."""
        while True:
            try:
                raw = await self._stream.receive_until(b"\n", MAX_LINE_BYTES)
            except (anyio.IncompleteRead, anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return None
            except anyio.DelimiterNotFound:
                log.error("%s: %s printed a line over %d bytes; its output is no longer read", self._name,
                          self._peer, MAX_LINE_BYTES)
                return None
            if not raw.strip() or (self._ignore and raw.startswith(self._ignore)):
                continue
            try:
                value = json.loads(raw)
            except ValueError:
                log.info("%s: %s printed a line that is not JSON: %r", self._name, self._peer, raw[:200])
                continue
            if isinstance(value, dict):
                return value
