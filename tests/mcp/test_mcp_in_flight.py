"""Requests in flight in `wardian mcp serve`: waits on the quick path, and cancellation on both paths (decision 0007).

Waits have threads of their own (`QUICK_WAIT_WORKERS`), so they never hold up a call that does not wait, and a
wait beyond them goes to the SDK. MCP cancellation: the receiver should not answer a cancelled request, and the
sender ignores a late answer. Here a cancelled request handed to the SDK stops counting as outstanding at once (so
`ping` and `tools/list` are answered from constant data again, and stdin EOF need not wait for it), the SDK's late
answer, if any, is dropped, and a cancelled quick-path call writes nothing, even when its app exchange ends later.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from tests.conftest import AppHandle
from tests.mcp.mcp_harness import raw_server, server_env
from wardian.home import ENV_HOME, ENV_SESSION
from wardian.mcp._book import Outstanding
from wardian.mcp._frames import cancelled_request
from wardian.mcp._quick import QUICK_WAIT_WORKERS
from wardian.mcp.server import ENV_QUICK_PATH, StdioServer
from wardian.protocol.tools import TOOLS

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

WAIT_TIMEOUT_S = 30.0  # a bound on waiting for what takes milliseconds; reaching it is a failure


def _line(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message)


INITIALIZE = _line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "in-flight-tests", "version": "0"}}})
INITIALIZED = _line({"jsonrpc": "2.0", "method": "notifications/initialized"})


def _wait_call(id_: Any, tool: str = "wait_agent") -> bytes:
    return _line({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                  "params": {"name": tool, "arguments": {"timeout_ms": 60_000}}})


def _cancel(id_: Any) -> bytes:
    return _line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id_,
                                                                                      "reason": "the user stopped"}})


def _ping(id_: Any) -> bytes:
    return _line({"jsonrpc": "2.0", "id": id_, "method": "ping"})


class _Written:
    """What an in-process server writes, one JSON-RPC message per call of `write`."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._changed = threading.Condition()

    def write(self, data: bytes) -> None:
        assert data.endswith(b"\n")
        assert data.count(b"\n") == 1
        with self._changed:
            self.messages.append(orjson.loads(data))
            self._changed.notify_all()

    def answer(self, id_: Any) -> dict[str, Any]:
        """The answer to `id_`, once written."""
        with self._changed:
            assert self._changed.wait_for(lambda: any(m.get("id") == id_ for m in self.messages), WAIT_TIMEOUT_S)
            return next(m for m in self.messages if m.get("id") == id_)

    def ids(self) -> list[Any]:
        with self._changed:
            return [m.get("id") for m in self.messages]


class _Logged(logging.Handler):
    """The server's log records, which a test can wait for (its observable, as its stderr is in a real process)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []
        self._changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._changed:
            self.messages.append(record.getMessage())
            self._changed.notify_all()

    def wait_for(self, text: str) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: any(text in m for m in self.messages), WAIT_TIMEOUT_S), text

    def count(self, text: str) -> int:
        with self._changed:
            return sum(text in m for m in self.messages)


@pytest.fixture
def logged() -> Iterator[_Logged]:
    logger = logging.getLogger("wardian.mcp")
    handler, level = _Logged(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.mark.parametrize(("message", "named"), [
    ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5, "reason": "x"}}, 5),
    ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "5"}}, "5"),
    ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": True}}, None),
    ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1.5}}, None),
    ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}, None),
    ({"jsonrpc": "2.0", "method": "notifications/cancelled"}, None),
    ({"jsonrpc": "2.0", "id": 1, "method": "notifications/cancelled", "params": {"requestId": 5}}, None),
    ({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"requestId": 5}}, None),
])
def test_a_cancellation_names_one_request_id_exactly(message: dict[str, Any], named: Any) -> None:
    """MCP cancellation: `params.requestId` of a `notifications/cancelled` notification, a string or an integer."""
    assert cancelled_request(message) == named
    assert type(cancelled_request(message)) is type(named)


# --- the count of requests handed to the SDK -----------------------------------------------------------------


def test_a_cancelled_request_stops_being_outstanding_and_its_late_answer_is_dropped() -> None:
    """T5: the count returns to zero at the cancellation; a late SDK answer writes nothing and the count
    never goes below zero."""
    outstanding = Outstanding()
    written: list[str] = []
    outstanding.add(5)
    outstanding.add("other")
    assert outstanding.cancel(5)
    assert not outstanding.cancel(5)  # once
    assert not outstanding.cancel("never sent")
    assert outstanding  # "other" is still outstanding
    assert outstanding.unsettled() == 1
    assert not outstanding.answer(5, lambda: written.append("late answer to 5"))
    assert outstanding.answer("other", lambda: written.append("answer to other"))
    assert written == ["answer to other"]
    assert not outstanding
    assert outstanding.unsettled() == 0
    # Anything more about these ids changes no count (and an answer to an unknown id is simply written).
    assert outstanding.answer(5, lambda: written.append("a stray answer"))
    outstanding.unanswered(5)
    outstanding.add(6)
    assert outstanding
    outstanding.unanswered(5)
    assert outstanding


def test_a_request_the_sdk_ends_unanswered_is_settled() -> None:
    """The SDK's `on_request_unanswered` hook settles a cancelled request. Ids match exactly (JSON-RPC: "7" is not
    7); the SDK takes a cancellation's "7" for request 7 too, and its hook then releases that request."""
    outstanding = Outstanding()
    outstanding.add(7)
    outstanding.add(8)
    assert outstanding.cancel(7)
    outstanding.unanswered(7)
    assert outstanding.unsettled() == 0
    assert not outstanding.cancel("8")
    assert outstanding
    outstanding.unanswered(8)
    assert not outstanding
    assert outstanding.wait_idle(0)


# --- in process, against a real app --------------------------------------------------------------------------


@pytest.fixture
def caller(app: AppHandle) -> tuple[AppHandle, dict[str, Any], str, str]:
    me, token = app.add_agent()
    _, peer_token = app.add_agent()
    return app, me, token, peer_token


def _wake(app: AppHandle, me: dict[str, Any], peer_token: str) -> None:
    """A message for `me`: the app ends `me`'s waits (an abandoned exchange ends instead of holding its thread)."""
    app.call("message/send", {"session": peer_token, "target": me["uuid"], "message": "wake up"})


def test_after_the_host_cancels_a_wait_handed_to_the_sdk_ping_is_answered_from_constant_data(
        caller: tuple[AppHandle, dict[str, Any], str, str], logged: _Logged) -> None:
    """T5: a wait in the SDK's hands, cancelled by the host -> nothing outstanding; `ping` and `tools/list`
    get the constant answers again; the SDK ends the request unanswered and nothing is ever written for it."""
    app, me, token, peer_token = caller
    written = _Written()
    server = StdioServer(written.write, {ENV_HOME: str(app.home.root), ENV_SESSION: token, ENV_QUICK_PATH: "0"})
    server.start()
    try:
        for line in (INITIALIZE, INITIALIZED, _wait_call(5), _ping(6)):
            server.deliver(line)
        # The SDK answered the ping it read after the wait: the wait is in its hands, its handler running.
        assert written.answer(6)["result"] == {}
        assert logged.count("answered ping from constant data") == 0
        assert server.outstanding
        server.deliver(_cancel(5))
        assert not server.outstanding
        server.deliver(_ping(7))
        server.deliver(_line({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}))
        assert written.ids()[-2:] == [7, 8]  # written by `deliver` itself: the constant answers
        assert logged.count("answered ping from constant data") == 1
        assert logged.count("answered tools/list from constant data") == 1
        logged.wait_for("request 5 ended unanswered after the host cancelled it")
        assert server.outstanding.unsettled() == 0
        _wake(app, me, peer_token)
    finally:
        server.finish()
        server.sdk.join(WAIT_TIMEOUT_S)
    assert not server.sdk.is_alive()
    assert sorted(written.ids()) == [0, 6, 7, 8]  # 5 never answered; nothing twice


def test_a_cancelled_quick_wait_writes_no_answer_when_its_exchange_ends(
        caller: tuple[AppHandle, dict[str, Any], str, str], logged: _Logged) -> None:
    """T5: a quick-path wait cancelled by the host gets no answer, even though the app answers its exchange
    later (which is dropped, never resent); a wait not cancelled is answered."""
    app, me, token, peer_token = caller
    written = _Written()
    server = StdioServer(written.write, {ENV_HOME: str(app.home.root), ENV_SESSION: token})
    server.start()
    try:
        for line in (INITIALIZE, INITIALIZED, _wait_call("w"), _wait_call("r", "receive_messages"),
                     _wait_call("kept")):
            server.deliver(line)
        assert logged.count("tools/call wait_agent on the quick path") == 2
        server.deliver(_cancel("w"))
        server.deliver(_cancel("r"))
        assert logged.count("the host cancelled request") == 2
        _wake(app, me, peer_token)
        assert written.answer("kept")["result"]["structuredContent"]["woke"] is True
        logged.wait_for("dropped the answer to request 'w' (wait_agent)")
        logged.wait_for("dropped the answer to request 'r' (receive_messages)")
        server.deliver(_ping(9))
        assert written.answer(9)["result"] == {}
    finally:
        server.finish()
        server.sdk.join(WAIT_TIMEOUT_S)
    assert sorted(written.ids(), key=str) == [0, 9, "kept"]


def test_a_cancellation_after_the_answer_changes_nothing(
        caller: tuple[AppHandle, dict[str, Any], str, str]) -> None:
    """A cancellation that arrives after the quick path answered is ignored: one answer, nothing else written."""
    app, _, token, _ = caller
    written = _Written()
    server = StdioServer(written.write, {ENV_HOME: str(app.home.root), ENV_SESSION: token})
    server.start()
    try:
        for line in (INITIALIZE, INITIALIZED, _line({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                                     "params": {"name": "wait_agent",
                                                                "arguments": {"timeout_ms": 0}}})):
            server.deliver(line)
        assert written.answer(3)["result"]["structuredContent"]["timed_out"] is True
        server.deliver(_cancel(3))
        server.deliver(_ping(4))
        assert written.answer(4)["result"] == {}
    finally:
        server.finish()
        server.sdk.join(WAIT_TIMEOUT_S)
    assert written.ids() == [0, 3, 4]


def test_waits_never_hold_up_other_calls_and_a_wait_beyond_the_pool_goes_to_the_sdk(
        caller: tuple[AppHandle, dict[str, Any], str, str], logged: _Logged) -> None:
    """M6 (waits don't block other calls): with every wait thread taken by a 60 s wait, a
    send and a list are answered at once, one more wait is served by the SDK, and one message wakes them all."""
    app, me, token, peer_token = caller
    written = _Written()
    server = StdioServer(written.write, {ENV_HOME: str(app.home.root), ENV_SESSION: token})
    server.start()
    waits = [f"wait-{n}" for n in range(QUICK_WAIT_WORKERS + 1)]
    try:
        server.deliver(INITIALIZE)
        server.deliver(INITIALIZED)
        for id_ in waits:
            server.deliver(_wait_call(id_))
        assert logged.count("tools/call wait_agent on the quick path") == QUICK_WAIT_WORKERS
        assert logged.count(f"tools/call wait_agent goes to the SDK: {QUICK_WAIT_WORKERS} waits are in flight") == 1
        server.deliver(_line({"jsonrpc": "2.0", "id": "list", "method": "tools/call",
                              "params": {"name": "list_agents", "arguments": {}}}))
        assert written.answer("list")["result"]["structuredContent"]["caller"]["uuid"] == me["uuid"]
        assert not set(waits) & set(written.ids())  # still waiting
        _wake(app, me, peer_token)
        for id_ in waits:
            assert written.answer(id_)["result"]["structuredContent"]["woke"] is True
    finally:
        server.finish()
        server.sdk.join(WAIT_TIMEOUT_S)
    assert sorted(written.ids(), key=str) == sorted([0, "list", *waits], key=str)


# --- in a real process ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("quick_path", ["1", "0"])
def test_a_cancelled_wait_is_never_answered_and_stdin_eof_ends_the_server(
        caller: tuple[AppHandle, dict[str, Any], str, str], quick_path: str) -> None:
    """T5, on both paths: after the host cancels a wait, ping is answered (from constant data once nothing is
    outstanding), the woken wait's answer never reaches stdout, and stdin EOF ends the server with exit code 0."""
    app, me, token, peer_token = caller
    env = server_env(str(app.home.root), token, WARDIAN_LOG_LEVEL="DEBUG", WARDIAN_MCP_QUICK_PATH=quick_path)
    with raw_server(env) as server:
        server.initialize()
        server.send_raw(_wait_call(5) + b"\n")
        assert server.request(6, "ping")["result"] == {}
        server.send_raw(_cancel(5) + b"\n")
        assert server.request(7, "ping")["result"] == {}
        assert len(server.request(8, "tools/list")["result"]["tools"]) == len(TOOLS)
        _wake(app, me, peer_token)
        code, rest, stderr = server.close(timeout=20)
    assert code == 0
    ids = [orjson.loads(line)["id"] for line in server.stdout_lines + [x for x in rest.split(b"\n") if x]]
    assert ids == [0, 6, 7, 8]
    log = stderr.decode("utf-8", "replace")
    assert "the host cancelled request 5" in log
    assert "answered tools/list from constant data" in log
    assert "Traceback" not in log
