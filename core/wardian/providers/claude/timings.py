"""An opt-in timing record of the messages written to Claude Code, for `scripts/bench.py --only claude`
(docs/benchmarks.md): when the app's environment sets `WARDIAN_CLAUDE_TIMINGS` to a file path, each message's
wall-clock time just before its line is written and when its `command_lifecycle` `queued` was read are appended to
that file, one JSON object per acknowledged message:

    {"agent": NAME, "uuid": MESSAGE UUID, "written_ns": ..., "queued_ns": ...}

It holds names, uuids and clock readings only (never a text or a credential), and changes nothing the runtime does:
unset (the default), nothing is kept and nothing is written.
"""

from __future__ import annotations

import json
import os
import time

ENV = "WARDIAN_CLAUDE_TIMINGS"


class Timings:
    def __init__(self, name: str, path: str | None) -> None:
        self._name = name
        self._path = path or None
        self._written: dict[str, int] = {}

    @classmethod
    def from_env(cls, name: str) -> Timings:
        return cls(name, os.environ.get(ENV))

    def written(self, uuid: str) -> None:
        """The message's line is about to be written."""
        if self._path is not None:
            self._written[uuid] = time.time_ns()

    def queued(self, uuid: str) -> None:
        """Claude Code's `queued` for the message was read: append its record (a message written before is kept
        only until then)."""
        if self._path is None or (written := self._written.pop(uuid, None)) is None:
            return
        record = {"agent": self._name, "uuid": uuid, "written_ns": written, "queued_ns": time.time_ns()}
        try:
            with open(self._path, "ab") as f:
                f.write(json.dumps(record).encode("utf-8") + b"\n")
        except OSError:
            self._path = None  # a bench aid: never a reason to disturb delivery
