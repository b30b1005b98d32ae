"""An opt-in timing record of an ACP agent's start and turns, for `scripts/bench.py --only acp`
(docs/benchmarks.md): when the app's environment sets `WARDIAN_ACP_TIMINGS` to a file path, one JSON object per
start and per turn is appended to that file (`wardian.providers.timings`):

    {"agent": NAME, "kind": "start", "spawn_ns": ..., "initialized_ns": ..., "session_ns": ..., "mcp_ns": ...}
    {"agent": NAME, "kind": "turn", "turn": TURN ID, "written_ns": ..., "answered_ns": ...}

A start: just before the process is spawned, `initialize` answered, the session (`session/new` or `session/load`)
answered, wardian's MCP server announced (`session/announce`; the start's end). A turn: just before its
`session/prompt` line is written, and when its answer (the `stopReason`) was read.
"""

from __future__ import annotations

import os

from wardian.providers.timings import StepTimings

ENV = "WARDIAN_ACP_TIMINGS"
START_STEPS = ("spawn_ns", "initialized_ns", "session_ns", "mcp_ns")
TURN_STEPS = ("written_ns", "answered_ns")
START = "start"
"""The key of the start's steps (a turn's key is its id, `turn_…`)."""


class Timings(StepTimings):
    @classmethod
    def from_env(cls, name: str) -> Timings:
        return cls(name, os.environ.get(ENV))

    def started(self) -> None:
        """The start's last step: append its record."""
        self.record(START, START_STEPS, kind="start")

    def answered(self, turn_id: str) -> None:
        """The turn's answer was read: append its record."""
        self.record(turn_id, TURN_STEPS, kind="turn", turn=turn_id)
