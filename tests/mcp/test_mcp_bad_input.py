"""The bad-input catalogue (docs/reliability.md, rows B1-B28) through the SDK's own client: one test per row.

Every failure must be a tool result with `isError: true` and `structuredContent.error = {code, message,
field?, allowed?, delivery}` (docs/guide/mcp-server.md#errors); rows answered by an RPC error live in test_mcp_stdio.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import AppHandle, short_home, start_app, stop_app
from tests.mcp.conftest import Peer, Peers
from tests.mcp.mcp_harness import McpConnection, mcp_server, server_env
from wardian.client import AppClient
from wardian.home import Home
from wardian.model import MAX_MESSAGE_BYTES, MAX_TARGET_CHARS
from wardian.protocol.tools import TOOL_NAMES

# The whole catalogue runs on the embedded store and on the shared PostgreSQL store: the same errors.
BOTH_STORES = True


def valid_arguments(target: str) -> dict[str, dict[str, Any]]:
    """Arguments every tool accepts, so that only the row under test can fail."""
    return {
        "wait_agent": {"timeout_ms": 0},
        "send_message": {"target": target, "message": "hello"},
        "followup_task": {"target": target, "message": "please check"},
        "receive_messages": {},
        "reply": {"request_id": "ask_unknown", "status": "done", "message": "done"},
        "interrupt_agent": {"target": target},
        "list_agents": {},
        "answer_approval": {"approval_id": "apr_0123456789abcdef", "decision": "allow"},
    }


def assert_every_tool_fails(conn: McpConnection, target: str, codes: set[str]) -> list[dict[str, Any]]:
    found = []
    for name, arguments in valid_arguments(target).items():
        error = conn.error(name, arguments)
        assert error["code"] in codes, (name, error)
        assert error["delivery"] == "not_admitted", (name, error)
        found.append(error)
    return found


def record_count(app: AppHandle) -> int:
    return len(app.call("mailbox/records", {"limit": 100_000})["records"])


# --- session and app (B1-B4) -------------------------------------------------------------------------


@pytest.mark.parametrize("session", [None, ""], ids=["unset", "empty"])
def test_every_tool_without_a_session_fails_with_missing_session_naming_the_variable(
        shared_app: AppHandle, session: str | None) -> None:
    """B1: WARDIAN_SESSION_ID unset or empty -> missing_session, saying to set it in the MCP env."""
    with mcp_server(server_env(str(shared_app.home.root), session)) as conn:
        for error in assert_every_tool_fails(conn, "anyone", {"missing_session"}):
            assert "WARDIAN_SESSION_ID" in error["message"]
            assert "MCP server" in error["message"]


def _with_session_number(token: str, number: int) -> str:
    prefix, tag, _, secret = token.split("_", 3)
    return f"{prefix}_{tag}_{number}_{secret}"


def test_a_session_unknown_to_the_home_or_of_a_removed_agent_fails_with_unknown_session(
        shared_app: AppHandle) -> None:
    """B2: an id unknown to this home, or of a destroyed agent -> unknown_session."""
    removed, removed_token = shared_app.add_agent()
    shared_app.call("agent/remove", {"agent": removed["uuid"]})
    for token in (_with_session_number(removed_token, 999_999), removed_token):
        with mcp_server(server_env(str(shared_app.home.root), token)) as conn:
            assert_every_tool_fails(conn, "anyone", {"unknown_session"})


def test_a_session_of_another_home_fails_with_session_home_mismatch(shared_app: AppHandle, app: AppHandle) -> None:
    """B2: an id from another WARDIAN_HOME -> session_home_mismatch."""
    _, foreign_token = app.add_agent()
    with mcp_server(server_env(str(shared_app.home.root), foreign_token)) as conn:
        assert_every_tool_fails(conn, "anyone", {"session_home_mismatch"})


def test_a_missing_or_wrong_secret_fails_with_one_unauthenticated_message(shared_app: AppHandle) -> None:
    """B3: secret missing or wrong -> unauthenticated, same message for both (no hint)."""
    _, token = shared_app.add_agent()
    prefix, tag, number, secret = token.split("_", 3)
    wrong = secret[:-2] + ("AA" if not secret.endswith("AA") else "BB")
    messages = set()
    for forged in (f"{prefix}_{tag}_{number}", f"{prefix}_{tag}_{number}_{wrong}"):
        with mcp_server(server_env(str(shared_app.home.root), forged)) as conn:
            messages |= {e["message"] for e in assert_every_tool_fails(conn, "anyone", {"unauthenticated"})}
    assert len(messages) == 1
    assert secret not in messages.pop()


@pytest.fixture
def idle_home() -> Iterator[Home]:
    """A home with a store but no running app."""
    root = short_home()
    proc = start_app(root)
    stop_app(proc)
    yield Home(root)
    shutil.rmtree(root, ignore_errors=True)


def test_every_tool_fails_with_app_not_running_when_no_app_serves_the_home(idle_home: Home) -> None:
    """B4 and M4: app not running -> app_not_running; the server never starts the app."""
    with mcp_server(server_env(str(idle_home.root), "wsn1_00000000_1_secret")) as conn:
        for error in assert_every_tool_fails(conn, "anyone", {"app_not_running"}):
            assert "wardian app start" in error["message"]
    assert not idle_home.socket_path.exists()


def test_every_tool_fails_with_app_not_running_on_a_stale_socket(idle_home: Home) -> None:
    """B4: a stale socket file (connection refused) -> app_not_running."""
    idle_home.run_dir.mkdir(mode=0o700, exist_ok=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(idle_home.socket_path))
    os.chmod(idle_home.socket_path, 0o600)  # as a killed app leaves it
    stale.close()  # the file stays; nobody listens on it
    with mcp_server(server_env(str(idle_home.root), "wsn1_00000000_1_secret")) as conn:
        assert_every_tool_fails(conn, "anyone", {"app_not_running"})


def test_every_tool_fails_with_app_incompatible_when_the_app_speaks_another_version(idle_home: Home) -> None:
    """B4: version skew -> app_incompatible (nothing is written to the other socket)."""
    idle_home.run_dir.mkdir(mode=0o700, exist_ok=True)
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(str(idle_home.run_dir / "app.v999.sock"))
    other.listen(1)
    try:
        with mcp_server(server_env(str(idle_home.root), "wsn1_00000000_1_secret")) as conn:
            assert_every_tool_fails(conn, "anyone", {"app_incompatible"})
    finally:
        other.close()


def test_every_tool_without_wardian_home_fails_with_app_not_running_naming_the_variable() -> None:
    """MCP-3: operations require the running app for the server's WARDIAN_HOME; the message says what to set."""
    with mcp_server(server_env(None, "wsn1_00000000_1_secret")) as conn:
        for error in assert_every_tool_fails(conn, "anyone", {"app_not_running"}):
            assert "WARDIAN_HOME" in error["message"]


# --- arguments of every tool (B5, B6, B26) -----------------------------------------------------------------


@pytest.mark.parametrize("extra", ["sender", "from", "session_id", "broadcast", "session", "anything"])
@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_an_unknown_argument_fails_with_invalid_arguments_naming_it(peers: Peers, tool: str, extra: str) -> None:
    """B5 and B26, S5: a `sender` (or any unknown) argument -> invalid_arguments, field set."""
    before = record_count(peers.app)
    arguments = {**valid_arguments(peers.bob.name)[tool], extra: peers.bob.name}
    error = peers.alice.mcp.error(tool, arguments)
    assert error["code"] == "invalid_arguments"
    assert error["field"] == extra
    assert record_count(peers.app) == before


WRONG_TYPES = [
    ("send_message", "target", 5, "invalid_target"),
    ("send_message", "message", 5, "invalid_arguments"),
    ("followup_task", "target", True, "invalid_target"),
    ("followup_task", "message", ["text"], "invalid_arguments"),
    ("receive_messages", "cursor", 5, "invalid_cursor"),
    ("receive_messages", "ack_cursor", True, "invalid_cursor"),
    ("receive_messages", "limit", True, "invalid_limit"),
    ("receive_messages", "timeout_ms", "1000", "invalid_timeout"),
    ("wait_agent", "timeout_ms", True, "invalid_timeout"),
    ("reply", "request_id", 5, "unknown_request"),
    ("reply", "status", 1, "invalid_status"),
    ("reply", "message", {"text": "x"}, "invalid_arguments"),
    ("interrupt_agent", "target", {"name": "x"}, "invalid_target"),
]


@pytest.mark.parametrize(("tool", "field", "value", "code"), WRONG_TYPES,
                         ids=[f"{t}-{f}-{type(v).__name__}" for t, f, v, _ in WRONG_TYPES])
def test_a_wrong_json_type_fails_with_the_fields_error(peers: Peers, tool: str, field: str, value: Any,
                                                       code: str) -> None:
    """B6: a number for a string, `true` for an int -> an error naming the field (its own code where
    the catalogue gives one, else invalid_arguments)."""
    arguments = {**valid_arguments(peers.bob.name)[tool], field: value}
    error = peers.alice.mcp.error(tool, arguments)
    assert (error["code"], error["field"]) == (code, field)


# --- targets (B7-B11) ------------------------------------------------------------------------------


TARGET_TOOLS = ["send_message", "followup_task", "interrupt_agent"]


def _target_call(peers: Peers, tool: str, target: Any, *, omit: bool = False) -> dict[str, Any]:
    arguments = dict(valid_arguments("x")[tool])
    if omit:
        del arguments["target"]
    else:
        arguments["target"] = target
    before = record_count(peers.app)
    error = peers.alice.mcp.error(tool, arguments)
    assert record_count(peers.app) == before
    return error


@pytest.mark.parametrize("target", ["", "   ", "\t\n", "x" * (MAX_TARGET_CHARS + 1), ["bob"], {"name": "bob"}, None],
                         ids=["empty", "spaces", "whitespace", "too-long", "array", "object", "null"])
@pytest.mark.parametrize("tool", TARGET_TOOLS)
def test_a_malformed_target_fails_with_invalid_target(peers: Peers, tool: str, target: Any) -> None:
    """B7: target "", whitespace, > 256 chars, or an array/object -> invalid_target."""
    error = _target_call(peers, tool, target)
    assert (error["code"], error["field"]) == ("invalid_target", "target")
    assert "x" * 200 not in error["message"]  # never echo more than 200 chars of user text (docs/reliability.md)


@pytest.mark.parametrize("tool", TARGET_TOOLS)
def test_a_missing_target_fails_with_invalid_target(peers: Peers, tool: str) -> None:
    """B7: target missing -> invalid_target."""
    error = _target_call(peers, tool, None, omit=True)
    assert (error["code"], error["field"]) == ("invalid_target", "target")


@pytest.mark.parametrize("tool", TARGET_TOOLS)
def test_an_unknown_name_or_uuid_fails_with_unknown_target(peers: Peers, tool: str) -> None:
    """B8: unknown name or UUID, UUID of wrong case or format -> unknown_target. Case rule: UUIDs
    match in canonical lowercase only, names exactly (case-sensitive)."""
    for target in ("nobody-by-this-name", str(uuid.uuid4()), peers.bob.uuid.upper(), peers.bob.uuid.replace("-", ""),
                   peers.bob.name.upper()):
        error = _target_call(peers, tool, target)
        assert (error["code"], error["field"]) == ("unknown_target", "target"), target


@pytest.mark.parametrize("tool", TARGET_TOOLS)
def test_a_name_shared_by_two_agents_fails_with_ambiguous_target_listing_both_uuids(peers: Peers, tool: str) -> None:
    """B9: a name shared by >= 2 agents -> ambiguous_target listing the candidates' UUIDs, 0 rows."""
    name = f"twin-{tool.replace('_', '-')}"
    if not any(a["name"] == name for a in peers.app.agents.values()):
        peers.app.add_agent(name)
        peers.app.add_agent(name)
    twins = sorted(a["uuid"] for a in peers.app.agents.values() if a["name"] == name)
    error = _target_call(peers, tool, name)
    assert error["code"] == "ambiguous_target"
    assert sorted(error["candidates"]) == twins


@pytest.mark.parametrize("target", ["*", "all", "@all", "@everyone", "bob,carol", "bob carol", "agent*"])
@pytest.mark.parametrize("tool", TARGET_TOOLS)
def test_a_broadcast_or_list_target_fails_with_broadcast_not_allowed(peers: Peers, tool: str, target: str) -> None:
    """B10, TGT-3: broadcasts fail."""
    error = _target_call(peers, tool, target)
    assert (error["code"], error["field"]) == ("broadcast_not_allowed", "target")


@pytest.mark.parametrize("target", ["worker' OR '1'='1", "bob'", "../bob", "<script>", "bob@host", "bob\u0000"])
@pytest.mark.parametrize("tool", TARGET_TOOLS)
def test_text_that_cannot_name_an_agent_fails_with_invalid_target_not_broadcast(peers: Peers, tool: str,
                                                                                target: str) -> None:
    """B10a: `worker' OR '1'='1` was reported as a broadcast (it holds spaces); it names no agent and no list of
    agents, so it is invalid_target, saying what a target may be."""
    error = _target_call(peers, tool, target)
    assert (error["code"], error["field"]) == ("invalid_target", "target")
    assert "agent name" in error["allowed"]


@pytest.mark.parametrize("tool", TARGET_TOOLS)
def test_targeting_the_caller_itself_fails_with_invalid_target(peers: Peers, tool: str) -> None:
    """B11 and B25: the target is the caller -> invalid_target (our choice: no self-messages)."""
    for target in (peers.alice.name, peers.alice.uuid):
        error = _target_call(peers, tool, target)
        assert (error["code"], error["field"]) == ("invalid_target", "target")


# --- message text (B12-B14) ------------------------------------------------------------------------------


def _task_for(requester: Peer, recipient: Peer) -> str:
    receipt = requester.mcp.ok("followup_task", {"target": recipient.name, "message": "task for a reply test"})
    return str(receipt["request_id"])


def _text_call(peers: Peers, tool: str, message: Any, *, omit: bool = False) -> dict[str, Any]:
    if tool == "reply":
        arguments: dict[str, Any] = {"request_id": _task_for(peers.bob, peers.alice), "status": "done"}
    else:
        arguments = {"target": peers.bob.name}
    if not omit:
        arguments["message"] = message
    before = record_count(peers.app)
    error = peers.alice.mcp.error(tool, arguments)
    assert record_count(peers.app) == before
    return error


TEXT_TOOLS = ["send_message", "followup_task", "reply"]


@pytest.mark.parametrize("message", ["", " ", " \r\n\t "], ids=["empty", "space", "whitespace"])
@pytest.mark.parametrize("tool", TEXT_TOOLS)
def test_an_empty_message_fails_with_empty_message(peers: Peers, tool: str, message: str) -> None:
    """B12: message "" or only whitespace -> empty_message."""
    error = _text_call(peers, tool, message)
    assert (error["code"], error["field"]) == ("empty_message", "message")


@pytest.mark.parametrize("tool", TEXT_TOOLS)
def test_a_missing_message_fails_with_empty_message(peers: Peers, tool: str) -> None:
    """B12: message missing -> empty_message."""
    error = _text_call(peers, tool, None, omit=True)
    assert (error["code"], error["field"]) == ("empty_message", "message")


@pytest.mark.parametrize("message", [
    "x" * (MAX_MESSAGE_BYTES + 1),
    "a" + "\u00e9" * (MAX_MESSAGE_BYTES // 2),
    "x" * (MAX_MESSAGE_BYTES - 3) + "\U0001f600",
], ids=["65537-ascii", "2-byte-char-straddles", "4-byte-char-straddles"])
@pytest.mark.parametrize("tool", TEXT_TOOLS)
def test_a_message_over_64_kib_fails_with_message_too_large(peers: Peers, tool: str, message: str) -> None:
    """B13: > 65,536 UTF-8 bytes -> message_too_large with limit_bytes 65536 (all text, not only
    replies); exactly 65,536 is accepted (test_mcp_tools)."""
    assert len(message.encode("utf-8")) == MAX_MESSAGE_BYTES + 1
    error = _text_call(peers, tool, message)
    assert (error["code"], error["field"], error["limit_bytes"]) == ("message_too_large", "message", MAX_MESSAGE_BYTES)
    assert "x" * 200 not in error["message"]


@pytest.mark.parametrize("tool", TEXT_TOOLS)
def test_a_nul_character_fails_with_invalid_text(peers: Peers, tool: str) -> None:
    """B14: NUL "decide and pin": refused as invalid_text (the app's choice, TXT-3)."""
    error = _text_call(peers, tool, "before\x00after")
    assert (error["code"], error["field"]) == ("invalid_text", "message")


# --- receive and wait bounds (B15-B16) ----------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1, 101, 1.5, "10", True], ids=["0", "-1", "101", "1.5", "str", "true"])
def test_a_limit_outside_1_to_100_fails_with_invalid_limit(peers: Peers, limit: Any) -> None:
    """B15: limit 0, -1, 101, 1.5, "10", true -> invalid_limit (allowed: 1..100)."""
    error = peers.alice.mcp.error("receive_messages", {"limit": limit})
    assert (error["code"], error["field"]) == ("invalid_limit", "limit")
    assert "1..100" in error["allowed"]


def test_a_null_limit_means_the_default(peers: Peers) -> None:
    """B15: limit null = default."""
    assert peers.alice.mcp.ok("receive_messages", {"limit": None})["timed_out"] is False


@pytest.mark.parametrize("timeout", [-1, 60_001, 1e12, 1.5, "1000", True],
                         ids=["-1", "60001", "1e12", "1.5", "str", "true"])
@pytest.mark.parametrize("tool", ["receive_messages", "wait_agent"])
def test_a_timeout_outside_0_to_60000_fails_with_invalid_timeout(peers: Peers, tool: str, timeout: Any) -> None:
    """B16: timeout_ms -1, 60001, 1e12, 1.5, "1000", true -> invalid_timeout (allowed: 0..60000)."""
    error = peers.alice.mcp.error(tool, {"timeout_ms": timeout})
    assert (error["code"], error["field"]) == ("invalid_timeout", "timeout_ms")
    assert "0..60000" in error["allowed"]


# --- cursors (B17-B20) -----------------------------------------------------------------------------------


@pytest.fixture
def bob_page(peers: Peers) -> dict[str, Any]:
    """A page of one record returned to bob, still unacknowledged."""
    peers.bob.drain()
    peers.alice.mcp.ok("send_message", {"target": peers.bob.name, "message": "cursor test"})
    page = peers.bob.mcp.ok("receive_messages", {"limit": 1})
    assert len(page["records"]) == 1
    return page


def _tampered(cursor: str) -> str:
    return cursor[:-1] + ("A" if cursor[-1] != "A" else "B")


@pytest.mark.parametrize("field", ["cursor", "ack_cursor"])
def test_a_malformed_truncated_forged_or_foreign_cursor_fails_with_invalid_cursor_and_acks_nothing(
        peers: Peers, bob_page: dict[str, Any], field: str) -> None:
    """B17 and B20: empty, malformed, truncated, bad MAC, another recipient's cursor, or an ack_cursor
    beyond anything returned -> invalid_cursor (0 records, 0 acked)."""
    cursor = bob_page["cursor"]
    peers.alice.mcp.ok("send_message", {"target": peers.bob.name, "message": "not acked by a forged cursor"})
    for bad in ("", "garbage", cursor[: len(cursor) // 2], _tampered(cursor)):
        error = peers.bob.mcp.error("receive_messages", {field: bad})
        assert (error["code"], error["field"]) == ("invalid_cursor", field)
    foreign = peers.alice.mcp.error("receive_messages", {field: cursor})  # bob's valid cursor, alice's mailbox
    assert (foreign["code"], foreign["field"]) == ("invalid_cursor", field)
    # Nothing was acknowledged: bob still sees both records.
    assert len(peers.bob.mcp.ok("receive_messages", {})["records"]) == 2


def test_acking_an_already_acknowledged_batch_succeeds_and_changes_nothing(peers: Peers,
                                                                          bob_page: dict[str, Any]) -> None:
    """B19: ack_cursor for an already-acked batch -> success, idempotent (0 changes)."""
    first = peers.bob.mcp.ok("receive_messages", {"ack_cursor": bob_page["cursor"]})
    again = peers.bob.mcp.ok("receive_messages", {"ack_cursor": bob_page["cursor"]})
    assert (first["acked"], again["acked"]) == (1, 0)


def test_a_cursor_of_a_previous_store_fails_with_stale_cursor() -> None:
    """B18: a cursor from a previous store epoch (DB recreated) -> stale_cursor."""
    root = short_home()
    try:
        proc = start_app(root)
        try:
            handle = AppHandle(Home(root), proc, AppClient(Home(root)))
            _, sender_token = handle.add_agent("sender")
            _, receiver_token = handle.add_agent("receiver")
            with mcp_server(server_env(str(root), sender_token)) as conn:
                conn.ok("send_message", {"target": "receiver", "message": "before the store was recreated"})
            with mcp_server(server_env(str(root), receiver_token)) as conn:
                old_cursor = conn.ok("receive_messages", {})["cursor"]
        finally:
            stop_app(proc)
        for path in root.glob("wardian.db*"):
            path.unlink()
        proc = start_app(root)
        try:
            handle = AppHandle(Home(root), proc, AppClient(Home(root)))
            handle.add_agent("sender")
            _, receiver_token = handle.add_agent("receiver")
            with mcp_server(server_env(str(root), receiver_token)) as conn:
                for field in ("cursor", "ack_cursor"):
                    error = conn.error("receive_messages", {field: old_cursor})
                    assert (error["code"], error["field"]) == ("stale_cursor", field)
        finally:
            stop_app(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- reply (B21-B24) -------------------------------------------------------------------------------------


def test_replying_to_an_unknown_or_malformed_request_id_fails_with_unknown_request(peers: Peers) -> None:
    """B21: request_id unknown or malformed -> unknown_request."""
    for request_id in ("ask_doesnotexist", "%%%not-an-id%%%", "x" * 129):
        error = peers.alice.mcp.error("reply", {"request_id": request_id, "status": "done", "message": "x"})
        assert (error["code"], error["field"]) == ("unknown_request", "request_id")


def test_replying_to_an_informational_message_id_fails_with_not_a_task(peers: Peers) -> None:
    """B21, RPL-3: an information's delivery id is not a task request id."""
    info = peers.bob.mcp.ok("send_message", {"target": peers.alice.name, "message": "just so you know"})
    before = record_count(peers.app)
    error = peers.alice.mcp.error("reply", {"request_id": info["interaction_id"], "status": "done", "message": "x"})
    assert error["code"] == "not_a_task"
    assert record_count(peers.app) == before


def test_a_reply_from_anyone_but_the_assigned_recipient_fails_with_not_recipient(peers: Peers) -> None:
    """B22, RPL-2: only the task's assigned recipient completes the request."""
    request_id = _task_for(peers.alice, peers.bob)  # assigned to bob; alice (the requester) may not reply
    before = record_count(peers.app)
    error = peers.alice.mcp.error("reply", {"request_id": request_id, "status": "done", "message": "mine"})
    assert error["code"] == "not_recipient"
    assert record_count(peers.app) == before


def test_a_second_reply_fails_with_already_completed_naming_the_first(peers: Peers) -> None:
    """B23: a second reply -> already_completed with the existing status and reply id, 0 new rows."""
    request_id = _task_for(peers.alice, peers.bob)
    first = peers.bob.mcp.ok("reply", {"request_id": request_id, "status": "blocked", "message": "need access"})
    before = record_count(peers.app)
    error = peers.bob.mcp.error("reply", {"request_id": request_id, "status": "done", "message": "again"})
    assert error["code"] == "already_completed"
    assert error["status"] == "blocked"
    assert error["reply_id"] == first["reply_id"]
    assert record_count(peers.app) == before


@pytest.mark.parametrize("status", ["DONE", "success", "", None], ids=["DONE", "success", "empty", "null"])
def test_a_status_other_than_done_blocked_failed_fails_with_invalid_status(peers: Peers, status: Any) -> None:
    """B24: status DONE, success, "", null -> invalid_status (allowed: done, blocked, failed)."""
    request_id = _task_for(peers.alice, peers.bob)
    error = peers.bob.mcp.error("reply", {"request_id": request_id, "status": status, "message": "x"})
    assert (error["code"], error["field"], error["allowed"]) == ("invalid_status", "status", "done, blocked, failed")
