"""`wardian app run`: the app itself, in this process, and the web console `--console` hands it to serve (the app
imports no console of its own).

`wardian.cli.app` adds the command's parser and names its handler here, so the app's stack (pydantic, anyio, the
store) loads for `app run` alone, never for the group's other commands or the whole parser that `--help` builds.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import suppress
from typing import TYPE_CHECKING

import orjson

from wardian import errors
from wardian.app.run import run_app
from wardian.app.spawn import READY, report_ready
from wardian.cli.common import store_arg
from wardian.cli.exits import EXIT_OK
from wardian.console import login_page
from wardian.console.address import ConsoleAddress, parse_console_address
from wardian.home import resolve_home
from wardian.notifications import parse_notify_command

if TYPE_CHECKING:
    from wardian.app.ports import WebConsole
    from wardian.app.service import AppService
    from wardian.app.signals import ChangeFeed


def cmd_app_run(args: argparse.Namespace) -> int:
    """Run the app; reports readiness, or the startup error, on `--ready-fd` when given (`app start` reads it)."""
    home, ready_fd = resolve_home(args.home), args.ready_fd
    try:
        notify = None if args.notify_command is None else parse_notify_command(args.notify_command)
        run_app(
            home,
            on_ready=lambda: report_ready(ready_fd, READY),
            log_stream=sys.stderr,
            console=None if args.console is None else WebConsoleSetup(args.console),
            host_name=args.host_name,
            store_url=store_arg(args),
            notify=notify,
        )
    except errors.WardianError as exc:
        report_ready(ready_fd, orjson.dumps(exc.to_data()).decode("utf-8"))
        raise
    return EXIT_OK


class WebConsoleSetup:
    """The web console of `app run --console ADDR` (the app's `ConsoleSetup`): the address is parsed when the app
    checks its arguments, and the console (Starlette, uvicorn, Jinja2) is imported and built only once the app's
    service exists."""

    def __init__(self, address: str) -> None:
        self._text = address
        self._address: ConsoleAddress | None = None

    def check(self) -> None:
        self._parsed()

    def __call__(self, service: AppService, feed: ChangeFeed) -> WebConsole:
        # Starlette, uvicorn and Jinja2 (~150 ms): only an app that serves a console loads them.
        from wardian.console.server import Console

        # The logins of an earlier app on this home ended with it; their pages, left unused, go now (the app holds the
        # home's lock: no other app is writing pages). One that cannot go holds only an ended login.
        with suppress(OSError):
            login_page.remove_pages(service.home.run_dir)
        return Console(service, feed, self._parsed())

    def _parsed(self) -> ConsoleAddress:
        if self._address is None:
            self._address = parse_console_address(self._text)
        return self._address
