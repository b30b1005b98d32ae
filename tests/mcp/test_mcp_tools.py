"""Contract tests of the eight tools through the SDK's own client: the success path of each.

docs/design/contract.md, TOOL-1 ... RCV-7. Each test drives real `wardian mcp serve` processes against a real app.
"""

from __future__ import annotations

import pytest

from tests.mcp.conftest import Peers
from wardian.model import MAX_MESSAGE_BYTES
from wardian.protocol.tools import TOOL_NAMES

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


def test_tools_list_offers_exactly_the_eight_tools(peers: Peers) -> None:
    """TOOL-1: wait_agent, send_message, followup_task, receive_messages, reply, interrupt_agent,
    list_agents (the seed's seven), and answer_approval (docs/guide/approvals.md#the-lead-answers)."""
    names = [t.name for t in peers.alice.mcp.list_tools().tools]
    assert sorted(names) == sorted(TOOL_NAMES)
    assert len(names) == 8


def test_list_agents_shows_names_uuids_providers_status_and_the_caller(peers: Peers) -> None:
    """TOOL-1: list_agents discovers Wardian peer names, UUIDs, providers, and status."""
    result = peers.alice.mcp.ok("list_agents", {})
    by_uuid = {a["uuid"]: a for a in result["agents"]}
    assert by_uuid[peers.bob.uuid]["name"] == peers.bob.name
    assert by_uuid[peers.bob.uuid]["provider"] == "codex"
    assert by_uuid[peers.bob.uuid]["status"] in ("off", "starting", "idle", "active", "errored")
    assert result["caller"] == {"name": peers.alice.name, "uuid": peers.alice.uuid}


def test_send_message_admits_information_attributed_by_the_app_to_the_caller(peers: Peers) -> None:
    """TOOL-3, RCPT-1: the app owns sender attribution; receipts carry the interaction id and the delivery state."""
    peers.bob.drain()
    receipt = peers.alice.mcp.ok("send_message", {"target": peers.bob.name, "message": "build is green"})
    assert receipt["kind"] == "information"
    assert receipt["delivery"] == "admitted"
    assert receipt["request_id"] is None
    assert receipt["sender"] == {"name": peers.alice.name, "uuid": peers.alice.uuid}
    assert receipt["target"] == {"name": peers.bob.name, "uuid": peers.bob.uuid}
    stored = [r for r in peers.records() if r["id"] == receipt["interaction_id"]]
    assert len(stored) == 1
    assert stored[0]["sender"]["uuid"] == peers.alice.uuid
    assert stored[0]["recipient"]["uuid"] == peers.bob.uuid


def test_send_message_accepts_a_uuid_as_target(peers: Peers) -> None:
    """TGT-1: targets are exact agent names or UUIDs."""
    receipt = peers.alice.mcp.ok("send_message", {"target": peers.bob.uuid, "message": "by uuid"})
    assert receipt["target"]["uuid"] == peers.bob.uuid


@pytest.mark.parametrize("text", [
    "line one\r\nline two\n\ttabbed",
    "\u202eRTL override\u202c and \u05e9\u05dc\u05d5\u05dd",
    "emoji \U0001f600\U0001f469\u200d\U0001f4bb and combining e\u0301\u0308",
    "punctuation: \"quotes\" 'single' \\backslash {json: [1]} <tag> & ; \u2014 \u2026",
    "x" * MAX_MESSAGE_BYTES,
    "\u00e9" * (MAX_MESSAGE_BYTES // 2),
], ids=["crlf-tabs", "rtl", "emoji-combining", "punctuation", "exactly-64KiB-ascii", "exactly-64KiB-2-byte"])
def test_message_text_round_trips_byte_exact_through_send_and_receive(peers: Peers, text: str) -> None:
    """TXT-1: message text retains Unicode, line breaks, and punctuation; B13: 65,536 bytes accepted."""
    peers.bob.drain()
    receipt = peers.alice.mcp.ok("send_message", {"target": peers.bob.name, "message": text})
    page = peers.bob.mcp.ok("receive_messages", {})
    [record] = [r for r in page["records"] if r["id"] == receipt["interaction_id"]]
    assert record["text"].encode("utf-8") == text.encode("utf-8")


def test_followup_task_returns_a_request_receipt_without_waiting_for_the_reply(peers: Peers) -> None:
    """TOOL-1, CLM-1: followup_task assigns work and returns a request receipt without waiting for its reply."""
    receipt = peers.alice.mcp.ok("followup_task", {"target": peers.bob.name, "message": "review the diff"})
    assert receipt["kind"] == "task"
    assert receipt["request_id"].startswith("ask_")
    assert receipt["delivery"] == "admitted"
    records = peers.records()
    assert [r["kind"] for r in records if r["id"] == receipt["interaction_id"]] == ["task"]
    # Admitted, not completed: the tool returned before any reply to the request existed.
    assert not [r for r in records if r["kind"] == "reply" and r["request_id"] == receipt["request_id"]]


def test_receive_returns_typed_records_and_ack_cursor_acknowledges_the_batch(peers: Peers) -> None:
    """RCV-1, RCV-2: receive returns typed records and recipient-bound cursors; ack_cursor acknowledges."""
    peers.bob.drain()
    info = peers.alice.mcp.ok("send_message", {"target": peers.bob.name, "message": "fyi"})
    task = peers.alice.mcp.ok("followup_task", {"target": peers.bob.name, "message": "do it"})
    page = peers.bob.mcp.ok("receive_messages", {"limit": 10})
    assert [r["id"] for r in page["records"]] == [info["interaction_id"], task["interaction_id"]]
    assert [r["kind"] for r in page["records"]] == ["information", "task"]
    assert page["records"][1]["request_id"] == task["request_id"]
    assert page["records"][1]["new_work"] is True
    assert page["timed_out"] is False
    acked = peers.bob.mcp.ok("receive_messages", {"ack_cursor": page["cursor"]})
    assert acked["acked"] == 2
    assert acked["records"] == []


def test_replaying_a_cursor_returns_the_same_records_and_exposes_no_new_work(peers: Peers) -> None:
    """RCV-3, B28: replaying a cursor preserves record identities and does not execute work."""
    peers.bob.drain()
    first = peers.alice.mcp.ok("followup_task", {"target": peers.bob.name, "message": "one"})
    second = peers.alice.mcp.ok("followup_task", {"target": peers.bob.name, "message": "two"})
    page1 = peers.bob.mcp.ok("receive_messages", {"limit": 1})
    assert [r["id"] for r in page1["records"]] == [first["interaction_id"]]
    page2 = peers.bob.mcp.ok("receive_messages", {"cursor": page1["cursor"], "limit": 1})
    replay = peers.bob.mcp.ok("receive_messages", {"cursor": page1["cursor"], "limit": 1})
    assert [r["id"] for r in replay["records"]] == [r["id"] for r in page2["records"]] == [second["interaction_id"]]
    assert page2["records"][0]["new_work"] is True
    assert replay["records"][0]["new_work"] is False


def test_receive_with_a_timeout_and_nothing_pending_times_out_and_cancels_nothing(peers: Peers) -> None:
    """RCV-5: an empty wait does not cancel tasks; later messages and replies remain available."""
    peers.bob.drain()
    page = peers.bob.mcp.ok("receive_messages", {"timeout_ms": 1})
    assert page["records"] == []
    assert page["timed_out"] is True
    later = peers.alice.mcp.ok("send_message", {"target": peers.bob.name, "message": "later"})
    assert [r["id"] for r in peers.bob.mcp.ok("receive_messages", {})["records"]] == [later["interaction_id"]]


def test_wait_agent_with_timeout_zero_checks_at_once_and_reports_no_activity(peers: Peers) -> None:
    """WAIT-3: timeout_ms: 0 checks immediately."""
    peers.bob.drain()
    assert peers.bob.mcp.ok("wait_agent", {"timeout_ms": 0}) == {"woke": False, "timed_out": True,
                                                                  "wake_reason": None}


def test_wait_agent_returns_at_once_when_unacknowledged_activity_exists_and_consumes_nothing(peers: Peers) -> None:
    """WAIT-2: wait_agent returns immediately if unacknowledged activity already exists; no body, no ack."""
    peers.bob.drain()
    sent = peers.alice.mcp.ok("send_message", {"target": peers.bob.name, "message": "ping"})
    woke = peers.bob.mcp.ok("wait_agent", {})
    assert woke == {"woke": True, "timed_out": False, "wake_reason": "mailbox_activity"}
    assert "text" not in str(woke)
    assert [r["id"] for r in peers.bob.mcp.ok("receive_messages", {})["records"]] == [sent["interaction_id"]]


def test_wait_agent_wakes_on_a_message_sent_while_it_waits(peers: Peers) -> None:
    """WAIT-2: wait_agent waits for the next mailbox signal (subscribe before checking durable state)."""
    peers.bob.drain()
    waiting = peers.bob.mcp.start("wait_agent", {"timeout_ms": 60_000})
    peers.alice.mcp.ok("send_message", {"target": peers.bob.name, "message": "wake up"})
    result = waiting.result(timeout=90)
    assert result.structured_content == {"woke": True, "timed_out": False, "wake_reason": "mailbox_activity"}


def test_reply_completes_the_task_and_reaches_the_requester_correlated_by_request_id(peers: Peers) -> None:
    """TOOL-2, RPL-1: reply takes request_id, status (done, blocked, or failed), and message. The request determines the
    destination."""
    peers.alice.drain()
    peers.bob.drain()
    task = peers.alice.mcp.ok("followup_task", {"target": peers.bob.name, "message": "sum 2+2"})
    [record] = peers.bob.mcp.ok("receive_messages", {})["records"]
    receipt = peers.bob.mcp.ok("reply", {"request_id": record["request_id"], "status": "done", "message": "4"})
    assert receipt["request_id"] == task["request_id"]
    assert receipt["requester"]["uuid"] == peers.alice.uuid
    assert receipt["status"] == "done"
    [reply] = peers.alice.mcp.ok("receive_messages", {})["records"]
    assert reply["kind"] == "reply"
    assert reply["request_id"] == task["request_id"]
    assert reply["status"] == "done"
    assert reply["text"] == "4"
    assert reply["sender"]["uuid"] == peers.bob.uuid


def test_interrupt_agent_of_an_idle_peer_is_a_not_active_error_that_records_nothing(peers: Peers) -> None:
    """B25: interrupt with no active turn -> not_active (no-op, nothing persisted as pending)."""
    error = peers.alice.mcp.error("interrupt_agent", {"target": peers.bob.name})
    assert error["code"] == "not_active"
    assert error["delivery"] == "not_admitted"


@pytest.mark.parametrize(("arguments", "code", "field"), [
    ({"approval_id": "apr_0123456789abcdef", "decision": "allow"}, "unknown_approval", "approval_id"),
    ({"approval_id": "ask_0123456789abcdef", "decision": "allow"}, "invalid_arguments", "approval_id"),
    ({"approval_id": "apr_0123456789abcdef", "decision": "maybe"}, "invalid_arguments", "decision"),
    ({"approval_id": "apr_0123456789abcdef", "decision": "deny", "reason": "x" * 2001}, "invalid_arguments",
     "reason"),
])
def test_answer_approval_refuses_an_unknown_approval_and_bad_input_with_typed_errors(
        peers: Peers, arguments: dict[str, object], code: str, field: str) -> None:
    """docs/guide/approvals.md#the-lead-answers: the tool reaches `approval/answer` as the calling agent; an id nobody
    asked under, or input the schema refuses, is a typed error naming its field."""
    error = peers.alice.mcp.error("answer_approval", arguments)
    assert (error["code"], error["field"]) == (code, field)
