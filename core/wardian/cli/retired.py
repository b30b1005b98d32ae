"""The retired v1 commands `wardian send` and `wardian ask`: still parsed, so that a script using them gets a clear
error instead of a usage message, but listed nowhere."""

from __future__ import annotations

import argparse

from wardian import errors
from wardian.cli.common import Commands

RETIRED = ("send", "ask")


def register(commands: Commands) -> None:
    for retired in RETIRED:
        p = commands.single(retired, cmd_retired)  # no help: `wardian --help` lists no line for it
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(retired=retired)


def cmd_retired(args: argparse.Namespace) -> int:
    raise errors.RetiredOperation(
        f"`wardian {args.retired}` is a retired v1 operation and delivers nothing; use `wardian message "
        "send` for information or `wardian message task` for work")
