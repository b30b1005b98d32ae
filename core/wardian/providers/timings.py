"""An opt-in timing record of a provider's steps, for `scripts/bench.py` (docs/benchmarks.md): when the app's
environment sets the provider's variable (`WARDIAN_PI_TIMINGS`, `WARDIAN_ACP_TIMINGS`) to a file path, the
wall-clock time of each step of one key (a turn, an agent's start) is kept, and appended to that file as one JSON
object when its last step is reached:

    {"agent": NAME, ...the caller's fields, STEP: ns, ...}   (0 for a step not seen)

It holds names, ids and clock readings only (never a text or a credential), and changes nothing the runtime does:
unset (the default), nothing is kept and nothing is written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence


class StepTimings:
    def __init__(self, name: str, path: str | None) -> None:
        self._name = name
        self._path = path or None
        self._keys: dict[str, dict[str, int]] = {}

    def mark(self, key: str, step: str) -> None:
        """`key` reached `step` now; its first reading is kept."""
        if self._path is not None:
            self._keys.setdefault(key, {}).setdefault(step, time.time_ns())

    def record(self, key: str, steps: Sequence[str], **fields: str) -> None:
        """`key` reached its last step (`steps[-1]`, now unless marked before): append its record (a key is kept
        only until then; one never marked writes nothing)."""
        if self._path is None or (marks := self._keys.pop(key, None)) is None:
            return
        marks.setdefault(steps[-1], time.time_ns())
        line = {"agent": self._name, **fields, **{step: marks.get(step, 0) for step in steps}}
        try:
            with open(self._path, "ab") as f:
                f.write(json.dumps(line).encode("utf-8") + b"\n")
        except OSError:
            self._path = None  # a bench aid: never a reason to disturb delivery
