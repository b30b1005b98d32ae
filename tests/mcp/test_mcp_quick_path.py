"""The quick path of `tools/call` answers exactly what the SDK's handler answers, call by call (#3).

`wardian mcp serve` runs a `tools/call` of a tool that never waits itself (`_front.QUICK_TOOLS`); with
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


def _mask(value: Any) -> Any:
    """The answer with per-call values replaced by their type (a fresh send gets a fresh id and time)."""
    if isinstance(value, dict):
        return {k: (type(v).__name__ if k in _VOLATILE and v is not None else _mask(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    if isinstance(value, str) and value.startswith("{"):
        return _mask(orjson.loads(value))  # the text block is the structured result as JSON
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


def test_the_quick_tools_are_the_tools_that_never_wait() -> None:
    assert {t.name for t in TOOLS if t.wait_argument is None} == QUICK_TOOLS
    assert {"send_message", "followup_task", "reply", "interrupt_agent", "list_agents"} == QUICK_TOOLS


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


@pytest.mark.parametrize(("name", "arguments", "code"), [
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
    {"name": "wait_agent", "arguments": {"timeout_ms": 0}},
    {"name": "no_such_tool", "arguments": {}},
    {"name": "list_agents", "arguments": {}, "extra": 1},
])
def test_what_the_quick_path_does_not_take_is_still_answered(
        both: tuple[_Both, dict[str, Any], dict[str, Any]], params: dict[str, Any]) -> None:
    """Odd shapes, waits and unknown tools go to the SDK, which answers them as before."""
    calls, _, _ = both
    calls.next_id += 1
    answer = calls.quick.request(calls.next_id, "tools/call", params)
    assert answer["id"] == calls.next_id
    assert ("result" in answer) != ("error" in answer)
