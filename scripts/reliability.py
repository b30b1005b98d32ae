#!/usr/bin/env python3
"""Run the reliability suites (tests/reliability) at the matrix's [NIGHTLY] sizes and print a summary table.

    scripts/reliability.py              # nightly sizes, slow rows included (D1/D2 N=200, P1 2,000 x 60, D6, P2, ...)
    scripts/reliability.py --ci         # the [CI] sizes only (what `pytest -n auto` runs)
    scripts/reliability.py -- -k d1     # extra arguments after `--` go to pytest

Each scenario appends one JSON line (rounds, lost, duplicated, replayed, integrity failures, details) to a
report file; the table is built from those lines. The exit code is pytest's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("rounds", "lost", "duplicated", "replayed", "integrity_failures")


def table(rows: list[dict[str, object]]) -> str:
    head = ("row", *COLUMNS, "details")
    body = []
    for row in rows:
        details = ", ".join(f"{k}={v}" for k, v in row.items() if k not in (*COLUMNS, "row"))
        body.append((str(row["row"]), *(str(row.get(c, 0)) for c in COLUMNS), details))
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head) - 1)]
    lines = []
    for r in [head, *body]:
        cells = [r[i].ljust(widths[i]) if i == 0 else r[i].rjust(widths[i]) for i in range(len(widths))]
        lines.append("| " + " | ".join([*cells, r[-1]]) + " |")
        if r is head:
            lines.append("|" + "|".join("-" * (w + 2) for w in [*widths, 7]) + "|")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ci", action="store_true", help="the [CI] sizes only")
    parser.add_argument("--workers", default="2", help="pytest-xdist workers (default 2, this machine's cores)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wardian-reliability-") as tmp:
        report = Path(tmp) / "report.jsonl"
        env = {**os.environ, "WARDIAN_RELIABILITY_REPORT": str(report)}
        if not args.ci:
            env["WARDIAN_RELIABILITY_NIGHTLY"] = "1"
        cmd = [sys.executable, "-m", "pytest", "tests/reliability", "-n", args.workers, "-p", "no:cacheprovider",
               "-o", "timeout=3600", "-q", *args.pytest_args]
        started = time.monotonic()
        code = subprocess.call(cmd, cwd=ROOT, env=env)
        elapsed = time.monotonic() - started
        rows = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    rows.sort(key=lambda r: str(r["row"]))
    print()
    print(f"wardian reliability, {'CI' if args.ci else 'NIGHTLY'} sizes, {elapsed:.0f} s, pytest exit {code}")
    print(table(rows))
    bad = [r["row"] for r in rows if any(r.get(c, 0) for c in COLUMNS[1:])]
    if bad:
        print("rows with losses, duplicates, replays or integrity failures: " + ", ".join(map(str, bad)))
    return code


if __name__ == "__main__":
    sys.exit(main())
