"""An opt-in timing record of the prompts written to Pi, for `scripts/bench.py --only pi` (docs/benchmarks.md):
when the app's environment sets `WARDIAN_PI_TIMINGS` to a file path, each turn's wall-clock times are appended to
that file when its run ends, one JSON object per turn (`wardian.providers.timings`):

    {"agent": NAME, "turn": TURN ID, "written_ns": ..., "acked_ns": ..., "started_ns": ..., "ended_ns": ...}

(`written_ns` just before the prompt's line is written, `acked_ns` when Pi's acknowledgement was read,
`started_ns` its `agent_start`, `ended_ns` its `agent_end`; 0 for a step not seen).
"""

from __future__ import annotations

import os

from wardian.providers.timings import StepTimings

ENV = "WARDIAN_PI_TIMINGS"
STEPS = ("written_ns", "acked_ns", "started_ns", "ended_ns")


class Timings(StepTimings):
    @classmethod
    def from_env(cls, name: str) -> Timings:
        return cls(name, os.environ.get(ENV))

    def ended(self, turn_id: str) -> None:
        """The turn's run ended: append its record (a turn is kept only until then)."""
        self.record(turn_id, STEPS, turn=turn_id)
