"""The CLI's cold start: the installed `wardian` console script's `message wait --timeout-ms 0` (an app round trip)
next to the interpreter's own start-up (`ratio_to_python`, the target: at most twice it), and where its import time
goes."""

from __future__ import annotations

import compileall
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import wardian
from benchmarks.apps import add_agents, console_script, fresh_app, plain_env
from benchmarks.config import Config
from benchmarks.figures import emit, log, ms, pct
from wardian.client import AppClient


def spawn_times(argv: list[str], env: dict[str, str], runs: int, ok: Callable[[int], bool]) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False)
        times.append(time.perf_counter() - t0)
        if not ok(proc.returncode):
            raise RuntimeError(f"{argv} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    return times


def compiled_package() -> None:
    """Write the package's bytecode, as an install does: a source checkout run with PYTHONDONTWRITEBYTECODE (or from
    a read-only tree) would otherwise compile every module on every start and time the compiler, not the command."""
    compileall.compile_dir(Path(wardian.__file__).parent, quiet=1)


def bench_cold_start(cfg: Config) -> None:
    script = console_script()
    compiled_package()
    with fresh_app() as app, AppClient(app.home) as client:
        (_, token), = add_agents(client, "cold", 1)
        env = plain_env()
        env.update({"WARDIAN_HOME": str(app.home.root), "WARDIAN_SESSION_ID": token})
        argv = [script, "message", "wait", "--timeout-ms", "0"]
        spawn_times(argv, env, 3, lambda rc: rc == 8)  # warm the page cache; 8 = timed out (empty mailbox)
        cli, floor = [], []
        for _ in range(cfg.rounds):  # interleave with the interpreter's own start-up, the floor
            cli += spawn_times(argv, env, cfg.cold_runs // cfg.rounds + 1, lambda rc: rc == 8)
            floor += spawn_times([sys.executable, "-c", "pass"], env, cfg.cold_runs // cfg.rounds + 1,
                                 lambda rc: rc == 0)
        ratio = statistics.median(cli) / statistics.median(floor)  # same run, interleaved: the load cancels out
        emit("cli_cold_start_message_wait", value=ms(statistics.median(cli)),
             range=[ms(min(cli)), ms(max(cli))], p90_ms=ms(pct(cli, 0.9)), n=len(cli), unit="ms",
             command="wardian message wait --timeout-ms 0", ratio_to_python=round(ratio, 3),
             target="ratio_to_python <= 2", met=ratio <= 2)
        emit("python_start_floor", value=ms(statistics.median(floor)), range=[ms(min(floor)), ms(max(floor))],
             n=len(floor), unit="ms", command=f"{Path(sys.executable).name} -c pass")
        proc = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env, capture_output=True,
                              check=False)
        report_imports(proc.stderr.decode("utf-8", "replace"))


def report_imports(stderr: str, top: int = 15) -> None:
    """Print the modules with the largest self import time (from `-X importtime`) to stderr."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = (part.strip() for part in line[len("import time:"):].split("|"))
        rows.append((int(self_us), int(cumulative_us), name))
    total = sum(r[0] for r in rows)
    log(f"import time of `wardian message wait`: {total / 1000:.1f} ms in {len(rows)} modules; top by self time:")
    for self_us, cumulative_us, name in sorted(rows, reverse=True)[:top]:
        log(f"  {self_us / 1000:7.2f} ms self {cumulative_us / 1000:8.2f} ms cumulative  {name.strip()}")
    emit("cli_import_time", value=ms(total / 1e6), n=len(rows), unit="ms",
         note="sum of self times from python -X importtime for `wardian message wait`")
