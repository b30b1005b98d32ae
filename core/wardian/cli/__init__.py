"""`wardian`: argument parsing and printing only; every operation is a call to the running app, except the few that
need none (`wardian auth`, which keeps the home's credentials, and starting the app itself).

One module per command group, each adding its own parsers (`register`) and holding its handlers; `build_parser`
puts them together in the order `wardian --help` lists them.

Exit codes (documented in README):
  0 ok · 1 internal error · 2 bad input (usage, invalid arguments) · 3 app not running or incompatible
  4 not found (unknown target, agent, request, session or credential) · 5 delivery uncertain (do not resend)
  6 storage refused the change · 7 the home cannot host an app (already running, insecure run/ dir) or the console's
  address is in use · 8 nothing to do (interrupt: no active turn; wait: timed out) · 9 not signed in (the agent
  has no usable credential: `wardian auth login`)

Cold start matters (`wardian message wait --timeout-ms 0` is a benchmark figure): this package imports
only the stdlib, orjson and the client at module level; the app, pydantic and anyio load only for
`wardian app run`, and `mcp` only for `wardian mcp serve`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from wardian import __version__, errors
from wardian.cli import agent, app, auth, claude, codex, console, demo, mcp, message, opencode, retired, store
from wardian.cli.common import Commands, Parser
from wardian.cli.exits import (
    EXIT_APP,
    EXIT_HOME,
    EXIT_INTERNAL,
    EXIT_NOT_FOUND,
    EXIT_NOTHING,
    EXIT_OK,
    EXIT_STORAGE,
    EXIT_UNCERTAIN,
    EXIT_USAGE,
    exit_code_for,
)
from wardian.cli.output import print_error

__all__ = ["EXIT_APP", "EXIT_HOME", "EXIT_INTERNAL", "EXIT_NOTHING", "EXIT_NOT_FOUND", "EXIT_OK", "EXIT_STORAGE",
           "EXIT_UNCERTAIN", "EXIT_USAGE", "build_parser", "exit_code_for", "main"]

# The groups in the order `wardian --help` lists them.
GROUPS = (app, store, auth, agent, message, console, mcp, codex, opencode, claude, demo, retired)


def build_parser() -> argparse.ArgumentParser:
    common = Parser(add_help=False)
    common.add_argument("--home", default=argparse.SUPPRESS,
                        help="the Wardian home (default: $WARDIAN_HOME)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print the app's result as JSON")

    parser = Parser(prog="wardian", description="Durable messaging between coding agents.", parents=[common])
    parser.add_argument("--version", action="version", version=f"wardian {__version__}")
    commands = Commands(parser.add_subparsers(dest="group", required=True, metavar="COMMAND", parser_class=Parser),
                        common)
    for group in GROUPS:
        group.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras and getattr(args, "func", None) is not retired.cmd_retired:
        # argparse fills an optional positional (TEXT) before it sees options placed in between
        # (`reply ID --status done TEXT`); take a single leftover word as that text.
        if getattr(args, "text", "") is None and len(extras) == 1 and not extras[0].startswith("-"):
            args.text = extras[0]
        else:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
    if not hasattr(args, "home"):
        args.home = None
    if not hasattr(args, "json"):
        args.json = False
    try:
        return args.func(args)
    except errors.WardianError as exc:
        print_error(exc, args.json)
        return exit_code_for(exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK

