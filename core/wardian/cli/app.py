"""`wardian app run|start|stop|status`: run the app, in the foreground or in the background, and control it."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from wardian import errors
from wardian.cli.common import Commands, client, store_arg
from wardian.cli.exits import EXIT_APP, EXIT_OK
from wardian.cli.output import dump, out
from wardian.home import ENV_STORE, resolve_home

if TYPE_CHECKING:
    import psutil

CONSOLE_HELP = ("also serve the web console on this loopback address (default 127.0.0.1:8765; PORT 0 picks a free "
                "port); log in with `wardian console`")
STORE_HELP = (
    "serve a shared PostgreSQL store, postgresql://[USER@]HOST[:PORT]/DB[?…] without a password "
    f"(libpq reads it from PGPASSFILE/PGSERVICE/PGPASSWORD; default ${ENV_STORE}, else the store the "
    "home served before, else the home's own SQLite file)"
)
HOST_HELP = "the host this app serves (default: the machine's hostname); agents added here belong to it"


def register(commands: Commands) -> None:
    app = commands.group("app", "run and control the app")
    p = commands.add(app, "run", cmd_app_run, "run the app in the foreground")
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


def cmd_app_run(args: argparse.Namespace) -> int:
    """Run the app; reports readiness, or the startup error, on `--ready-fd` when given (`app start` reads it)."""
    import orjson

    from wardian.app.run import run_app
    from wardian.app.spawn import READY, report_ready
    from wardian.cli.console import WebConsoleSetup

    home, ready_fd = resolve_home(args.home), args.ready_fd
    try:
        run_app(
            home,
            on_ready=lambda: report_ready(ready_fd, READY),
            log_stream=sys.stderr,
            console=None if args.console is None else WebConsoleSetup(args.console),
            host_name=args.host_name,
            store_url=store_arg(args),
        )
    except errors.WardianError as exc:
        report_ready(ready_fd, orjson.dumps(exc.to_data()).decode("utf-8"))
        raise
    return EXIT_OK


def _start_args(args: argparse.Namespace) -> list[str]:
    """The `app run` options of an `app start`, each refused here (nothing of the home changes) when bad."""
    if args.console is not None:
        from wardian.console.address import parse_console_address

        parse_console_address(args.console)  # a refused address changes nothing, not even the home
    store_url = store_arg(args)
    extra: list[str] = [] if args.console is None else ["--console", args.console]
    if args.host_name is not None:
        from wardian.app.run import check_host_name

        extra += ["--host-name", check_host_name(args.host_name)]
    if store_url is not None:
        from wardian.app.run import check_store_url

        extra += ["--store", check_store_url(store_url)]  # refused here too: nothing of the home changes
    return extra


def cmd_app_start(args: argparse.Namespace) -> int:
    from wardian.app.spawn import start_app

    home = resolve_home(args.home)
    extra = _start_args(args)
    from wardian.home_setup import adopt_home

    adopt_home(home)  # created private, or refused having written nothing (not even app.out)
    log_path = home.app_out_path
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    with open(os.open(log_path, flags, 0o600), "ab") as log_file:
        try:
            proc = start_app(home.root, stdout=log_file, stderr=log_file, timeout_s=args.timeout, extra_args=extra)
        except errors.InternalError as exc:
            raise errors.InternalError(f"{exc.message}; see {log_path}") from None
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
    import psutil

    with client(args) as app:
        try:
            status = app.call("app/status")
        except errors.AppNotRunning:
            out("app not running")
            return EXIT_OK
        try:
            # Taken before asking it to stop: psutil keeps the start time, so a reused pid is never mistaken for it.
            app_process: psutil.Process | None = psutil.Process(status["pid"])
        except psutil.Error:
            app_process = None
        app.call("app/stop")
    if app_process is not None and not _exited(app_process, args.timeout):
        raise errors.InternalError(
            f"the app (pid {status['pid']}) accepted stop but has not exited within {args.timeout:g} s; it may "
            "still be ending its agents' provider processes: wait, or end it yourself")
    if args.json:
        out(dump({"stopped": True, "pid": status["pid"]}))
    else:
        out(f"app stopped (pid {status['pid']})")
    return EXIT_OK


def _exited(process: psutil.Process, timeout_s: float) -> bool:
    """Whether the process ended within `timeout_s`. A zombie has ended: it only waits for whoever inherited it
    (the `app start` that spawned it is gone) to collect its status."""
    import time

    import psutil

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if not process.is_running() or process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            return True  # gone
        if time.monotonic() >= deadline:
            return False
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
