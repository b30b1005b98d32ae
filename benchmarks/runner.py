"""The command line and the one registry of subjects.

Each subject is a name, its figure on the default store, whether it is opt-in (it needs a frozen build, the Codex,
OpenCode, Claude Code, Qwen Code or Pi CLI, or chromium, so it runs only when named with `--only`), and, for the
store-bound ones, its figure on both backends side by side (`--store postgresql`). The order of the registry is the
order of a run.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchmarks import (
    acp,
    approvals,
    claude,
    cli,
    codex,
    console,
    cursor,
    frozen,
    mcp,
    mcp_calls,
    opencode,
    pi,
    roundtrip,
    sends,
    wake,
)
from benchmarks.config import FULL, QUICK, Config
from benchmarks.figures import log

if TYPE_CHECKING:
    from wardian_harness.hosts.postgres import PrivateCluster

DESCRIPTION = "Benchmarks of the messaging core: one JSON object per line on stdout."


@dataclass(frozen=True)
class Subject:
    name: str
    run: Callable[[Config], None]
    both_stores: Callable[[Config, PrivateCluster], None] | None = None
    opt_in: bool = False


SUBJECTS: tuple[Subject, ...] = (
    Subject("roundtrip", roundtrip.bench_roundtrip, roundtrip.bench_roundtrip_compare),
    Subject("wake", wake.bench_wake, wake.bench_wake_compare),
    Subject("throughput", sends.bench_throughput, sends.bench_throughput_compare),
    Subject("receive", cursor.bench_receive, cursor.bench_receive_compare),
    Subject("cold_start", cli.bench_cold_start),
    Subject("mcp_startup", mcp.bench_mcp_startup),
    Subject("mcp_roundtrip", mcp_calls.bench_mcp_roundtrip),
    Subject("mcp_first_wait", mcp.bench_mcp_first_wait),
    Subject("frozen", frozen.bench_frozen, opt_in=True),
    Subject("codex", codex.bench_codex_dispatch, opt_in=True),
    Subject("opencode", opencode.bench_opencode, opt_in=True),
    Subject("claude", claude.bench_claude, opt_in=True),
    Subject("pi", pi.bench_pi, opt_in=True),
    Subject("acp", acp.bench_acp, opt_in=True),
    Subject("approvals", approvals.bench_approvals, opt_in=True),
    Subject("console", console.bench_console, opt_in=True),
)
BY_NAME = {s.name: s for s in SUBJECTS}


def _parser(description: str) -> argparse.ArgumentParser:
    opt_in = [s.name for s in SUBJECTS if s.opt_in]
    both = [s.name for s in SUBJECTS if s.both_stores is not None]
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes for CI (indicative figures only)")
    parser.add_argument("--only", nargs="+", choices=sorted(BY_NAME),
                        help="run only these benchmarks (opt-in ones only this way: " + ", ".join(opt_in) + ")")
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite",
                        help="postgresql: also run " + ", ".join(both) + " on a private PostgreSQL server, "
                        "beside SQLite in the same run (only these benchmarks then)")
    return parser


def _timed(label: str, run: Callable[[], None]) -> None:
    log(f"{label} ...")
    started = time.perf_counter()
    run()
    log(f"{label.split(' ', 1)[0]} done in {time.perf_counter() - started:.1f} s")


def _run_both_stores(cfg: Config, only: list[str] | None) -> None:
    from wardian_harness.hosts.postgres import PrivateCluster

    with PrivateCluster() as cluster:
        log(f"private PostgreSQL server in {cluster.root} (port {cluster.port})")
        for subject in SUBJECTS:
            compare = subject.both_stores
            if compare is None or (only and subject.name not in only):
                continue
            _timed(f"{subject.name} (sqlite and postgresql)", lambda compare=compare: compare(cfg, cluster))


def main(argv: list[str] | None = None, description: str = DESCRIPTION) -> int:
    parser = _parser(description)
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    t0 = time.perf_counter()
    if args.store == "postgresql":
        both = [s.name for s in SUBJECTS if s.both_stores is not None]
        if args.only and (other := sorted(set(args.only) - set(both))):
            parser.error(f"--store postgresql runs only {', '.join(both)}, not {', '.join(other)}")
        _run_both_stores(cfg, args.only)
    else:
        for subject in SUBJECTS:
            if (args.only and subject.name not in args.only) or (subject.opt_in and not args.only):
                continue
            _timed(subject.name, lambda subject=subject: subject.run(cfg))
    log(f"all done in {time.perf_counter() - t0:.1f} s (load average {os.getloadavg()[0]:.2f})")
    return 0
