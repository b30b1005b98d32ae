"""An opt-in timing record of the prompts written to Pi, for `scripts/bench.py --only pi` (docs/benchmarks.md):
when the app's environment sets `WARDIAN_PI_TIMINGS` to a file path, each turn's wall-clock times are appended to
that file when its run ends, one JSON object per turn:

    {"agent": NAME, "turn": TURN ID, "written_ns": ..., "acked_ns": ..., "started_ns": ..., "ended_ns": ...}

(`written_ns` just before the prompt's line is written, `acked_ns` when Pi's acknowledgement was read,
`started_ns` its `agent_start`, `ended_ns` its `agent_end`; 0 for a step not seen). It holds names, ids and clock
readings only (never a text or a credential), and changes nothing the runtime does: unset (the default), nothing is
kept and nothing is written.
"""

from __future__ import annotations

import json
import os
import time

ENV = "WARDIAN_PI_TIMINGS"
STEPS = ("written_ns", "acked_ns", "started_ns", "ended_ns")


class Timings:
    def __init__(self, name: str, path: str | None) -> None:
        self._name = name
        self._path = path or None
        self._turns: dict[str, dict[str, int]] = {}

    @classmethod
    def from_env(cls, name: str) -> Timings:
        return cls(name, os.environ.get(ENV))

    def mark(self, turn_id: str, step: str) -> None:
        """The turn reached `step` (one of `STEPS`) now; its first reading is kept."""
        if self._path is not None:
            self._turns.setdefault(turn_id, {}).setdefault(step, time.time_ns())

    def ended(self, turn_id: str) -> None:
        """The turn's run ended: append its record (a turn is kept only until then)."""
        if self._path is None or (steps := self._turns.pop(turn_id, None)) is None:
            return
        steps.setdefault("ended_ns", time.time_ns())
        record = {"agent": self._name, "turn": turn_id, **{step: steps.get(step, 0) for step in STEPS}}
        try:
            with open(self._path, "ab") as f:
                f.write(json.dumps(record).encode("utf-8") + b"\n")
        except OSError:
            self._path = None  # a bench aid: never a reason to disturb delivery
