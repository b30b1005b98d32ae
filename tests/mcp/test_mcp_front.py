"""The constant discovery answers of `wardian mcp serve` are the SDK's own, and the SDK takes over correctly
(decision 0007).

The front answers `initialize`, `tools/list` and `ping` without importing the SDK; these tests check its answers
against the SDK's low-level server run in-process (the same `build_server` the process runs), for every
handshake version and for generated `initialize` params, and check in real processes that a call arriving
before the SDK is ready waits for it and that nothing is answered twice.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage
from mcp_types import version as sdk_versions

from tests.conftest import AppHandle
from tests.mcp.mcp_harness import RawServer, mcp_server, raw_server, server_env
from wardian.mcp._calls import Caller
from wardian.mcp._front import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    QUICK_TOOLS,
    REPLAY_ID_PREFIX,
    Front,
)
from wardian.mcp._sdk import build_server
from wardian.protocol.tools import TOOL_NAMES

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

CLIENT_INFO = {"name": "wardian-tests", "version": "0"}


def sdk_answers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the SDK's low-level server of `wardian mcp serve` answers to `messages`, serialized as the server
    writes it (`model_dump_json(by_alias=True, exclude_unset=True)`)."""
    server = build_server(Caller({}))
    answers: list[dict[str, Any]] = []

    async def run() -> None:
        to_server, server_in = anyio.create_memory_object_stream[Any](16)
        server_out, from_server = anyio.create_memory_object_stream[Any](16)
        async with to_server, server_in, server_out, from_server, anyio.create_task_group() as tg:
            tg.start_soon(server.run, server_in, server_out, server.create_initialization_options())
            for message in messages:
                await to_server.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))
                if "id" in message:
                    with anyio.fail_after(10):
                        answer = await from_server.receive()
                    answers.append(orjson.loads(answer.message.model_dump_json(by_alias=True, exclude_unset=True)))
            tg.cancel_scope.cancel()

    anyio.run(run)
    return answers


def front_answers(messages: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """The front's answers to `messages` (None where it hands a request to the SDK)."""
    front = Front()
    out: list[dict[str, Any] | None] = []
    for message in messages:
        route = front.route(message, sdk_busy=False)
        if "id" in message:
            out.append(orjson.loads(route.answer) if route.answer is not None else None)
    return out


def handshake(version: str, **params: Any) -> list[dict[str, Any]]:
    init = {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO, **params}
    return [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": "p", "method": "ping", "params": {}}]


def test_the_handshake_versions_are_those_the_sdk_negotiates() -> None:
    """Our copy of the SDK's version table (the front cannot import it) is the SDK's own."""
    assert HANDSHAKE_PROTOCOL_VERSIONS == sdk_versions.HANDSHAKE_PROTOCOL_VERSIONS
    assert LATEST_HANDSHAKE_VERSION == sdk_versions.LATEST_HANDSHAKE_VERSION


@pytest.mark.parametrize("version", [*sdk_versions.HANDSHAKE_PROTOCOL_VERSIONS, *sdk_versions.MODERN_PROTOCOL_VERSIONS,
                                     "1999-01-01", ""])
def test_the_constant_answers_are_the_sdks_own_for_every_version_a_client_may_ask_for(version: str) -> None:
    """Decision 0007: initialize (negotiated version, capabilities, serverInfo, instructions), tools/list (every tool's
    inputSchema and annotations) and ping are exactly what the SDK answers."""
    messages = handshake(version)
    expected = sdk_answers(messages)
    assert "result" in expected[0]
    assert len(expected[1]["result"]["tools"]) == len(TOOL_NAMES)
    assert front_answers(messages) == expected


def test_a_connection_opening_with_another_request_is_left_to_the_sdk() -> None:
    """The front answers initialize only as the opening request; tools/list before it is the SDK's (an error)."""
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, *handshake(LATEST_HANDSHAKE_VERSION)]
    assert front_answers(messages) == [None, None, None, None]
    assert "error" in sdk_answers(messages)[0]


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "next"}},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": None},
    {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {"progressToken": 1}}},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
     "params": {"name": "list_agents", "arguments": {}, "_meta": {"progressToken": 1.5}}},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_agents", "_meta": "x"}},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_agents", "arguments": []}},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": None},
    {"jsonrpc": "2.0", "id": 2 ** 70, "method": "tools/call", "params": {"name": "list_agents"}},
    {"jsonrpc": "2.0", "id": 2 ** 70, "method": "ping"},
], ids=["cursor", "params-null", "meta", "call-meta-float", "call-meta-str",
                             "arguments-list", "unknown-tool",
        "call-params-null", "call-huge-id", "huge-id"])
def test_requests_the_front_cannot_vouch_for_go_to_the_sdk(message: dict[str, Any]) -> None:
    """Any doubt hands the request to the SDK: params, _meta, a tool that does not exist, arguments that are not an
    object, an id orjson cannot write back."""
    front = Front()
    assert front.route(handshake(LATEST_HANDSHAKE_VERSION)[0], sdk_busy=False).answer is not None
    route = front.route(message, sdk_busy=False)
    assert route.answer is None
    assert route.quick is None
    assert route.forward == message


@pytest.mark.parametrize("sdk_busy", [False, True])
def test_a_plain_call_of_any_tool_takes_the_quick_path(sdk_busy: bool) -> None:
    """Decision 0007 (waits too): the quick path answers it (tests/mcp/test_mcp_quick_path.py compares its
    answers with the SDK's); like the SDK's concurrent handlers, it may overtake a wait still running."""
    front = Front()
    front.route(handshake(LATEST_HANDSHAKE_VERSION)[0], sdk_busy=False)
    for tool in QUICK_TOOLS:
        message = {"jsonrpc": "2.0", "id": "c1", "method": "tools/call", "params": {"name": tool, "arguments": {}}}
        route = front.route(message, sdk_busy=sdk_busy)
        assert route.forward is None
        assert route.quick is not None
        assert route.quick.spec.name == tool
        assert route.quick.waits == (tool in ("wait_agent", "receive_messages"))
        assert orjson.loads(route.quick.answer({"isError": False}))["id"] == "c1"


def test_a_call_with_codex_turn_metadata_takes_the_quick_path() -> None:
    """Codex 0.171.0 sends `_meta` with a progress token and its turn metadata on every tool call; no tool reports
    progress on either path, so the quick path takes it."""
    front = Front()
    front.route(handshake(LATEST_HANDSHAKE_VERSION)[0], sdk_busy=False)
    meta = {"callId": "call_1", "progressToken": 1, "threadId": "t", "x-codex-turn-metadata": {"turn_id": "u"}}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"_meta": meta, "name": "send_message", "arguments": {"target": "bob", "message": "hi"}}}
    route = front.route(call, sdk_busy=False)
    assert route.quick is not None
    assert route.quick.arguments == {"target": "bob", "message": "hi"}


def test_the_quick_path_can_be_switched_off() -> None:
    front = Front(quick=False)
    front.route(handshake(LATEST_HANDSHAKE_VERSION)[0], sdk_busy=False)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_agents"}}
    assert front.route(call, sdk_busy=False).forward == call


def test_without_a_constant_handshake_every_call_is_the_sdks() -> None:
    """A connection whose initialize the SDK answered (the front had doubts) stays the SDK's for tool calls too."""
    front = Front()
    opening = {**handshake(LATEST_HANDSHAKE_VERSION)[0], "params": {"protocolVersion": 1}}
    assert front.route(opening, sdk_busy=False).answer is None
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_agents"}}
    assert front.route(call, sdk_busy=False).forward == call


def test_the_front_never_overtakes_an_unanswered_sdk_request() -> None:
    """A constant answer is written only while nothing handed to the SDK is unanswered (order, no double answer)."""
    front = Front()
    front.route(handshake(LATEST_HANDSHAKE_VERSION)[0], sdk_busy=False)
    ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
    assert front.route(ping, sdk_busy=True).answer is None
    assert front.route(ping, sdk_busy=False).answer is not None


def test_the_handshake_is_replayed_to_the_sdk_under_a_private_id() -> None:
    """The SDK sees the opening initialize (same params) under an id whose answer is never written."""
    front = Front()
    opening = handshake("2025-03-26")[0]
    route = front.route(opening, sdk_busy=False)
    assert route.forward is not None
    assert route.forward["id"] == front.replay_id
    assert front.replay_id.startswith(REPLAY_ID_PREFIX)
    assert {k: v for k, v in route.forward.items() if k != "id"} == {k: v for k, v in opening.items() if k != "id"}
    [sdk] = sdk_answers([route.forward])
    assert front.replay_matches(sdk["result"])


_obj = st.dictionaries(st.sampled_from(["a", "form", "listChanged"]), st.just({}), max_size=2)
_loose = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3), _obj,
                   st.lists(st.integers(), max_size=1))
_nested = st.one_of(st.just({}), _loose, st.fixed_dictionaries({}, optional={
    "createMessage": _loose, "create": _loose, "sampling": _loose, "elicitation": _loose}))
_capability = st.one_of(st.just({}), _loose, st.fixed_dictionaries({}, optional={
    "form": _nested, "url": _nested, "context": _nested, "tools": _nested, "listChanged": _loose,
    "list": _nested, "cancel": _nested, "requests": _nested, "x": _loose}))
_capabilities = st.one_of(_loose, st.fixed_dictionaries({}, optional={
    name: _capability for name in ("experimental", "extensions", "sampling", "elicitation", "roots", "tasks",
                                   "custom")}))
_text = st.text(max_size=5)
_client_info = st.fixed_dictionaries(
    {"name": st.one_of(_text, _text, _text, _loose), "version": st.one_of(_text, _text, _text, _loose)},
    optional={"title": st.one_of(_text, _loose), "description": _text, "websiteUrl": _text, "icons": _loose,
              "other": _loose})
_version = st.one_of(st.sampled_from([*sdk_versions.KNOWN_PROTOCOL_VERSIONS, "x", ""]), _loose)
_any_obj = st.dictionaries(st.text(max_size=3), st.one_of(st.integers(), st.text(max_size=2), _obj), max_size=2)
_good_capabilities = st.fixed_dictionaries({}, optional={
    "experimental": st.dictionaries(st.text(max_size=3), _any_obj, max_size=2),
    "extensions": st.dictionaries(st.text(max_size=3), _any_obj, max_size=2),
    "sampling": st.fixed_dictionaries({}, optional={"context": _any_obj, "tools": _any_obj}),
    "elicitation": st.fixed_dictionaries({}, optional={"form": _any_obj, "url": _any_obj}),
    "roots": st.fixed_dictionaries({}, optional={"listChanged": st.one_of(st.booleans(), st.none())}),
    "tasks": st.fixed_dictionaries({}, optional={
        "list": _any_obj, "cancel": _any_obj, "requests": st.fixed_dictionaries({}, optional={
            "sampling": st.fixed_dictionaries({}, optional={"createMessage": _any_obj}),
            "elicitation": st.fixed_dictionaries({}, optional={"create": _any_obj})})}),
    "custom": _loose})
_good_client_info = st.fixed_dictionaries({"name": _text, "version": _text}, optional={
    "title": st.one_of(_text, st.none()), "description": _text, "websiteUrl": _text, "other": _loose})
_init_params = st.one_of(
    # Well-formed (the front should answer these, exactly as the SDK does) ...
    st.fixed_dictionaries({"protocolVersion": st.one_of(_text, st.sampled_from(sdk_versions.KNOWN_PROTOCOL_VERSIONS)),
                           "capabilities": _good_capabilities, "clientInfo": _good_client_info},
                          optional={"extra": _loose}),
    # ... with one part or another wrong (the front must never answer where the SDK refuses) ...
    st.fixed_dictionaries({"protocolVersion": _version,
                           "capabilities": st.one_of(_capabilities, _good_capabilities),
                           "clientInfo": st.one_of(_client_info, _good_client_info, _loose)},
                          optional={"extra": _loose}),
    # ... or missing.
    st.fixed_dictionaries({}, optional={"protocolVersion": _version, "capabilities": _capabilities,
                                        "clientInfo": _client_info, "_meta": _loose}))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=_init_params)
def test_initialize_params_the_front_answers_are_accepted_and_answered_identically_by_the_sdk(
        params: dict[str, Any]) -> None:
    """Whatever initialize params a client sends, the front either hands them to the SDK or answers exactly as the
    SDK does (never an answer where the SDK would refuse)."""
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    [ours] = front_answers([message])
    if ours is None:
        return
    assert sdk_answers([message]) == [ours]


# --- in the real process -----------------------------------------------------------------------------------


@pytest.fixture
def gated_sdk(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose `wardian mcp serve` blocks importing the SDK until the test opens the gate (a FIFO)."""
    if os.environ.get("WARDIAN_TEST_CLI"):
        pytest.skip("a frozen executable ignores PYTHONPATH")
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Gate:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'mcp_types':\n"
        f"            open({str(gate)!r}, 'rb').close()  # blocks until the test opens the FIFO for writing\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Gate())\n", encoding="utf-8")
    return {"PYTHONPATH": str(tmp_path), "WARDIAN_LOG_LEVEL": "DEBUG"}, gate


def _open_gate(gate: Path) -> None:
    fd = os.open(gate, os.O_WRONLY)  # returns once the server's import is waiting on the other end
    os.close(fd)


def _answers_by_id(server: RawServer, rest: bytes) -> dict[Any, list[dict[str, Any]]]:
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for line in server.stdout_lines + [line for line in rest.split(b"\n") if line]:
        message = orjson.loads(line)
        by_id.setdefault(message.get("id"), []).append(message)
    return by_id


def test_discovery_is_answered_before_the_sdk_is_imported_and_a_call_waits_for_it(
        app: AppHandle, gated_sdk: tuple[dict[str, str], Path]) -> None:
    """Decision 0007: initialize and tools/list need no SDK, nor does any tool call, a wait included; a call the
    quick path does not take (an unknown tool) waits for the SDK and is then served with the replayed handshake's
    state; every request is answered exactly once."""
    extra, gate = gated_sdk
    agent, token = app.add_agent()
    with raw_server(server_env(str(app.home.root), token, **extra)) as server:
        init = server.initialize()  # answered while the SDK's import is blocked
        assert init["result"]["serverInfo"]["name"] == "wardian"
        assert len(server.request(1, "tools/list")["result"]["tools"]) == len(TOOL_NAMES)
        # Served on the quick path: answered while the SDK's import is still blocked.
        quick = server.request(2, "tools/call", {"name": "list_agents", "arguments": {}})
        assert quick["result"]["isError"] is False
        assert quick["result"]["structuredContent"]["caller"]["uuid"] == agent["uuid"]
        waited = server.request(5, "tools/call", {"name": "wait_agent", "arguments": {"timeout_ms": 0}})
        assert waited["result"]["structuredContent"]["timed_out"] is True
        received = server.request(6, "tools/call", {"name": "receive_messages", "arguments": {"timeout_ms": 0}})
        assert received["result"]["structuredContent"]["records"] == []
        server.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                     "params": {"name": "no_such_tool", "arguments": {}}})
        server.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        _open_gate(gate)
        answers = {m["id"]: m for m in (server.read(), server.read())}
        assert answers[3]["result"] == {}
        assert answers[4]["error"]["code"] == -32602  # the SDK handler's own answer: it serves tools/call
        code, rest, stderr = server.close()
    assert code == 0
    by_id = _answers_by_id(server, rest)
    assert sorted(by_id, key=str) == [0, 1, 2, 3, 4, 5, 6]
    assert all(len(answers) == 1 for answers in by_id.values())
    log = stderr.decode("utf-8", "replace")
    assert "answered initialize from constant data" in log
    for tool in ("list_agents", "wait_agent", "receive_messages"):
        assert f"tools/call {tool} on the quick path" in log
    assert "tools/call waits for the SDK server to start" in log
    assert "differs from the constant answer" not in log
    assert REPLAY_ID_PREFIX not in log


def test_the_server_exits_at_eof_without_waiting_for_the_sdk_import(gated_sdk: tuple[dict[str, str], Path]) -> None:
    """Decision 0007 (the hot path does not pay for the SDK): a discovery-only session ends at stdin EOF even while the
    SDK's import has not finished."""
    extra, _ = gated_sdk
    with raw_server(server_env(None, None, **extra)) as server:
        server.initialize()
        assert len(server.request(1, "tools/list")["result"]["tools"]) == len(TOOL_NAMES)
        code, rest, _ = server.close(timeout=20)
    assert code == 0
    assert rest == b""


def test_the_sdk_client_handshake_is_answered_from_constant_data(app: AppHandle) -> None:
    """The SDK's own client gets the constant initialize and tools/list; the SDK then serves its calls."""
    agent, token = app.add_agent()
    with mcp_server(server_env(str(app.home.root), token, WARDIAN_LOG_LEVEL="DEBUG")) as conn:
        assert sorted(t.name for t in conn.list_tools().tools) == sorted(TOOL_NAMES)
        assert conn.ok("list_agents")["caller"]["uuid"] == agent["uuid"]
        conn.ping()
        log = conn.stderr()
    assert "answered initialize from constant data" in log
    assert "answered tools/list from constant data" in log
    assert "differs from the constant answer" not in log
