"""The checks of a task's deadline: `deadline_ms` as the protocol takes it, and the one reading of a duration (`10m`,
`1h30m`) that `wardian message task --deadline` and the team file's `task_deadline` share (docs/guide/teams.md)."""

from __future__ import annotations

import re

from wardian import errors

# Stdlib and `errors` only: `wardian message task --deadline` parses here, and a CLI command's cold start imports
# nothing more (tests/cli/test_cold_start.py).

# A deadline shorter than a second is below what one dispatch and one turn's start take; one over a week is a task
# nobody is waiting for. Both are refused as the caller's mistake.
MIN_DEADLINE_MS = 1_000
MAX_DEADLINE_MS = 7 * 24 * 3600 * 1000
DEADLINE_ALLOWED = f"an integer {MIN_DEADLINE_MS}..{MAX_DEADLINE_MS} (milliseconds: 1 second to 7 days), or null"
DURATION_ALLOWED = "a duration of 1s..7d, as digits and a unit (ms, s, m, h, d), e.g. 90s, 10m, 1h30m"
# A duration as `parse_duration` reads it and the team file's schema states it.
DURATION_PATTERN = r"^\s*(?:\d{1,9}(?:ms|s|m|h|d)\s*)+$"

_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d{1,9})(ms|s|m|h|d)")
_WHOLE = re.compile(DURATION_PATTERN)


def check_deadline_ms(value: int | None, field: str = "deadline_ms") -> int | None:
    """`value` when it is a deadline wardian keeps (None: none).

    Raises:
        InvalidArguments: not an integer of MIN_DEADLINE_MS..MAX_DEADLINE_MS.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_DEADLINE_MS <= value <= MAX_DEADLINE_MS:
        raise errors.InvalidArguments(f"{field} must be {MIN_DEADLINE_MS}..{MAX_DEADLINE_MS} milliseconds, not "
                                      f"{str(value)[:40]}", field=field, allowed=DEADLINE_ALLOWED)
    return value


def parse_duration(text: str, field: str = "deadline") -> int:
    """Milliseconds of a duration such as `90s`, `10m` or `1h30m` (each part digits and a unit), 1s..7d.

    Raises:
        InvalidArguments: not such a duration, or outside 1s..7d.
    """
    if not _WHOLE.match(text):
        raise errors.InvalidArguments(f"{field} {text[:40]!r} is not a duration", field=field,
                                      allowed=DURATION_ALLOWED)
    total = sum(int(n) * _UNITS_MS[unit] for n, unit in _PART.findall(text))
    if not MIN_DEADLINE_MS <= total <= MAX_DEADLINE_MS:
        raise errors.InvalidArguments(f"{field} {text[:40]!r} is outside 1s..7d", field=field,
                                      allowed=DURATION_ALLOWED)
    return total


def duration_text(ms: int) -> str:
    """A duration as `parse_duration` reads it, largest units first (`5400000` -> `1h30m`), for what a person reads
    back (`wardian status`)."""
    parts = []
    for unit in ("d", "h", "m", "s", "ms"):
        count, ms = divmod(ms, _UNITS_MS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
