"""`wardian app run|start|stop|status`: run the app, in the foreground or in the background, and control it; and
starting an app in the background and stopping it, which `wardian up` and `down` do too (`wardian.cli.team_run`).

`app run` is `wardian.cli.app_run`'s: the app's stack loads for it alone."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from wardian import errors
from wardian.cli.common import Commands, client, store_arg
from wardian.cli.exits import EXIT_APP, EXIT_OK
from wardian.cli.output import dump, out
from wardian.home import ENV_STORE, Home, resolve_home
from wardian.home_setup import adopt_home
from wardian.notifications import parse_notify_command

if TYPE_CHECKING:
    import subprocess

    from wardian.client import AppClient

CONSOLE_HELP = ("also serve the web console on this loopback address (default 127.0.0.1:8765; PORT 0 picks a free "
                "port); log in with `wardian console`")
STORE_HELP = (
    "serve a shared PostgreSQL store, postgresql://[USER@]HOST[:PORT]/DB[?…] without a password "
    f"(libpq reads it from PGPASSFILE/PGSERVICE/PGPASSWORD; default ${ENV_STORE}, else the store the "
    "home served before, else the home's own SQLite file)"
)
HOST_HELP = "the host this app serves (default: the machine's hostname); agents added here belong to it"
NOTIFY_HELP = ("run CMD with one JSON event on its stdin when an approval waits for a person and when a task a person "
               "sent ends (split like a shell would, run without one; e.g. \"notify-send wardian\")")


def register(commands: Commands) -> None:
    app = commands.group("app", "run and control the app")
    p = commands.add(app, "run", "wardian.cli.app_run:cmd_app_run", "run the app in the foreground")
    p.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    _serving_args(p)
    p = commands.add(app, "start", cmd_app_start, "start the app in the background; returns once it accepts calls")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for readiness")
    _serving_args(p)
    p = commands.add(app, "stop", cmd_app_stop, "stop the running app")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for the app to exit")
    commands.add(app, "status", cmd_app_status, "show whether the app runs")


def _serving_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--console", nargs="?", const="", default=None, metavar="ADDR", help=CONSOLE_HELP)
    p.add_argument("--store", default=None, metavar="URL", help=STORE_HELP)
    p.add_argument("--host-name", dest="host_name", default=None, metavar="NAME", help=HOST_HELP)
    p.add_argument("--notify-command", dest="notify_command", default=None, metavar="CMD", help=NOTIFY_HELP)


def _start_args(args: argparse.Namespace) -> list[str]:
    """The `app run` options of an `app start`, each refused here (nothing of the home changes) when bad."""
    extra: list[str] = []
    if args.console is not None:
        # Its dataclass (dataclasses, inspect; ~5 ms): not for `app status`, `stop` or a start without a console.
        from wardian.console.address import parse_console_address

        parse_console_address(args.console)  # a refused address changes nothing, not even the home
        extra += ["--console", args.console]
    if args.notify_command is not None:
        parse_notify_command(args.notify_command)  # refused here: nothing of the home changes
        extra += ["--notify-command", args.notify_command]
    store_url = store_arg(args)
    if args.host_name is not None or store_url is not None:
        # Their checks are the app's own (pydantic, anyio, the store; ~200 ms): only for a start that names them.
        from wardian.app.run import check_host_name, check_store_url

        if args.host_name is not None:
            extra += ["--host-name", check_host_name(args.host_name)]
        if store_url is not None:
            extra += ["--store", check_store_url(store_url)]  # refused here too: nothing of the home changes
    return extra


def start_in_background(home: Home, extra: Sequence[str], timeout_s: float) -> subprocess.Popen[bytes]:
    """`wardian app run` on `home` in a process of its own that outlives this command, writing to the home's app.out;
    returns once it accepts calls. The home is made private first, or refused having had nothing written.

    Raises: the app's own startup error; InternalError (no readiness in `timeout_s`), which names app.out.
    """
    from wardian.app.spawn import start_app  # orjson (~10 ms): only a command that starts an app

    adopt_home(home)  # created private, or refused having written nothing (not even app.out)
    log_path = home.app_out_path
    # Windows has neither flag: its home is private by ACL, and Popen passes the child its own copy of the handle.
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    with open(os.open(log_path, flags, 0o600), "ab") as log_file:
        try:
            return start_app(home.root, stdout=log_file, stderr=log_file, timeout_s=timeout_s, extra_args=extra)
        except errors.InternalError as exc:
            raise errors.InternalError(f"{exc.message}; see {log_path}") from None


def cmd_app_start(args: argparse.Namespace) -> int:
    home = resolve_home(args.home)
    proc = start_in_background(home, _start_args(args), args.timeout)
    console = None
    if args.console is not None:
        with client(args) as app:
            console = app.call("app/status")["console"]
    if args.json:
        out(dump({"running": True, "pid": proc.pid, "home": str(home.root), "console": console}))
    else:
        out(f"app running for {home.root} (pid {proc.pid})")
        if console is not None:
            out(f"web console at {console}; log in with `wardian console`")
    return EXIT_OK


def cmd_app_stop(args: argparse.Namespace) -> int:
    """Stop the app and return once its process has exited (a script may remove the home right after)."""
    with client(args) as app:
        try:
            status = app.call("app/status")
        except errors.AppNotRunning:
            out("app not running")
            return EXIT_OK
        stop_and_wait(app, status["pid"], args.timeout)
    if args.json:
        out(dump({"stopped": True, "pid": status["pid"]}))
    else:
        out(f"app stopped (pid {status['pid']})")
    return EXIT_OK


def stop_and_wait(app: AppClient, pid: int, timeout_s: float) -> None:
    """Ask the app `app` is connected to, whose process is `pid`, to stop; close the connection and return once that
    process has exited.

    Raises: InternalError (it accepted stop but has not exited within `timeout_s`).
    """
    import psutil  # ~13 ms: only stopping an app waits for its process

    try:
        # Taken before asking it to stop: psutil keeps the start time, so a reused pid is never mistaken for it.
        process = psutil.Process(pid)
    except psutil.Error:
        process = None
    app.call("app/stop")
    app.close()
    deadline = time.monotonic() + timeout_s
    while process is not None:
        try:
            # A zombie has ended: it only waits for whoever inherited it (the `app start` that spawned it is gone)
            # to collect its status.
            if not process.is_running() or process.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.Error:
            return  # gone
        if time.monotonic() >= deadline:
            raise errors.InternalError(
                f"the app (pid {pid}) accepted stop but has not exited within {timeout_s:g} s; it may still be "
                "ending its agents' provider processes: wait, or end it yourself")
        time.sleep(0.01)


def cmd_app_status(args: argparse.Namespace) -> int:
    with client(args) as app:
        try:
            status = app.call("app/status")
        except errors.AppNotRunning as exc:
            if args.json:
                out(dump({"running": False, "home": str(app.home.root), "message": exc.message}))
            else:
                out(f"app not running for {app.home.root}")
            return EXIT_APP
    if args.json:
        out(dump(status))
    else:
        out(f"app running for {status['home']} (pid {status['pid']}, version {status['version']}, "
            f"{status['agents']} agents)")
        if status.get("console"):
            out(f"web console at {status['console']} (log in with `wardian console`)")
    return EXIT_OK
