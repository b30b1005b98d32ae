"""The quick path of `tools/call` answers exactly what the SDK's handler answers, call by call (decision 0007).

`wardian mcp serve` runs a `tools/call` of any of its tools itself (`_front.QUICK_TOOLS`), waits included; with
`WARDIAN_MCP_QUICK_PATH=0` the same call goes to the SDK's low-level server. Each call is made here on one server
of each kind, for the same caller of one running app, and the two answers must be the same JSON but for what
differs between two calls anyway (ids, timestamps).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest

from tests.conftest import AppHandle
from tests.mcp.mcp_harness import RawServer, raw_server, server_env
from wardian.mcp._front import QUICK_TOOLS
from wardian.protocol.tools import TOOLS

_VOLATILE = ("interaction_id", "request_id", "created_at", "reply_id", "turn_id")


def _mask(value: Any, timing: frozenset[str] = frozenset()) -> Any:
    """The answer with per-call values replaced by their type (a fresh send gets a fresh id and time), and the
    values of the keys in `timing` (which depend on when the app ran the call, not on the path) left out."""
    if isinstance(value, dict):
        return {k: (type(v).__name__ if k in _VOLATILE and v is not None else _mask(v, timing))
                for k, v in value.items() if k not in timing}
    if isinstance(value, list):
        return [_mask(v, timing) for v in value]
    if isinstance(value, str) and value.startswith("{"):
        return _mask(orjson.loads(value), timing)  # the text block is the structured result as JSON
    return value


class _Both:
    def __init__(self, quick: RawServer, sdk: RawServer) -> None:
        self.quick = quick
        self.sdk = sdk
        self.next_id = 1
        self.compared = 0

    def call(self, server: RawServer, name: str, arguments: dict[str, Any] | None,
             meta: dict[str, Any] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        if meta is not None:
            params["_meta"] = meta
        self.next_id += 1
        answer = server.request(self.next_id, "tools/call", params)
        assert answer["id"] == self.next_id
        return answer

    def compare(self, name: str, arguments: dict[str, Any] | None,
                meta: dict[str, Any] | None = None) -> dict[str, Any]:
        self.compared += 1
        quick = self.call(self.quick, name, arguments, meta)
        sdk = self.call(self.sdk, name, arguments, meta)
        assert _mask(quick["result"]) == _mask(sdk["result"])
        assert quick.keys() == sdk.keys() == {"jsonrpc", "id", "result"}
        return quick


@contextmanager
def _servers(home: str, token: str) -> Iterator[_Both]:
    with raw_server(server_env(home, token, WARDIAN_LOG_LEVEL="DEBUG")) as quick, \
            raw_server(server_env(home, token, WARDIAN_MCP_QUICK_PATH="0", WARDIAN_LOG_LEVEL="DEBUG")) as sdk:
        quick.initialize()
        sdk.initialize()
        calls = _Both(quick, sdk)
        yield calls
        _, _, quick_log = quick.close()
        _, _, sdk_log = sdk.close()
    assert (b"on the quick path" in quick_log) == bool(calls.compared)  # each side took the path it should
    assert b"on the quick path" not in sdk_log


@pytest.fixture
def both(app: AppHandle) -> Iterator[tuple[_Both, dict[str, Any], dict[str, Any]]]:
    me, token = app.add_agent()
    peer, _ = app.add_agent()
    with _servers(str(app.home.root), token) as calls:
        yield calls, me, peer


def test_every_tool_takes_the_quick_path() -> None:
    """Decision 0007: the waits too, so a first wait does not wait for the SDK's import."""
    assert {t.name for t in TOOLS} == QUICK_TOOLS


def test_successes_are_the_sdks_answers(both: tuple[_Both, dict[str, Any], dict[str, Any]]) -> None:
    calls, _, peer = both
    answer = calls.compare("send_message", {"target": peer["uuid"], "message": "hello"})
    assert answer["result"]["isError"] is False
    assert answer["result"]["structuredContent"]["delivery"] == "admitted"
    assert calls.compare("followup_task", {"target": peer["name"], "message": "do it"})["result"]["isError"] is False
    assert calls.compare("list_agents", None)["result"]["isError"] is False
    assert calls.compare("list_agents", {})["result"]["isError"] is False
    codex_meta = {"callId": "call_1", "progressToken": 1, "x-codex-turn-metadata": {"turn_id": "t"}}
    assert calls.compare("send_message", {"target": peer["uuid"], "message": "hi"}, codex_meta)["result"][
        "isError"] is False


def test_waits_that_time_out_are_the_sdks_answers(both: tuple[_Both, dict[str, Any], dict[str, Any]]) -> None:
    """Decision 0007: on an empty mailbox, a wait checked at once and one that waits its whole timeout."""
    calls, _, _ = both
    for timeout_ms in (0, 50):
        answer = calls.compare("wait_agent", {"timeout_ms": timeout_ms})["result"]
        assert answer["structuredContent"] == {"woke": False, "timed_out": True, "wake_reason": None}
        answer = calls.compare("receive_messages", {"timeout_ms": timeout_ms, "limit": 5})["result"]
        assert answer["structuredContent"]["records"] == []
        assert answer["structuredContent"]["timed_out"] is (timeout_ms > 0)
    assert calls.compare("receive_messages", None)["result"]["structuredContent"]["timed_out"] is False


def test_waits_that_wake_are_the_sdks_answers(app: AppHandle) -> None:
    """Decision 0007: a wait in flight on each path, woken by one send, answers the same; then a receive that wakes."""
    me, token = app.add_agent()
    _, peer_token = app.add_agent()
    with _servers(str(app.home.root), token) as calls:
        for n, (name, arguments) in enumerate((("wait_agent", {"timeout_ms": 30_000}),
                                               ("receive_messages", {"timeout_ms": 30_000, "limit": 5}))):
            for server in (calls.quick, calls.sdk):
                server.send({"jsonrpc": "2.0", "id": f"{name}-{n}", "method": "tools/call",
                             "params": {"name": name, "arguments": arguments}})
            calls.compared += 1
            app.call("message/send", {"session": peer_token, "target": me["uuid"], "message": f"wake {n}"})
            quick, sdk = calls.quick.read(), calls.sdk.read()
            assert quick["id"] == sdk["id"] == f"{name}-{n}"
            # A receive that first reads after the send's commit returns the record without having waited, and so
            # with no wake reason; which one does is the app's timing, not the path's (wait_agent says
            # mailbox_activity either way).
            timing = frozenset({"wake_reason"} if name == "receive_messages" else ())
            assert _mask(quick["result"], timing) == _mask(sdk["result"], timing)
            result = quick["result"]["structuredContent"]
            assert result["wake_reason"] in ("mailbox_activity", None)
            if name == "wait_agent":
                assert result == {"woke": True, "timed_out": False, "wake_reason": "mailbox_activity"}
                # Acknowledge the message, so the receive below waits for the next one.
                page = calls.call(calls.quick, "receive_messages", {"limit": 5})["result"]["structuredContent"]
                assert calls.call(calls.quick, "receive_messages", {"ack_cursor": page["cursor"], "limit": 1})[
                    "result"]["structuredContent"]["acked"] == 1
            else:
                assert [r["text"] for r in result["records"]] == [f"wake {n}"]


@pytest.mark.parametrize(("name", "arguments", "code"), [
    ("wait_agent", {"timeout_ms": 60_001}, "invalid_timeout"),
    ("wait_agent", {"timeout_ms": 0, "session": "forged"}, "invalid_arguments"),
    ("receive_messages", {"cursor": "cur1_forged"}, "invalid_cursor"),
    ("receive_messages", {"limit": 0}, "invalid_limit"),
    ("send_message", {"target": "nobody", "message": "hi"}, "unknown_target"),
    ("send_message", {"target": "all", "message": "hi"}, "broadcast_not_allowed"),
    ("send_message", {"message": "hi"}, "invalid_target"),
    ("followup_task", {"target": "x", "message": ""}, "empty_message"),
    ("followup_task", {"target": "x", "message": "hi", "sender": "me"}, "invalid_arguments"),
    ("reply", {"request_id": "ask_nope", "status": "done", "message": "ok"}, "unknown_request"),
    ("reply", {"request_id": "ask_nope", "status": "maybe", "message": "ok"}, "invalid_status"),
    ("interrupt_agent", {"target": "nobody"}, "unknown_target"),
    ("list_agents", {"session": "forged"}, "invalid_arguments"),
])
def test_errors_are_the_sdks_answers(both: tuple[_Both, dict[str, Any], dict[str, Any]], name: str,
                                     arguments: dict[str, Any], code: str) -> None:
    calls, _, _ = both
    answer = calls.compare(name, arguments)
    assert answer["result"]["isError"] is True
    assert answer["result"]["structuredContent"]["error"]["code"] == code


def test_an_app_that_is_gone_is_the_same_error_on_both_paths(app: AppHandle) -> None:
    _, token = app.add_agent()
    with _servers(str(app.home.root) + "-nowhere", token) as calls:
        answer = calls.compare("list_agents", None)
        assert answer["result"]["structuredContent"]["error"]["code"] == "app_not_running"


@pytest.mark.parametrize("params", [
    {"name": "send_message", "arguments": ["not", "an", "object"]},
    {"name": "wait_agent", "arguments": {"timeout_ms": 0}, "extra": 1},
    {"name": "no_such_tool", "arguments": {}},
    {"name": "list_agents", "arguments": {}, "extra": 1},
])
def test_what_the_quick_path_does_not_take_is_still_answered(
        both: tuple[_Both, dict[str, Any], dict[str, Any]], params: dict[str, Any]) -> None:
    """Odd shapes and unknown tools go to the SDK, which answers them as before."""
    calls, _, _ = both
    calls.next_id += 1
    answer = calls.quick.request(calls.next_id, "tools/call", params)
    assert answer["id"] == calls.next_id
    assert ("result" in answer) != ("error" in answer)
