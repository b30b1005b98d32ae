"""Descriptor exhaustion and silent clients never end the app (docs/reliability.md, rows R1-R6): real `wardian app run`
processes under a real descriptor limit (util-linux `prlimit`), flooded with connections that never send a byte."""

from __future__ import annotations

import contextlib
import http.client
import json
import resource
import select
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.conftest import wardian_cmd
from wardian import errors
from wardian.app.listen import CONTROL_IDLE_S, MAX_CONSOLE_CONNECTIONS, MAX_CONTROL_CONNECTIONS, cap_for
from wardian.client import AppClient
from wardian.home import Home
from wardian.mcp._calls import AppConnections
from wardian_harness.processes import apps

FLOOD = 300  # more connections than the app's descriptor limit below
LIMIT = 256
DEADLINE_S = 90.0  # a bound far above the idle bound and a loaded machine's delays; the conditions come much sooner

pytestmark = pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux prlimit")


@pytest.fixture(autouse=True)
def _enough_descriptors_here() -> None:
    """The test process holds two floods at once: raise its own soft limit where the hard one allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * FLOOD + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))


@contextlib.contextmanager
def limited_app(limit: int | None, *extra_args: str) -> Iterator[apps.RunningApp]:
    """An app on a fresh home, started under `prlimit --nofile=limit:limit` when `limit` is given."""
    command = wardian_cmd() if limit is None else ["prlimit", f"--nofile={limit}:{limit}", "--", *wardian_cmd()]
    with apps.running_app(prefix="wd", command=command, extra_args=extra_args) as app:
        yield app


def descriptor_limit(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text(encoding="utf-8").splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-files line in /proc/PID/limits")


def console_port(home: Home) -> int:
    with AppClient(home) as client:
        return int(str(client.call("app/status")["console"]).rsplit(":", 1)[1])


def silent(connect: Callable[[], socket.socket], count: int) -> list[socket.socket]:
    """`count` connections that never send a byte (those the system refused are left out)."""
    out: list[socket.socket] = []
    for _ in range(count):
        with contextlib.suppress(OSError):
            out.append(connect())
    return out


def unix_connection(home: Home) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        try:
            sock.connect(str(home.socket_path))
        except OSError:
            sock.close()
            raise
        return sock
    return connect


def tcp_connection(port: int) -> Callable[[], socket.socket]:
    return lambda: socket.create_connection(("127.0.0.1", port), timeout=10)


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the other end has closed `sock` (EOF or reset), without waiting; what it sent before is read."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    while poller.poll(0):
        try:
            if not sock.recv(65536):  # readable: this returns at once
                return True
        except OSError:
            return True
    return False


def until(check: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Poll `check` every 50 ms until it holds, failing with `what` after `deadline_s`."""
    pause = threading.Event()
    for _ in range(int(deadline_s / 0.05)):
        if check():
            return
        pause.wait(0.05)
    raise AssertionError(what)


def http_get(port: int, path: str = "/") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def answered(home: Home) -> dict[str, Any]:
    with AppClient(home) as client:
        result = client.call("agent/list")
    assert isinstance(result, dict)
    return result


def test_r1_more_silent_connections_than_descriptors_leave_the_app_serving_and_are_closed() -> None:
    """R1: under `prlimit --nofile=256`, 300 silent connections to the control socket and 300 to the console: a new
    client of each is answered at once, the app stays alive, and every silent connection is closed by the app."""
    with limited_app(LIMIT, "--console", "127.0.0.1:0") as app:
        assert descriptor_limit(app.proc.pid) == LIMIT
        port = console_port(app.home)
        control = silent(unix_connection(app.home), FLOOD)
        console = silent(tcp_connection(port), FLOOD)
        try:
            assert len(control) == FLOOD
            assert len(console) == FLOOD
            assert answered(app.home)["agents"] == []
            assert http_get(port) in (200, 401)
            assert app.proc.poll() is None
            until(lambda: all(closed_by_peer(s) for s in control), "a silent control connection stayed open")
            until(lambda: all(closed_by_peer(s) for s in console), "a silent console connection stayed open")
            assert answered(app.home)["agents"] == []
            assert http_get(port) in (200, 401)
            assert app.proc.poll() is None
        finally:
            for sock in control + console:
                sock.close()


def set_soft_descriptor_limit(pid: int, limit: int) -> None:
    """The soft limit only (the kernel enforces it): raising it again needs no privilege."""
    subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={limit}:"], check=True)


def alive(app: apps.RunningApp) -> bool:
    assert app.proc.poll() is None, f"the app exited with {app.proc.returncode}"
    return True


def app_log(app: apps.RunningApp) -> str:
    return (app.home.root / "logs" / "app.log").read_text(encoding="utf-8")


def test_r2_accept_loops_outlive_emfile_log_it_once_and_serve_the_clients_that_waited() -> None:
    """R2: the running app's descriptor limit lowered below the descriptors it holds (`prlimit --pid`), so that every
    accept fails with EMFILE; a control client and a console client that connect meanwhile wait in the backlog, each
    accept loop logs the shortage once and goes on, and both clients are answered once the limit is raised again."""
    with limited_app(None, "--console", "127.0.0.1:0") as app, ThreadPoolExecutor(2) as pool:
        port = console_port(app.home)
        set_soft_descriptor_limit(app.proc.pid, 8)
        control = pool.submit(answered, app.home)
        console = pool.submit(http_get, port)
        until(lambda: alive(app) and "the control socket cannot accept a connection: EMFILE" in app_log(app)
              and "the web console cannot accept a connection: EMFILE" in app_log(app), "no accept met EMFILE")
        assert not control.done()
        assert not console.done()
        set_soft_descriptor_limit(app.proc.pid, 1024)
        assert control.result(DEADLINE_S)["agents"] == []
        assert console.result(DEADLINE_S) in (200, 401)
        assert answered(app.home)["agents"] == []
        assert app.proc.poll() is None
        assert app_log(app).count("the control socket cannot accept a connection: EMFILE") == 1
        assert app_log(app).count("the web console cannot accept a connection: EMFILE") == 1


def login_cookie(app: apps.RunningApp, port: int) -> str:
    """Log in to the console with a one-time URL from `wardian console`; the session cookie's `name=value`."""
    env = {**apps.app_env(), "WARDIAN_HOME": str(app.home.root)}
    proc = subprocess.run([*wardian_cmd(), "console", "--no-open", "--json"], env=env, capture_output=True,
                          timeout=90, check=True)
    url = urlsplit(json.loads(proc.stdout)["url"])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", f"{url.path}?{url.query}", headers={"Host": f"127.0.0.1:{port}"})
        response = conn.getresponse()
        response.read()
        assert response.status == 200
        return str(response.getheader("set-cookie")).split(";")[0]
    finally:
        conn.close()


def read_until(stream: socket.socket, marker: bytes) -> bytes:
    """Read `stream` (with its own timeout as the bound) until `marker` has come."""
    data = b""
    while marker not in data:
        chunk = stream.recv(65536)
        assert chunk, f"the stream ended before {marker!r}"
        data += chunk
    return data


def test_r3_the_idle_bound_closes_silent_connections_but_never_a_wait_or_a_live_stream() -> None:
    """R3: a silent control connection and a silent console connection are closed once the idle bound has passed,
    while a `mailbox/wait` that outlasts the bound is answered at its own end on a connection left open, and a console
    live stream opened before them still delivers a change made after it."""
    with limited_app(None, "--console", "127.0.0.1:0") as app, ThreadPoolExecutor(1) as pool, \
            AppClient(app.home) as waiter:
        port = console_port(app.home)
        agent = waiter.call("agent/add", {"name": "waiter", "provider": "codex"})
        token = waiter.call("agent/session", {"agent": agent["uuid"]})["session_id"]
        wait_ms = int((CONTROL_IDLE_S + 5) * 1000)
        wait = pool.submit(waiter.call_wait, "mailbox/wait", {"session": token, "timeout_ms": wait_ms}, wait_ms)
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as live:
            live.sendall(f"GET /events/agents HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                         f"Cookie: {login_cookie(app, port)}\r\n\r\n".encode())
            read_until(live, b"event: patch")
            control = unix_connection(app.home)()
            console = tcp_connection(port)()
            with control, console:
                until(lambda: closed_by_peer(control) and closed_by_peer(console), "a silent connection stayed open")
            with AppClient(app.home) as client:
                client.call("agent/add", {"name": "latecomer", "provider": "codex"})
            assert b"latecomer" in read_until(live, b"latecomer")
        result = wait.result(DEADLINE_S)
        assert (result["woke"], result["timed_out"]) == (False, True)
        connection = waiter.connect()
        assert {a["name"] for a in waiter.call("agent/list")["agents"]} == {"waiter", "latecomer"}
        assert waiter.connect() is connection


def test_r4_an_idle_connection_the_app_closed_costs_its_client_a_new_connection_never_an_uncertain_call() -> None:
    """R4: an `AppClient` kept open between calls (as the harness and scripts do) and the MCP server's pool: the app
    closes their idle connections at the bound; each next call is written once, on a new connection, and answered."""
    with limited_app(None) as app, AppClient(app.home) as client:
        pool = AppConnections(app.home)
        try:
            assert client.call("agent/list")["agents"] == []
            assert pool.call("agent/list", {})["agents"] == []
            first = client.connect()
            assert isinstance(first, socket.socket)  # POSIX: the control channel is a Unix socket
            # Opened after both went idle, so closed at the bound no earlier than they are.
            with unix_connection(app.home)() as later:
                until(lambda: closed_by_peer(later), "a silent connection stayed open")
            assert closed_by_peer(first)
            assert client.call("agent/add", {"name": "after", "provider": "codex"})["name"] == "after"
            assert client.requests_written == 2
            assert client.connect() is not first
            assert [a["name"] for a in pool.call("agent/list", {})["agents"]] == ["after"]
        finally:
            pool.close()


def wait_frame(token: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "mailbox/wait",
                       "params": {"session": token, "timeout_ms": 60_000}}).encode() + b"\n"


def test_r5_at_the_cap_with_every_connection_waiting_a_new_one_is_refused_with_app_busy_and_nothing_done() -> None:
    """R5: under `prlimit --nofile=256` the control socket holds at most 64 connections; with 64 minute-long waits in
    flight a new connection gets `app_busy` (a transport error: its request was not read, the agent it would have added
    does not exist), no wait is cut, and once a wait's client leaves a new call is answered."""
    cap = cap_for(LIMIT, MAX_CONTROL_CONNECTIONS)
    with limited_app(LIMIT) as app, AppClient(app.home) as client:
        agent = client.call("agent/add", {"name": "waiter", "provider": "codex"})
        token = client.call("agent/session", {"agent": agent["uuid"]})["session_id"]
        client.close()
        waits: list[socket.socket] = []
        try:
            for _ in range(cap):
                waits.append(unix_connection(app.home)())
                waits[-1].sendall(wait_frame(token))
            with pytest.raises(errors.AppBusy) as refused, AppClient(app.home) as late:
                late.call("agent/add", {"name": "refused", "provider": "codex"})
            assert refused.value.code == "app_busy"
            assert isinstance(refused.value, errors.TransportError)
            assert not any(closed_by_peer(s) for s in waits)
            waits.pop().close()
            until(lambda: waiting_or_busy(app.home) == cap - 1, "the app kept the wait of a client that left")
            assert [a["name"] for a in answered(app.home)["agents"]] == ["waiter"]
            assert app.proc.poll() is None
        finally:
            for sock in waits:
                sock.close()


def waiting_or_busy(home: Home) -> int | None:
    """The app's subscribed waits, or None when it refused the call as busy."""
    try:
        with AppClient(home) as client:
            return int(client.call("app/status")["waiting"])
    except errors.AppBusy:
        return None


def test_r6_at_the_console_cap_with_only_live_streams_a_new_request_gets_503_and_the_streams_go_on() -> None:
    """R6: under `prlimit --nofile=256` the console holds at most 64 connections; with 64 live streams open a new
    request is answered 503 and closed, the streams are neither cut nor stalled, and once one ends a page is served."""
    cap = cap_for(LIMIT, MAX_CONSOLE_CONNECTIONS)
    with limited_app(LIMIT, "--console", "127.0.0.1:0") as app:
        port = console_port(app.home)
        cookie = login_cookie(app, port)
        streams: list[socket.socket] = []
        try:
            for _ in range(cap):
                streams.append(socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S))
                streams[-1].sendall(f"GET /events/agents HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                                    f"Cookie: {cookie}\r\n\r\n".encode())
                read_until(streams[-1], b"event: patch")
            assert http_get(port) == 503
            with AppClient(app.home) as client:
                client.call("agent/add", {"name": "seen", "provider": "codex"})
            assert all(b"seen" in read_until(s, b"seen") for s in streams)
            streams.pop().close()
            until(lambda: http_get(port) == 401, "no page was served once a stream ended")
            assert app.proc.poll() is None
        finally:
            for sock in streams:
                sock.close()
