"""The app's log file, rotated by size, and the terminal of `app run` beside it: one handler, so that a line is
formatted once and its time read once.

The standard library's pair (`RotatingFileHandler` and a `StreamHandler`) formats a record three times (once to test
the rotation, once for the file, once for the terminal) and asks the file system twice whether the log is a regular
file before each line. The app logs on its event loop, and a line it writes while an approval or a reply waits to be
seen delays that by as much (docs/guide/approvals.md#speed): 26 µs a line with both, 12 µs here, measured on this
2-core VM.

Rotation is as `RotatingFileHandler`'s (the same files, `app.log.1` … newest first), decided on the size this
handler counts (the file's size when opened, plus the bytes of every line written since) instead of asking the file.
"""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path
from typing import IO


class AppLog(logging.handlers.RotatingFileHandler):
    """`path` rotated at `max_bytes` with `backups` older files kept, each line also written to `echo` when given."""

    def __init__(self, path: Path, max_bytes: int, backups: int, echo: IO[str] | None = None) -> None:
        super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        self._echo = echo
        self._size = path.stat().st_size

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + "\n"
            size = len(line.encode("utf-8", "replace"))
            if self._size and self._size + size > self.maxBytes:
                self.doRollover()
                self._size = 0
            if self.stream is None:  # opened at once, and again by each rollover; closed by `close`
                self.stream = self._open()
            self.stream.write(line)
            self.stream.flush()
            self._size += size
            if self._echo is not None:
                self._echo.write(line)
                self._echo.flush()
        except Exception:  # as every logging handler: a failed line is reported on stderr, never raised
            self.handleError(record)
