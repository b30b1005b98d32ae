"""What every command prints: results (as text or `--json`) on stdout, errors on stderr."""

from __future__ import annotations

import sys

from wardian import errors

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def dump(value: Any) -> str:
    import orjson  # only for --json: its import is a large part of a cold start (docs/benchmarks.md)

    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode("utf-8")


def out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def print_error(exc: errors.WardianError, as_json: bool) -> None:
    """The error as the app reported it: its wire form on stdout with `--json`, always a line on stderr."""
    if as_json:
        out(dump({"error": exc.to_data()}))
    allowed = f" (allowed: {exc.allowed})" if exc.allowed else ""
    sys.stderr.write(f"wardian: {exc.code}: {exc.message}{allowed}\n")
    candidates = exc.details.get("candidates")
    if candidates:
        sys.stderr.write("candidates: " + ", ".join(candidates) + "\n")
