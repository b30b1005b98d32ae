"""Serving the console (docs/guide/console.md): `wardian app run|start --console [ADDR]` on loopback only,
`wardian console [--no-open]` minting a one-time login URL over the control socket, and an app (or a CLI) that does not
serve the console never loading its web libraries."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from tests.conftest import AppHandle, AppProcess, short_home, stop_app, wardian_cmd
from tests.console.conftest import ConsoleApp, ConsoleWorld, console_through_a_recording_browser, start_console_app
from tests.test_structure import imports_of
from wardian import errors
from wardian.cli import EXIT_APP, EXIT_HOME, EXIT_USAGE
from wardian.console.address import DEFAULT_HOST, DEFAULT_PORT, ConsoleAddress, parse_console_address
from wardian.console.auth import LOGIN_TTL_MS
from wardian_harness.processes import apps

WEB_MODULES = ("starlette", "uvicorn", "jinja2", "markupsafe", "sse_starlette")


@pytest.mark.parametrize(("text", "expected"), [
    ("", ConsoleAddress(DEFAULT_HOST, DEFAULT_PORT)),
    ("127.0.0.1:9000", ConsoleAddress("127.0.0.1", 9000)),
    ("127.0.0.1", ConsoleAddress("127.0.0.1", DEFAULT_PORT)),
    ("localhost:9001", ConsoleAddress("127.0.0.1", 9001)),
    ("9002", ConsoleAddress("127.0.0.1", 9002)),
    ("[::1]:9003", ConsoleAddress("::1", 9003)),
    ("127.1.2.3:0", ConsoleAddress("127.1.2.3", 0)),
])
def test_loopback_addresses_are_accepted(text: str, expected: ConsoleAddress) -> None:
    assert parse_console_address(text) == expected


@pytest.mark.parametrize("text", ["0.0.0.0:8765", "192.168.1.10:8765", "10.0.0.1", "[::]:8765", "example.com:80",
                                  "::1:8765", "[::1", "127.0.0.1:99999", "127.0.0.1:http", "127.0.0.1:-1",
                                  "[::1]x"])
def test_other_addresses_are_refused_with_what_is_allowed(text: str) -> None:
    with pytest.raises(errors.InvalidArguments) as caught:
        parse_console_address(text)
    assert caught.value.field == "console"
    assert caught.value.allowed is not None
    assert "127.0.0.1:PORT" in caught.value.allowed


@pytest.mark.parametrize("address", ["0.0.0.0:8765", "192.168.1.10"])
def test_app_start_refuses_a_non_loopback_console_and_changes_nothing(address: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="wn", dir="/tmp")) / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
    try:
        for command in ("start", "run"):
            proc = subprocess.run([sys.executable, "-m", "wardian", "app", command, "--home", str(root), "--console",
                                   address], env=env, capture_output=True, timeout=60, check=False)
            assert proc.returncode == EXIT_USAGE, proc.stderr
            assert b"invalid_arguments" in proc.stderr
            assert b"not a loopback address" in proc.stderr
            assert b"ssh -L" in proc.stderr  # how to reach it from elsewhere
            assert not root.exists()  # nothing was created
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


def test_a_console_port_in_use_fails_the_start_with_a_clear_error() -> None:
    """A taken port is its own error, `address_in_use` (exit 7), naming the address and how to pick another."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        root = short_home("wp")
        env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
        try:
            proc = subprocess.run([sys.executable, "-m", "wardian", "app", "start", "--home", str(root), "--console",
                                   f"127.0.0.1:{port}"], env=env, capture_output=True, timeout=60, check=False)
            assert proc.returncode == EXIT_HOME, proc.stderr
            assert b"address_in_use" in proc.stderr
            assert f"cannot listen on http://127.0.0.1:{port}".encode() in proc.stderr
            assert b"--console 127.0.0.1:PORT" in proc.stderr  # how to choose another
            status = subprocess.run([sys.executable, "-m", "wardian", "app", "status", "--home", str(root)], env=env,
                                    capture_output=True, timeout=60, check=False)
            assert status.returncode == 3  # no app was left running
        finally:
            shutil.rmtree(root, ignore_errors=True)


def test_wardian_console_prints_a_fresh_login_url_each_time(console_app: ConsoleApp) -> None:
    """`--no-open` and `--json` print the URL for the person (stdout, not any process's arguments) and write no page."""
    first = console_app.app.cli("console", "--no-open")
    second = console_app.app.cli("console", "--no-open")
    third = console_app.app.cli("console", "--json")
    assert first.returncode == second.returncode == third.returncode == 0
    urls = [next(line.strip() for line in p.stdout.decode().splitlines() if "/login?token=" in line)
            for p in (first, second)] + [json.loads(third.stdout)["url"]]
    assert len(set(urls)) == 3
    assert all(u.startswith(console_app.base + "/login?token=wcl1_") for u in urls)
    status = json.loads(console_app.app.cli("app", "status", "--json").stdout)
    assert status["console"] == console_app.base
    assert "token" not in status["console"]
    assert not list(console_app.app.home.run_dir.glob("console-login-*"))


def test_wardian_console_without_a_graphical_session_says_how_to_open_the_url(console_app: ConsoleApp) -> None:
    """No DISPLAY, WAYLAND_DISPLAY or BROWSER (an SSH session): the URL is printed with how to reach it, no browser
    (a text one would take over the terminal) is started, and no page is written."""
    env = {k: v for k, v in console_app.app.env().items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")}
    proc = subprocess.run([*wardian_cmd(), "console"], env=env, capture_output=True, timeout=90, check=False)
    assert proc.returncode == 0, proc.stderr
    assert b"/login?token=wcl1_" in proc.stdout
    assert b"no graphical session here" in proc.stdout
    assert b"ssh -L PORT:127.0.0.1:PORT HOST" in proc.stdout
    assert not list(console_app.app.home.run_dir.glob("console-login-*"))


def test_wardian_console_opens_the_browser_on_a_private_page_never_on_the_login_url(console_app: ConsoleApp,
                                                                                    tmp_path: Path) -> None:
    """W9: every local user can read a process's arguments (/proc/PID/cmdline), and a browser hands its environment to
    whatever it starts, so neither holds the login: the browser is opened on a private page in the home's run/ (0600)
    that forwards it to the login URL. Logging in through that page works, the page goes once it is used, and the URL
    is still printed for the person."""
    proc, record = console_through_a_recording_browser(console_app, tmp_path, log_in=True)
    assert [arg for arg in record["argv"] if "wcl1_" in arg] == []
    assert "error" not in record, record
    assert record["environ_with_a_login"] == []
    assert record["scheme"] == "file"
    page = Path(record["page"]["path"])
    assert record["argv"][1:] == [page.as_uri()]
    assert page.parent == console_app.app.home.run_dir
    assert (record["page"]["mode"], record["page"]["uid"]) == (0o600, os.geteuid())
    url = str(record["login_url"])
    assert url.startswith(console_app.base + "/login?token=wcl1_")
    assert [arg for arg in record["argv"] if url.split("=", 1)[1] in arg] == []
    assert f"  {url}\n".encode() in proc.stdout  # printed for the person
    assert (record["login_status"], record["agents_status"]) == (200, 200)  # logged in; the session works
    assert record["cookies"] == [f"wardian_console_{console_app.port}"]
    assert record["page_left_after_login"] is False
    assert console_app.http("GET", url[len(console_app.base):])[0] == 401  # spent


def test_wardian_console_removes_pages_of_expired_logins_and_keeps_the_others(console_app: ConsoleApp,
                                                                            tmp_path: Path) -> None:
    """A page not used within a login's life holds an expired token: the next `wardian console` removes it, and no
    page of a login that may still be used."""
    run_dir = console_app.app.home.run_dir
    expired, recent, other = run_dir / "console-login-0.html", run_dir / "console-login-1.html", run_dir / "notes"
    for path in (expired, recent, other):
        path.write_text("x", encoding="utf-8")
    long_ago = time.time() - LOGIN_TTL_MS / 1000 - 60
    for path in (expired, other):
        os.utime(path, (long_ago, long_ago))
    _, record = console_through_a_recording_browser(console_app, tmp_path, log_in=False)
    assert "error" not in record, record
    assert not expired.exists()
    assert recent.exists()
    assert other.exists()
    assert Path(record["page"]["path"]).exists()  # not used yet


def test_wardian_console_does_not_write_the_page_into_a_run_dir_others_may_enter(console_app: ConsoleApp,
                                                                                 tmp_path: Path) -> None:
    """A run/ others may enter (changed since the app checked it at its start) gets no page and no browser is started:
    the client refuses to talk to the app there at all (`untrusted_socket`, nothing sent), and the page's own check
    (`insecure_runtime_dir`) stands behind it (tests/console/test_security.py)."""
    run_dir = console_app.app.home.run_dir
    os.chmod(run_dir, 0o711)
    try:
        env = console_app.app.env()
        env["BROWSER"] = str(tmp_path / "never-started")
        proc = subprocess.run([*wardian_cmd(), "console"], env=env, capture_output=True, timeout=90, check=False)
    finally:
        os.chmod(run_dir, 0o700)
    assert proc.returncode == EXIT_APP, proc.stderr
    assert b"untrusted_socket" in proc.stderr
    assert not list(run_dir.glob("console-login-*"))


def test_a_console_removes_the_pages_an_earlier_app_left(console_app: ConsoleApp, tmp_path: Path) -> None:
    """An app's logins end with it: a page left unused goes when the next app on the home starts its console."""
    _, record = console_through_a_recording_browser(console_app, tmp_path, log_in=False)
    page = Path(record["page"]["path"])
    home = console_app.app.home
    console_app.app.call("app/stop")
    console_app.app.proc.wait(timeout=60)
    assert page.exists()
    console_app.app.proc = start_console_app(home.root)
    assert not page.exists()
    assert not list(home.run_dir.glob("console-login-*"))


def test_wardian_console_without_a_console_says_how_to_serve_one(app: AppHandle) -> None:
    proc = app.cli("console", "--no-open")
    assert proc.returncode == EXIT_USAGE
    assert b"unsupported" in proc.stderr
    assert b"--console" in proc.stderr
    assert app.call("app/status")["console"] is None


# --- the web libraries load only with a console -------------------------------------------------------------------


def _imported(stderr: bytes) -> set[str]:
    """Top-level module names from `python -X importtime` lines."""
    names = set()
    for line in stderr.decode("utf-8", "replace").splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@pytest.fixture
def importtime_app(request: pytest.FixtureRequest) -> Iterator[tuple[AppProcess, bool]]:
    console = bool(request.param)
    with apps.running_app(prefix="wi", command=[sys.executable, "-X", "importtime", "-m", "wardian"],
                          extra_args=("--console", "127.0.0.1:0") if console else ()) as running:
        yield cast(AppProcess, running.proc), console


@pytest.mark.parametrize("importtime_app", [False, True], ids=["without-console", "with-console"], indirect=True)
def test_the_app_loads_the_web_libraries_only_with_a_console(importtime_app: tuple[AppProcess, bool]) -> None:
    proc, console = importtime_app
    stop_app(proc)
    loaded = _imported(proc.stderr_output()) & set(WEB_MODULES)
    if console:
        assert {"starlette", "uvicorn", "jinja2"} <= loaded  # the control: importtime does see them
    else:
        assert loaded == set()


def test_the_cli_never_loads_the_web_libraries(console_app: ConsoleApp) -> None:
    """The CLI's cold start (a product figure) stays free of them, `wardian console` included."""
    env = console_app.app.env()
    _, token = console_app.app.add_agent()
    for argv, session in ((["message", "wait", "--timeout-ms", "0"], token), (["console", "--no-open"], None),
                          (["app", "status"], None)):
        run_env = dict(env, **({"WARDIAN_SESSION_ID": session} if session else {}))
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "wardian", *argv], env=run_env,
                              capture_output=True, timeout=60, check=False)
        assert proc.returncode in (0, 8), proc.stderr[-2000:]
        assert _imported(proc.stderr) & set(WEB_MODULES) == set(), argv


def test_the_console_stops_with_the_app(console_app: ConsoleApp) -> None:
    """`app/stop` ends the console too, live streams included: the process exits and the port is closed."""
    cookie = console_app.login_cookie()
    port = console_app.port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as stream:
        stream.sendall(f"GET /events/agents HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n\r\n".encode())
        assert stream.recv(4096).startswith(b"HTTP/1.1 200")
        console_app.app.call("app/stop")
        assert console_app.app.proc.wait(timeout=30) == 0
        stream.settimeout(10)
        rest = b""
        while chunk := stream.recv(65536):  # the stream ended (EOF), with its "end" event
            rest += chunk
        assert b"event: end" in rest
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass



def test_the_console_reaches_the_app_only_through_its_method_table() -> None:
    """The console is an edge of the app: it calls the service's method table (`AppService.handle`), never
    the store, a provider, the CLI or the control client; and no module of the app imports it at load time."""
    console = Path(__file__).resolve().parents[2] / "core" / "wardian" / "console"
    paths = sorted(console.rglob("*.py"))
    assert paths
    for path in paths:
        bad = {n for n in imports_of(path) if n == "sqlite3" or n.startswith(
            ("wardian.store", "wardian.providers", "wardian.cli", "wardian.client", "wardian.mcp"))}
        assert not bad, (path.name, bad)
    for path in (console.parent / "app").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        top = [line for line in text.splitlines() if line.startswith(("import ", "from "))]
        assert not [line for line in top if "wardian.console" in line], path.name


def test_the_agents_page_shows_a_replaced_conversation(console_world: ConsoleWorld) -> None:
    """An agent stopped before its first turn gets a fresh thread at its next start; the console's agents page shows
    the conversation it has now and the one it replaced, with Codex's reason."""
    world = console_world
    agent, _, _ = world.agent("bob")
    first = world.app.call("agent/list")["managed"][agent["uuid"]]["thread_id"]
    world.app.call("agent/stop", {"agent": "bob"})
    world.app.call("agent/start", {"agent": "bob"}, timeout_s=300)
    now = world.app.call("agent/list")["managed"][agent["uuid"]]["thread_id"]
    assert now != first
    cookie = world.web.login_cookie()
    status, _, body = world.web.http("GET", "/agents", {"Cookie": cookie})
    assert status == 200
    assert f'data-thread="{now}"'.encode() in body
    assert f'data-replaced="{first}"'.encode() in body
    assert b"no rollout found" in body
