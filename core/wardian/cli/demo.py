"""`wardian demo`: two real agents exchange a task, shown live. The demo ships with the harness; core finds it by
entry point and never imports it."""

from __future__ import annotations

import argparse
import sys

from wardian.cli.common import Commands
from wardian.cli.exits import EXIT_INTERNAL


def register(commands: Commands) -> None:
    p = commands.single("demo", cmd_demo, help_="two real agents exchange a task; the exchange is shown live")
    p.add_argument("--providers", default="codex,codex", metavar="LEAD,WORKER",
                   help="the lead's and the worker's provider: codex, opencode, claude, qwen, gemini, acp (a "
                        "generic ACP agent: opencode acp) or pi (default: codex,codex; codex,opencode or qwen,codex "
                        "shows a mixed team)")
    p.add_argument("--evidence", default=None, metavar="DIR",
                   help="where to keep the records, rollouts and bindings (default: a new folder under /tmp)")


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo, which ships with the harness: core loads it by entry point and never imports it."""
    # importlib.metadata (email, zipfile, csv; ~14 ms): `wardian demo`'s alone, not the whole parser's (`--help`).
    from importlib.metadata import entry_points

    found = list(entry_points(group="wardian.plugins", name="demo"))
    if not found:
        sys.stderr.write("wardian: demo_unavailable: no `demo` entry point in group `wardian.plugins` (it ships "
                         "with the wardian_harness package of a source checkout: run scripts/setup.sh)\n")
        return EXIT_INTERNAL
    forwarded = ["--providers", args.providers] + (["--evidence", args.evidence] if args.evidence else [])
    try:
        demo = found[0].load()
    except ModuleNotFoundError as exc:  # the harness is installed without its extra's packages
        sys.stderr.write(f"wardian: demo_unavailable: the demo needs the module {exc.name!r}, which comes with the "
                         "harness extra: pip install 'wardian[harness]'\n")
        return EXIT_INTERNAL
    return int(demo(forwarded))
