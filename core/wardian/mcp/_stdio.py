"""The stdio byte stream of `wardian mcp serve`: its private descriptors, whole-line writes, and lines read (no `mcp`
import).

Invariants:
- Nothing but protocol reaches the real stdout: at startup fd 1 is duplicated for the transport and then pointed at
  stderr, so a stray `print` or a chatty import cannot corrupt the stream (the MCP stdio transport allows only
  protocol messages on stdout). fd 0 is pointed at /dev/null for the same reason.
- Lines are written whole, under one lock, whichever thread answers.
- Reading is bounded in memory and linear in time, whatever the read sizes: a line over MAX_MCP_FRAME_BYTES is
  cut to one byte over the cap (so `_frames` refuses it as too long) and the rest of it is skipped.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from wardian.protocol.tools import MAX_MCP_FRAME_BYTES

log = logging.getLogger("wardian.mcp")

READ_CHUNK = 1 << 16


class StdioFds:
    """The private duplicates of fd 0 and fd 1 that carry the protocol once the real ones are diverted."""

    def __init__(self) -> None:
        self.stdin = os.dup(0)
        self.stdout = os.dup(1)
        self._write_lock = threading.Lock()
        # Stray writes to fd 1 (print, C extensions, children) now land on stderr; reads of fd 0 get EOF.
        os.dup2(2, 1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)

    def write(self, data: bytes) -> None:
        """Write whole lines: two threads answer, and a pipe write over PIPE_BUF bytes may be split."""
        with self._write_lock:
            view = memoryview(data)
            while view:
                written = os.write(self.stdout, view)
                view = view[written:]


class LineSplitter:
    """Splits the stdin byte stream into lines, whatever the read sizes.

    A line longer than MAX_MCP_FRAME_BYTES comes out truncated to one byte over the cap (so it is answered as
    too long) and the rest of it is skipped up to its newline, keeping memory bounded.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._scanned = 0  # bytes of `_buf` known to hold no newline
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines `chunk` completes, in order."""
        buf = self._buf
        buf += chunk
        lines: list[bytes] = []
        while True:
            # Only the new bytes are searched: a long line read in small pieces must not cost quadratic time.
            nl = buf.find(b"\n", self._scanned)
            self._scanned = 0 if nl >= 0 else len(buf)
            if self._skipping:
                if nl < 0:
                    buf.clear()
                    self._scanned = 0
                    break
                del buf[:nl + 1]
                self._skipping = False
                continue
            if nl < 0:
                if len(buf) > MAX_MCP_FRAME_BYTES:
                    lines.append(bytes(buf[:MAX_MCP_FRAME_BYTES + 1]))
                    buf.clear()
                    self._scanned = 0
                    self._skipping = True
                break
            lines.append(bytes(buf[:nl]))
            del buf[:nl + 1]
        return lines

    def end(self) -> list[bytes]:
        """At EOF: the last line, if it had no newline."""
        rest = [] if self._skipping or not self._buf else [bytes(self._buf)]
        self._buf.clear()
        self._scanned = 0
        return rest


def read_lines(fd: int, deliver: Callable[[bytes], None]) -> None:
    """Read lines from `fd` and deliver each, until EOF (see `LineSplitter`)."""
    lines = LineSplitter()
    try:
        while chunk := os.read(fd, READ_CHUNK):
            for line in lines.feed(chunk):
                deliver(line)
        for line in lines.end():
            deliver(line)
    except OSError:
        log.exception("the stdio transport failed")
