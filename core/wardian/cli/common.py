"""What the command groups share: the parser class, the options every command takes, and reading the caller's
session, the message text and the store from the arguments."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable

from wardian import errors
from wardian.cli.exits import EXIT_USAGE
from wardian.home import ENV_SESSION, ENV_STORE, resolve_home

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn, TypeAlias

    from wardian.client import AppClient

Handler = Callable[[argparse.Namespace], int]
"""What a command runs: the function itself, or where it is, `"wardian.cli.up:cmd_up"`, for a command whose module
imports what only that command needs (`handler` imports it when the command runs, so the group's other commands and
the whole parser that `--help` builds never do)."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors read `wardian: error: ...` whichever subcommand failed, with the usage exit code."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"wardian: error: {message}\n")


# A string: argparse's class is generic only to type checkers.
Group: TypeAlias = "argparse._SubParsersAction[Parser]"


class _Unbuilt(Parser):
    """The parser of an action this run does not build, because another action of its group runs: what the
    group's `register` adds to it goes nowhere. argparse's set-up of a parser and of each argument (gettext
    look-ups, a help formatter, the terminal's size) is most of the cold start's parser time (docs/benchmarks.md)."""

    def __init__(self) -> None:  # deliberately no argparse set-up
        pass

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        return argparse.Action(option_strings=[], dest=argparse.SUPPRESS)

    def add_mutually_exclusive_group(self, **kwargs: Any) -> Any:
        return self

    def set_defaults(self, **kwargs: Any) -> None:
        pass


class Commands:
    """Where a command group adds its parsers: the root's subcommands, and the options every command takes.

    With `action` (`wardian GROUP ACTION ...` runs that action), a group builds that action's parser alone; `missed`
    then says whether the group had no such action, and the caller builds the whole group instead (its usage
    message lists the actions)."""

    def __init__(self, groups: Group, common: Parser, action: str | None = None) -> None:
        self.groups = groups
        self.common = common
        self.action = action
        self.missed = action is not None

    def group(self, name: str, help_: str) -> Group:
        """A command group (`wardian NAME ACTION`)."""
        return self.groups.add_parser(name, help=help_).add_subparsers(
            dest="cmd", required=True, metavar="ACTION", parser_class=Parser)

    def add(self, group: Group, name: str, func: Handler | str, help_: str) -> Parser:
        """An action of a group, running `func`."""
        if self.action is not None:
            if name != self.action:
                return _Unbuilt()
            self.missed = False
        p = group.add_parser(name, help=help_, description=help_, parents=[self.common])
        p.set_defaults(func=func)
        return p

    def single(self, name: str, func: Handler | str, help_: str | None = None,
               description: str | None = None) -> Parser:
        """A command without actions (`wardian console`), running `func`. Without `help_` argparse lists no line
        for it (help=SUPPRESS would print "==SUPPRESS==")."""
        self.missed = False  # no actions: the word after it is its own argument
        if help_ is None:
            p = self.groups.add_parser(name, parents=[self.common], description=description)
        else:
            p = self.groups.add_parser(name, help=help_, parents=[self.common], description=description)
        p.set_defaults(func=func)
        return p


def handler(func: Handler | str) -> Handler:
    """The function a command runs; one given by where it is (`module:name`) is imported now."""
    if not isinstance(func, str):
        return func
    module, _, name = func.partition(":")
    found: Handler = getattr(importlib.import_module(module), name)
    return found


def text_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("text", nargs="?", help="the text (kept exactly)")
    p.add_argument("--stdin", action="store_true", help="read the text from standard input")


def client(args: argparse.Namespace) -> AppClient:
    # The client's sockets and selectors (~3 ms): not for the commands that need no app, `wardian mcp serve`'s start
    # first (its first tool call loads it).
    from wardian.client import AppClient

    return AppClient(resolve_home(args.home))


def session() -> str:
    token = os.environ.get(ENV_SESSION, "")
    if not token:
        raise errors.MissingSession(
            f"no managed caller: set {ENV_SESSION} (print it with `wardian agent env NAME`)", field="session")
    return token


def text(args: argparse.Namespace) -> str:
    if args.stdin and args.text is not None:
        raise errors.InvalidArguments("give the text as an argument or with --stdin, not both", field="text")
    if args.stdin:
        data = sys.stdin.buffer.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise errors.InvalidText(f"standard input is not UTF-8 (byte {exc.start})", field="message",
                                     allowed="UTF-8 text") from None
    if args.text is None:
        raise errors.EmptyMessage("no text: give it as an argument or pass --stdin", field="message")
    return str(args.text)


def store_arg(args: argparse.Namespace) -> str | None:
    """--store, else WARDIAN_STORE, else None (the home's remembered store, or its own SQLite file)."""
    return args.store if args.store is not None else (os.environ.get(ENV_STORE) or None)
