"""Waits the host gives up on free what they hold at once: their thread in `wardian mcp serve`, their app connection and
the app's subscription (mcp/server.py, mcp/_calls.py, app/server.py).

Two servers each run 32 minute-long `wait_agent` calls, 8 on the quick path (every wait thread) and 24 on the SDK's
path, 64 in all; then the host cancels every one (`notifications/cancelled`), or closes stdin. The servers' debug log
(stderr, written to a file read as it grows) says when each wait's thread is free again; the app shows its waits and
control connections (tests/app/observe.py).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.app.observe import app_is_idle, app_waiting, eventually
from tests.conftest import AppHandle
from tests.mcp.mcp_harness import RawServer, server_env
from wardian.home import ENV_HOME, ENV_SESSION
from wardian.mcp._quick import QUICK_WAIT_WORKERS
from wardian.mcp.server import StdioServer

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

SERVERS = 2
WAITS_PER_SERVER = 32  # QUICK_WAIT_WORKERS on the quick path, the rest on the SDK's (anyio runs up to 40 threads)
SETTLE_S = 10.0  # a bound on what the servers and the app do at once; reaching it is a failure


class _Server:
    """A `wardian mcp serve` on raw stdio JSON-RPC whose stderr log goes to a file that can be read as it grows."""

    def __init__(self, env: dict[str, str], name: str) -> None:
        self.name = name
        fd, name = tempfile.mkstemp(prefix="wardian-mcp-waits", suffix=".log")
        self.log_path = Path(name)
        try:
            self.raw = RawServer(env, stderr=fd)
        finally:
            os.close(fd)  # the server has its own copy

    def ids(self) -> list[str]:
        return [f"{self.name}-w{n}" for n in range(WAITS_PER_SERVER)]

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def freed(self) -> set[str]:
        """The requests whose wait thread the server says is free again."""
        return set(re.findall(r"the wait thread of request '([^']+)' is free again", self.log()))

    def close(self) -> None:
        self.raw.kill()
        os.unlink(self.log_path)


@contextmanager
def _servers(app: AppHandle, token: str) -> Iterator[list[_Server]]:
    with ExitStack() as stack:
        servers = []
        for n in range(SERVERS):
            server = _Server(server_env(str(app.home.root), token, WARDIAN_LOG_LEVEL="DEBUG"), f"s{n}")
            stack.callback(server.close)
            server.raw.initialize()
            servers.append(server)
        yield servers


def _wait_call(id_: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call",
            "params": {"name": "wait_agent", "arguments": {"timeout_ms": 60_000}}}


def _start_waits(app: AppHandle, servers: list[_Server]) -> None:
    """Every server's waits, in flight in the app (64 subscribed), on both paths of each server."""
    for server in servers:
        for id_ in server.ids():
            server.raw.send(_wait_call(id_))
    eventually(lambda: app_waiting(app) == SERVERS * WAITS_PER_SERVER, "every wait to be subscribed in the app", 90)
    for server in servers:
        log = server.log()
        assert log.count("tools/call wait_agent on the quick path") == QUICK_WAIT_WORKERS
        assert log.count("tools/call wait_agent goes to the SDK") == WAITS_PER_SERVER - QUICK_WAIT_WORKERS


def test_sixty_four_cancelled_minute_long_waits_leave_no_busy_thread_and_no_app_connection(app: AppHandle) -> None:
    """64 minute-long waits over two servers, both paths, each cancelled by the host: every wait thread is free
    again, the app has no wait subscribed and no connection open, and the servers go on serving, answering no
    cancelled wait."""
    _, token = app.add_agent()
    with _servers(app, token) as servers:
        _start_waits(app, servers)
        for server in servers:
            for id_ in server.ids():
                server.raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                 "params": {"requestId": id_, "reason": "the user stopped"}})
        eventually(lambda: app_is_idle(app), "the app to end every cancelled wait and close its connection",
                   SETTLE_S)
        for server in servers:
            eventually(lambda s=server: s.freed() == set(s.ids()), f"every wait thread of {server.name} to be free",
                       SETTLE_S)
            assert server.raw.request(1, "ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}
            code, rest, _ = server.raw.close(timeout=20)
            assert code == 0
            assert [orjson.loads(line)["id"] for line in [*server.raw.stdout_lines, *rest.splitlines()]] == [0, 1]


def test_sixty_four_minute_long_waits_ended_by_stdin_eof_leave_no_busy_thread_and_no_app_connection(
        app: AppHandle) -> None:
    """64 minute-long waits over two servers, both paths, then stdin EOF: each server aborts its waits at once (no
    answer written), every wait thread is free again before the server exits (code 0), and the app has no wait
    subscribed and no connection open."""
    _, token = app.add_agent()
    with _servers(app, token) as servers:
        _start_waits(app, servers)
        for server in servers:
            code, rest, _ = server.raw.close(timeout=SETTLE_S)
            assert code == 0
            assert rest == b""  # nothing after the answer to initialize
            assert server.freed() == set(server.ids())
        eventually(lambda: app_is_idle(app), "the app to end every abandoned wait and close its connection", SETTLE_S)


def test_a_cancelled_wait_frees_its_thread_within_100_ms_on_either_path(app: AppHandle) -> None:
    """In process: nine minute-long waits, eight on the quick path and one on the SDK's, all cancelled by the host:
    within 100 ms of the cancellations no thread of the server is held by a wait (`StdioServer.wait_threads`)."""
    _, token = app.add_agent()
    server = StdioServer(lambda data: None, {ENV_HOME: str(app.home.root), ENV_SESSION: token})
    server.start()
    ids = [f"w{n}" for n in range(QUICK_WAIT_WORKERS + 1)]
    try:
        server.deliver(orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}))
        server.deliver(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        for id_ in ids:
            server.deliver(orjson.dumps(_wait_call(id_)))
        eventually(lambda: app_waiting(app) == len(ids), "every wait to be subscribed in the app", 60)
        assert server.wait_threads() == len(ids)
        cancelled = time.monotonic()
        for id_ in ids:
            server.deliver(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                         "params": {"requestId": id_}}))
        while server.wait_threads() and time.monotonic() - cancelled < SETTLE_S:
            time.sleep(0.001)
        freed_after = time.monotonic() - cancelled
        assert server.wait_threads() == 0
        assert freed_after < 0.1, f"the wait threads were free only {freed_after * 1000:.0f} ms after the cancellations"
        eventually(lambda: app_is_idle(app), "the app to end every cancelled wait", SETTLE_S)
    finally:
        server.finish()
        server.sdk.join(SETTLE_S)
