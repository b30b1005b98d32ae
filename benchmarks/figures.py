"""Percentiles, the JSON lines on stdout and the progress on stderr."""

from __future__ import annotations

import statistics
import sys
from typing import Any

import orjson


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def emit(metric: str, **fields: Any) -> None:
    sys.stdout.write(orjson.dumps({"metric": metric, **fields}).decode("utf-8") + "\n")
    sys.stdout.flush()


def pct(samples: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 4)


def median_pct(rounds: list[list[float]], q: float) -> float:
    """The median over rounds of each round's q-quantile, in ms."""
    return ms(statistics.median(pct(r, q) for r in rounds))


def latency_fields(rounds: list[list[float]]) -> dict[str, Any]:
    """p50/p99 as the median over rounds, with the [min, max] range of the rounds."""
    p50s = [pct(r, 0.50) for r in rounds]
    p99s = [pct(r, 0.99) for r in rounds]
    out: dict[str, Any] = {"p50_ms": ms(statistics.median(p50s)), "p99_ms": ms(statistics.median(p99s)),
                           "n": sum(len(r) for r in rounds), "rounds": len(rounds)}
    if len(rounds) > 1:
        out["p50_range_ms"] = [ms(min(p50s)), ms(max(p50s))]
        out["p99_range_ms"] = [ms(min(p99s)), ms(max(p99s))]
    return out
