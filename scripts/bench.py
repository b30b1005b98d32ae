"""Benchmarks of the messaging core (docs/benchmarks.md): one JSON object per line on stdout.

Usage: `.venv/bin/python scripts/bench.py [--quick] [--only NAME ...] [--store sqlite|postgresql]`

The benchmarks live in the `benchmarks` package at the repository root (its docstring says what each figure
measures and how its client is built); this script is its command line, kept here because tests and docs run it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: `benchmarks` is not installed

from benchmarks.runner import main

if __name__ == "__main__":
    sys.exit(main(description=(__doc__ or "").splitlines()[0]))
