"""`wardian console`: a one-time login URL of the running app's web console; and the web console `app run --console`
hands the app to serve (the app imports no console of its own).

Only what the command runs is imported: the console's web libraries load in `app run --console` alone, never in
the CLI's cold start."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from wardian.cli.common import Commands, client
from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out

if TYPE_CHECKING:
    from wardian.app.ports import WebConsole
    from wardian.app.service import AppService
    from wardian.app.signals import ChangeFeed
    from wardian.console.address import ConsoleAddress


def register(commands: Commands) -> None:
    p = commands.single("console", cmd_console, help_="print (and open) a one-time login URL of the web console",
                        description="print a fresh one-time login URL of the running app's web console and open it "
                        "in a browser, through a private page in the home's run/ (the URL is never in the browser's "
                        "arguments); the app must run with --console")
    p.add_argument("--no-open", dest="no_open", action="store_true",
                   help="only print the URL (for a browser elsewhere, or one that cannot read the home)")


def cmd_console(args: argparse.Namespace) -> int:
    """Print a fresh one-time login URL of the web console and open a browser on the private page that holds it."""
    with client(args) as app:
        login = app.call("console/login")
        run_dir = app.home.run_dir
    if args.json:
        out(dump(login))
        return EXIT_OK
    out("Open this URL to log in to the web console (it works once, for 10 minutes):")
    out(f"  {login['url']}")
    if not args.no_open:
        if _can_open_a_browser():
            _open_browser(run_dir, login["url"])
        else:
            out("no graphical session here (no DISPLAY or WAYLAND_DISPLAY): open the URL on this machine, or tunnel "
                "to it (ssh -L PORT:127.0.0.1:PORT HOST) and open it there")
    return EXIT_OK


def _open_browser(run_dir: Path, url: str) -> None:
    """Open a browser on a private page that forwards it to `url`, never on `url` itself: a browser's arguments are
    readable by every local user (docs/guide/console.md#logging-in-and-the-security-model).

    Raises: InsecureRuntimeDir (the page would not be private in `run_dir`).
    """
    import webbrowser

    from wardian.console import login_page
    from wardian.limits import LOGIN_TTL_MS

    try:
        login_page.remove_pages(run_dir, older_than_ms=LOGIN_TTL_MS)  # their logins have expired
        page = login_page.write_page(run_dir, url)
    except OSError as exc:
        out(f"the private login page cannot be written in {run_dir} ({exc.strerror}): open the URL yourself")
        return
    if not webbrowser.open(page.as_uri()):
        page.unlink(missing_ok=True)
        out("no browser could be opened here: open the URL yourself")


def _can_open_a_browser() -> bool:
    """Whether `webbrowser` would open a graphical browser, not a text one taking over this terminal (over SSH)."""
    if sys.platform in ("win32", "darwin") or os.environ.get("BROWSER"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


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
        from wardian.console import login_page
        from wardian.console.server import Console

        # The logins of an earlier app on this home ended with it; their pages, left unused, go now (the app holds the
        # home's lock: no other app is writing pages). One that cannot go holds only an ended login.
        with suppress(OSError):
            login_page.remove_pages(service.home.run_dir)
        return Console(service, feed, self._parsed())

    def _parsed(self) -> ConsoleAddress:
        if self._address is None:
            from wardian.console.address import parse_console_address

            self._address = parse_console_address(self._text)
        return self._address
