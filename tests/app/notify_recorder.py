"""A notify command for the tests (docs/guide/approvals.md#notifications): it reads its one event from stdin and
writes it to `<folder>/<n>.json` (whole, by a rename), its pid to `<n>.pid`, then, with `--sleep S`, sleeps S seconds,
or while a file `<folder>/hold` exists (at most 300 s), before writing `<n>.done`. Its stdout and stderr carry a line
each, which the app must not show."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main() -> None:
    folder = Path(sys.argv[1])
    sleep = float(sys.argv[sys.argv.index("--sleep") + 1]) if "--sleep" in sys.argv else 0.0
    data = sys.stdin.buffer.read()
    name = f"{time.time_ns()}-{os.getpid()}"
    (folder / f"{name}.pid").write_text(str(os.getpid()), encoding="utf-8")
    tmp = folder / f".{name}.tmp"
    tmp.write_bytes(data)
    tmp.rename(folder / f"{name}.json")
    print("notify-recorder stdout line")
    print("notify-recorder stderr line", file=sys.stderr)
    held = (folder / "hold").exists()
    if sleep or held:
        time.sleep(sleep)
        deadline = time.monotonic() + 300
        while (folder / "hold").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        (folder / f"{name}.done").write_text("", encoding="utf-8")


if __name__ == "__main__":
    main()
