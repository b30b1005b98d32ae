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

Cold start matters (`wardian message wait --timeout-ms 0` is a benchmark figure, measured against the interpreter's
own start-up in docs/benchmarks.md): a command imports and registers only its own group's module (`main` builds the
whole parser only for help, the version and a command it does not know, so every usage message and `--help` reads as
before), and the group modules import only the stdlib, the client and light parts of wardian at module level (orjson
only for `--json`). A command whose handler needs more names it by where it is (`"wardian.cli.up:cmd_up"`,
`common.Handler`): that module imports its stack at its top and loads only when the command runs, never for the
group's other commands or the whole parser. The app, pydantic and anyio load only for `wardian app run`, and `mcp`
only for `wardian mcp serve`; the few imports left inside functions keep such a stack off a command's other branches
(tests/test_shape.py counts them and asks each for its reason).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from wardian import __version__, errors
from wardian.cli.common import Commands, Parser, handler
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

# The group modules (wardian.cli.NAME) in the order `wardian --help` lists them, each with the commands its
# `register` adds (tests/cli/test_cold_start.py checks the two agree), so that a command loads only its own module.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("app", ("app",)), ("team", ("init", "up", "down", "status")), ("store", ("store",)), ("auth", ("auth",)),
    ("agent", ("agent",)),
    ("message", ("message",)), ("approval", ("approval",)), ("console", ("console",)), ("mcp", ("mcp",)),
    ("codex", ("codex",)),
    ("opencode", ("opencode",)), ("claude", ("claude",)), ("pi", ("pi",)), ("demo", ("demo",)),
    ("retired", ("send", "ask")),
)
COMMANDS = frozenset(name for _, names in GROUPS for name in names)
# The root's own options that take a value (the others take none).
_VALUED = ("--home",)


def build_parser(only: str | None = None, action: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with `only` (a command, `wardian ONLY ...`) the root with that command alone, and with
    `action` too (`wardian ONLY ACTION ...`) that command with that action alone: it parses those arguments exactly
    as the whole one does, and its usage messages read the same. An action the command does not have builds the
    whole command, whose message lists the ones it has."""
    common = Parser(add_help=False)
    common.add_argument("--home", default=argparse.SUPPRESS,
                        help="the Wardian home (default: $WARDIAN_HOME)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print the app's result as JSON")

    parser = Parser(prog="wardian", description="Durable messaging between coding agents.", parents=[common])
    parser.add_argument("--version", action="version", version=f"wardian {__version__}")
    commands = Commands(parser.add_subparsers(dest="group", required=True, metavar="COMMAND", parser_class=Parser),
                        common, action if only is not None else None)
    for module, names in GROUPS:
        if only is None or only in names:
            importlib.import_module(f"wardian.cli.{module}").register(commands)
    if commands.missed:
        return build_parser(only)
    return parser


def command_of(argv: Sequence[str]) -> str | None:
    """The command `argv` runs, when the root parser has nothing else to do with it: None for help, the version, an
    unknown command or option, or no command at all (the whole parser then answers)."""
    return route(argv)[0]


def route(argv: Sequence[str]) -> tuple[str | None, str | None]:
    """The command `argv` runs (as `command_of`) and the word after it, its action when it has actions (None when
    that word is an option or missing)."""
    if "-h" in argv or "--help" in argv:
        return None, None
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in _VALUED:
            i += 2
        elif word == "--json" or word.startswith(tuple(f"{o}=" for o in _VALUED)):
            i += 1
        elif word not in COMMANDS:
            return None, None
        else:
            following = argv[i + 1] if i + 1 < len(argv) else None
            return word, None if following is None or following.startswith("-") else following
    return None, None


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(*route(words))
    args, extras = parser.parse_known_args(words)
    if extras and "retired" not in args:
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
        return handler(args.func)(args)
    except errors.WardianError as exc:
        print_error(exc, args.json)
        return exit_code_for(exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK

