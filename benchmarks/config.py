"""The sizes of a run (full or `--quick`) and what every subject shares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEXT = "benchmark message: " + "x" * 280  # ~300 bytes: a typical agent-to-agent message


@dataclass(frozen=True)
class Config:
    rounds: int
    roundtrips: int
    wakes: int
    send_seconds: float
    records: int
    receives: int
    cold_runs: int
    mcp_spawns: int
    mcp_calls: int


FULL = Config(rounds=3, roundtrips=3000, wakes=200, send_seconds=4.0, records=1_000_000, receives=300,
              cold_runs=30, mcp_spawns=15, mcp_calls=300)
QUICK = Config(rounds=1, roundtrips=500, wakes=50, send_seconds=1.0, records=100_000, receives=100,
               cold_runs=20, mcp_spawns=4, mcp_calls=50)
