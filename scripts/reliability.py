#!/usr/bin/env python3
"""Run the reliability suites (tests/reliability) at the [NIGHTLY] sizes of docs/reliability.md and print a summary
table.

    scripts/reliability.py              # nightly sizes, slow rows included (D1/D2 N=200, P1 2,000 x 60, D6, P2, ...)
    scripts/reliability.py --ci         # the [CI] sizes only (what `pytest -n auto` runs)
    scripts/reliability.py -- -k d1     # extra arguments after `--` go to pytest (P3 then runs only if asked)
    scripts/reliability.py --fuzz-seconds 120   # a shorter P3

Each scenario appends one JSON line (rounds, lost, duplicated, replayed, integrity failures, details) to a
report file; the table is built from those lines. The nightly run then fuzzes the MCP server's stdio frames
(row P3, scripts/fuzz_mcp_frames.py) for --fuzz-seconds (default 600): rounds are executions, integrity failures
are crashes (a failed criterion, a timeout or running out of memory), whose inputs are kept and named. Atheris is
the optional extra `fuzz`: it is installed on demand (`uv sync --frozen --extra dev --extra fuzz --inexact`).
The exit code is pytest's, or 1 if P3 crashed or could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("rounds", "lost", "duplicated", "replayed", "integrity_failures")
FUZZ = ROOT / "scripts" / "fuzz_mcp_frames.py"
FUZZ_SYNC = ("sync", "--frozen", "--extra", "dev", "--extra", "fuzz", "--inexact")
FUZZ_SECONDS = 600
# What libFuzzer writes for a failed input (a crash: a criterion failed; a timeout; running out of memory).
FUZZ_FAILURES = ("crash-*", "timeout-*", "oom-*", "leak-*")


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


def _atheris_missing() -> str | None:
    """None once this interpreter imports Atheris (installing the `fuzz` extra if needed), else why not."""
    def importable() -> bool:
        return subprocess.call([sys.executable, "-c", "import atheris"], stderr=subprocess.DEVNULL) == 0

    if importable():
        return None
    uv = shutil.which("uv")
    cmd = [uv, *FUZZ_SYNC] if uv else [sys.executable, "-m", "uv", *FUZZ_SYNC]
    print(f"P3: installing Atheris (the fuzz extra): {' '.join(cmd)}", file=sys.stderr)
    if subprocess.call(cmd, cwd=ROOT) != 0:
        return f"`{' '.join(cmd)}` failed"
    return None if importable() else f"atheris is still not importable by {sys.executable}"


def fuzz_row(seconds: int) -> dict[str, Any]:
    """Run scripts/fuzz_mcp_frames.py for `seconds` and report it as row P3; a failed input's files are kept."""
    missing = _atheris_missing()
    if missing:
        return {"row": "P3", "rounds": 0, "integrity_failures": 1, "not_run": missing}
    # Outside the report's temporary directory: the inputs of a crash must outlive this run.
    work = Path(tempfile.mkdtemp(prefix="wardian-p3-"))
    corpus = work / "corpus"
    corpus.mkdir()
    cmd = [sys.executable, str(FUZZ), f"-max_total_time={seconds}", "-max_len=65536", f"-artifact_prefix={work}/",
           str(corpus)]
    print(f"P3: fuzzing the MCP stdio frames for {seconds} s ({work})", file=sys.stderr)
    log = work / "fuzz.log"
    started = time.monotonic()
    with log.open("wb") as out:
        # TMPDIR: the target's fake app makes its home there, and libFuzzer exits without Python's clean-up.
        code = subprocess.call(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ,
                               "TMPDIR": str(work)})
    text = log.read_text(encoding="utf-8", errors="replace")
    stats = {k: int(v) for k, v in re.findall(r"^stat::(\w+):\s*(\d+)", text, re.MULTILINE)}
    progress = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", text)
    failed = sorted(str(p) for pattern in FUZZ_FAILURES for p in work.glob(pattern))
    crashes = len(failed) or int(code != 0)
    row: dict[str, Any] = {
        "row": "P3", "rounds": stats.get("number_of_executed_units", 0), "integrity_failures": crashes,
        "exec_per_s": stats.get("average_exec_per_sec", 0), "seconds": round(time.monotonic() - started),
        "coverage": int(progress[-1][0]) if progress else 0, "features": int(progress[-1][1]) if progress else 0,
        "corpus": int(progress[-1][2]) if progress else 0, "new_units": stats.get("new_units_added", 0),
        "peak_rss_mb": stats.get("peak_rss_mb", 0), "crashes": crashes}
    if crashes:
        row["kept"] = str(work)
        print("\n".join(text.splitlines()[-60:]), file=sys.stderr)
        print(f"P3: failed inputs (replay with {FUZZ.relative_to(ROOT)} FILE): {', '.join(failed) or 'none'}; "
              f"log {log}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ci", action="store_true", help="the [CI] sizes only")
    parser.add_argument("--workers", default="2", help="pytest-xdist workers (default 2, this machine's cores)")
    parser.add_argument("--fuzz-seconds", type=int, default=None,
                        help=f"how long the nightly run fuzzes (row P3); default {FUZZ_SECONDS}, or 0 (skip) when "
                        "pytest arguments are given; --ci never fuzzes")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    fuzz_seconds = 0 if args.ci else args.fuzz_seconds
    if fuzz_seconds is None:
        fuzz_seconds = 0 if args.pytest_args else FUZZ_SECONDS
    with tempfile.TemporaryDirectory(prefix="wardian-reliability-") as tmp:
        report = Path(tmp) / "report.jsonl"
        env = {**os.environ, "WARDIAN_RELIABILITY_REPORT": str(report)}
        if not args.ci:
            env["WARDIAN_RELIABILITY_NIGHTLY"] = "1"
        cmd = [sys.executable, "-m", "pytest", "tests/reliability", "-n", args.workers, "-p", "no:cacheprovider",
               "-o", "timeout=3600", "-q", *args.pytest_args]
        started = time.monotonic()
        code = subprocess.call(cmd, cwd=ROOT, env=env)
        rows = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    if fuzz_seconds > 0:
        rows.append(fuzz_row(fuzz_seconds))
        if rows[-1]["integrity_failures"]:
            code = code or 1
    elapsed = time.monotonic() - started
    rows.sort(key=lambda r: str(r["row"]))
    print()
    print(f"wardian reliability, {'CI' if args.ci else 'NIGHTLY'} sizes, {elapsed:.0f} s, exit {code}")
    print(table(rows))
    bad = [r["row"] for r in rows if any(r.get(c, 0) for c in COLUMNS[1:])]
    if bad:
        print("rows with losses, duplicates, replays or integrity failures: " + ", ".join(map(str, bad)))
    return code


if __name__ == "__main__":
    sys.exit(main())
