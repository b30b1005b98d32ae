"""The handler of `wardian console` (`wardian.cli.console` adds its parser): a fresh one-time login URL of the
running app's web console, opened in a browser through a private page in the home's run/. The console's web
libraries load in `app run --console` alone, never here: the page and the browser are the standard library's."""

from __future__ import annotations

import argparse
import os
import sys
import webbrowser
from pathlib import Path

from wardian.cli.common import client
from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out
from wardian.console import login_page
from wardian.limits import LOGIN_TTL_MS


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
