"""Frozen vs. source entry points (opt-in: `--only frozen`, after `python build/freeze.py`): the CLI's cold start,
`mcp serve` to its `initialize` answer, and the size of the frozen build (docs/guide/frozen-builds.md)."""

from __future__ import annotations

import os
import stat
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.apps import add_agents, console_script, fresh_app, plain_env
from benchmarks.cli import compiled_package, spawn_times
from benchmarks.config import REPO, Config
from benchmarks.figures import emit, ms, pct
from wardian.client import AppClient

INIT_LINE = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
             b'"capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}\n')


def _frozen_cli() -> Path:
    """The frozen CLI to measure: WARDIAN_FROZEN_CLI, else dist/wardian/wardian (`python build/freeze.py`)."""
    exe = Path(os.environ.get("WARDIAN_FROZEN_CLI") or REPO / "dist" / "wardian" / "wardian").absolute()
    if not exe.is_file():
        raise RuntimeError(f"no frozen CLI at {exe}: run `python build/freeze.py` or set WARDIAN_FROZEN_CLI")
    return exe


def _tree_mb(path: Path) -> float:
    if path.is_file():
        return round(path.stat().st_size / 1e6, 1)
    # Regular files only, links not followed, so nothing counts twice.
    return round(sum(st.st_size for st in (p.lstat() for p in path.rglob("*")) if stat.S_ISREG(st.st_mode)) / 1e6, 1)


def _initialize_time(argv: list[str], env: dict[str, str]) -> float:
    """Spawn `argv` (an MCP stdio server) and time until its answer to `initialize` arrives."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(INIT_LINE)
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - t0
    proc.stdin.close()
    proc.wait(timeout=60)
    proc.stdout.close()
    if b'"serverInfo"' not in line:
        raise RuntimeError(f"{argv} did not answer initialize: {line[:200]!r}")
    return elapsed


def _start_fields(times: list[float]) -> dict[str, Any]:
    return {"value": ms(statistics.median(times)), "range": [ms(min(times)), ms(max(times))],
            "p90_ms": ms(pct(times, 0.9)), "n": len(times), "unit": "ms"}


def bench_frozen(cfg: Config) -> None:
    """Frozen vs. source entry points, measured interleaved in one run: `message wait --timeout-ms 0` (an app
    round trip) and `mcp serve` -> `initialize` answer. A `dist/onefile/wardian` (`build/freeze.py --onefile`)
    is measured too when present, for the onedir/onefile choice. Opt-in: `--only frozen`."""
    frozen, plain = _frozen_cli(), console_script()
    compiled_package()
    onefile = REPO / "dist" / "onefile" / "wardian"
    entries = {"frozen": str(frozen), "plain": plain, **({"onefile": str(onefile)} if onefile.is_file() else {})}
    with fresh_app() as app, AppClient(app.home) as client:
        (_, token), = add_agents(client, "frz", 1)
        env = plain_env()
        env.update({"WARDIAN_HOME": str(app.home.root), "WARDIAN_SESSION_ID": token})
        waits: dict[str, list[float]] = {name: [] for name in entries}
        for exe in entries.values():
            spawn_times([exe, "message", "wait", "--timeout-ms", "0"], env, 3, lambda rc: rc == 8)  # page cache
        per_round = cfg.cold_runs // cfg.rounds + 1
        for _ in range(cfg.rounds):
            for _ in range(per_round):  # one of each in turn, so all meet the same background load
                for name, exe in entries.items():
                    waits[name] += spawn_times([exe, "message", "wait", "--timeout-ms", "0"], env, 1,
                                               lambda rc: rc == 8)
        for name, times in waits.items():
            fields = _start_fields(times)
            if name == "frozen":
                fields.update(target="<= 150", met=fields["value"] <= 150)
            emit(f"{name}_cli_cold_start_message_wait", **fields, command="wardian message wait --timeout-ms 0",
                 entry=entries[name], plain_ms=ms(statistics.median(waits["plain"])))
        serve_env = {k: v for k, v in env.items() if k != "WARDIAN_SESSION_ID"}
        inits: dict[str, list[float]] = {name: [] for name in entries}
        for exe in entries.values():
            _initialize_time([exe, "mcp", "serve"], serve_env)  # warm-up
        for _ in range(max(3, cfg.cold_runs // 4)):
            for name, exe in entries.items():
                inits[name].append(_initialize_time([exe, "mcp", "serve"], serve_env))
        for name, times in inits.items():
            emit(f"{name}_mcp_serve_initialize", **_start_fields(times), command="wardian mcp serve -> initialize",
                 entry=entries[name], plain_ms=ms(statistics.median(inits["plain"])))
    emit("frozen_dist_size", value=_tree_mb(frozen.parent), n=1, unit="MB", entry=str(frozen.parent),
         **({"onefile_mb": _tree_mb(onefile)} if onefile.is_file() else {}))
