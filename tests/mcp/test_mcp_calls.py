"""The MCP server's pooled app connections (decision 0007): reused across calls, never a resent request.

A fake app on a real Unix socket plays the failures: it answers, closes idle connections, or closes mid-exchange.
"""

from __future__ import annotations

import gc
import os
import shutil
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import AppHandle, short_home
from wardian import errors
from wardian.client import AppClient
from wardian.home import Home
from wardian.mcp._calls import AppConnections, WaitExchange

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

# What the fake does with a request it read: answer it, answer then close the connection, or close silently.
Behaviour = Callable[[int], str]


class FakeApp:
    """A control socket that counts the requests it read and acts on each as `behaviour(n)` says."""

    def __init__(self, home: Home, behaviour: Behaviour) -> None:
        home.run_dir.mkdir(mode=0o700, parents=True)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(home.socket_path))
        os.chmod(home.socket_path, 0o600)  # as the app makes it: the client refuses a socket open to others
        self._listener.listen()
        self._behaviour = behaviour
        self.requests = 0
        self.connections = 0  # accepted so far
        self.closed = threading.Event()  # set each time the fake closes a connection
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self.requests += 1
                    action = self._behaviour(self.requests)
                    if action != "drop":
                        request = orjson.loads(line)
                        conn.sendall(orjson.dumps({"jsonrpc": "2.0", "id": request["id"],
                                                   "result": {"n": self.requests}}) + b"\n")
                    if action != "answer":
                        conn.shutdown(socket.SHUT_RDWR)
                        conn.close()
                        self.closed.set()
                        return

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def fake_home() -> Iterator[Home]:
    root = short_home("wf")
    try:
        yield Home(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_calls_reuse_one_connection(app: AppHandle) -> None:
    """Decision 0007, measured: one connection serves a server's sequential calls (a new one cost ~0.4 ms per call)."""
    pool = AppConnections(app.home)
    try:
        for _ in range(5):
            assert "agents" in pool.call("agent/list", {})
        assert pool.opened == 1
    finally:
        pool.close()


def test_an_app_error_keeps_the_connection(app: AppHandle) -> None:
    """The app's own error is a whole answer: the connection stays good and is reused."""
    pool = AppConnections(app.home)
    try:
        with pytest.raises(errors.WardianError):
            pool.call("mailbox/wait", {"session": "not-a-session", "timeout_ms": 0})
        pool.call("agent/list", {})
        assert pool.opened == 1
    finally:
        pool.close()


def test_a_pooled_connection_the_app_closed_while_idle_is_replaced_and_the_request_sent_once(fake_home: Home) -> None:
    """UNC-1 (never resend): nothing of the request was written on the closed connection, so it is sent once, on
    a new one."""
    fake = FakeApp(fake_home, lambda n: "answer-then-close" if n == 1 else "answer")
    pool = AppConnections(fake_home)
    try:
        assert pool.call("agent/list", {}) == {"n": 1}
        assert fake.closed.wait(10)
        assert pool.call("agent/list", {}) == {"n": 2}
        assert fake.requests == 2
        assert fake.connections == 2
    finally:
        pool.close()
        fake.close()


def test_a_wait_aborted_before_its_request_left_is_never_sent_even_on_a_kept_connection(fake_home: Home) -> None:
    """A kept connection the app closed is replaced by the client itself; but a wait's connection shut down by its
    abort fails the write the same way, and that wait must not be sent on a new connection instead."""
    fake = FakeApp(fake_home, lambda n: "answer")
    client = AppClient(fake_home)
    try:
        assert client.call("agent/list", {}) == {"n": 1}  # the connection is now a kept one
        exchange = WaitExchange()
        assert exchange.attach(client)
        exchange.abort("cancelled by the host")
        with pytest.raises(errors.TransportError):
            client.call_wait("mailbox/wait", {"session": "s", "timeout_ms": 1000}, 1000, reconnect=False)
        assert fake.requests == 1
        assert fake.connections == 1
        exchange.detach()
    finally:
        client.close()
        fake.close()


def test_a_connection_lost_mid_exchange_is_uncertain_never_resent_and_never_reused(fake_home: Home) -> None:
    """UNC-1: a request that left but whose answer was lost is DeliveryUncertain and never replayed; the broken
    connection is discarded."""
    fake = FakeApp(fake_home, lambda n: "drop" if n == 2 else "answer")
    pool = AppConnections(fake_home)
    try:
        pool.call("message/send", {})
        with pytest.raises(errors.DeliveryUncertain):
            pool.call("message/send", {})
        assert fake.requests == 2
        assert pool.call("agent/list", {}) == {"n": 3}
        assert pool.opened == 2
    finally:
        pool.close()
        fake.close()


def test_no_app_is_a_transport_error_without_a_retry_loop() -> None:
    """A fresh connection that cannot connect is final: AppNotRunning, nothing sent."""
    home = Home(Path(short_home("wn")))
    pool = AppConnections(home)
    try:
        with pytest.raises(errors.AppNotRunning):
            pool.call("agent/list", {})
        assert pool.opened == 1
    finally:
        os.rmdir(home.root)


def test_a_call_that_ends_after_the_pool_closed_leaves_no_connection_open(app: AppHandle,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (P3 fuzz target): a call still running when the server closed its connections (a wait the host
    cancelled, a call abandoned at stdin EOF) put its connection back into the closed pool, where nothing closed
    it: a socket left open (a ResourceWarning) per such call."""
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    pool = AppConnections(app.home)
    pool.call("agent/list", {})
    pool.close()
    assert "agents" in pool.call("agent/list", {})  # a late call still works, on a connection of its own
    del pool
    gc.collect()
    assert [str(u.exc_value) for u in unraisable] == []
