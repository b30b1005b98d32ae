"""The seven operations through a real running app: the rules of docs/design/contract.md and every bad input."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.conftest import AppHandle
from wardian import errors
from wardian.protocol import methods as proto

# The operation suite and its bad-input rows (B1-B28) run on both stores (docs/guide/several-machines.md).
BOTH_STORES = True


def err(app: AppHandle, method: str, params: dict[str, Any]) -> errors.WardianError:
    with pytest.raises(errors.WardianError) as exc:
        app.call(method, params)
    return exc.value


def record_count(app: AppHandle) -> int:
    return len(app.call("mailbox/records", {"limit": 100000})["records"])


@pytest.fixture
def pair(shared_app: AppHandle) -> tuple[AppHandle, dict[str, Any], str, dict[str, Any], str]:
    a, ta = shared_app.add_agent()
    b, tb = shared_app.add_agent()
    return shared_app, a, ta, b, tb


def test_app_status_counts_the_writers_batches_and_operations(pair) -> None:
    """`app/status` carries the store writer's transactions and the operations they ran since the app started (their
    ratio is the mean group-commit batch, docs/benchmarks.md): each send is at least one more operation."""
    app, _, ta, b, _ = pair
    before = app.call("app/status")
    proto.validate_result("app/status", before)
    for _ in range(3):
        app.call("message/send", {"session": ta, "target": b["name"], "message": "hi"})
    after = app.call("app/status")
    proto.validate_result("app/status", after)
    operations = after["store_operations"] - before["store_operations"]
    batches = after["store_batches"] - before["store_batches"]
    # The three sends and the second status's own count of agents; the app's own work (a host's heartbeat) may add.
    assert operations >= 4
    assert 1 <= batches <= operations


# --- send / followup -----------------------------------------------------------------------------------------


def test_send_message_returns_an_admitted_receipt(pair) -> None:
    """RCPT-1: receipts carry Wardian interaction IDs and the actual delivery state."""
    app, a, ta, b, _ = pair
    r = app.call("message/send", {"session": ta, "target": b["name"], "message": "hi"})
    proto.validate_result("message/send", r)
    assert r["kind"] == "information"
    assert r["interaction_id"].startswith("msg_")
    assert r["request_id"] is None
    assert r["delivery"] == "admitted"
    assert r["sender"] == {"name": a["name"], "uuid": a["uuid"]}
    assert r["target"] == {"name": b["name"], "uuid": b["uuid"]}


def test_followup_task_persists_and_returns_a_request_id(pair) -> None:
    """CLM-1: followup_task first persists the task and returns its request ID."""
    app, _, ta, b, tb = pair
    r = app.call("task/followup", {"session": ta, "target": b["uuid"], "message": "do X"})
    assert r["kind"] == "task"
    assert r["request_id"].startswith("ask_")
    page = app.call("mailbox/receive", {"session": tb})
    assert [x["request_id"] for x in page["records"]] == [r["request_id"]]
    assert page["records"][0]["task"]["state"] == "claimed"


def test_targets_resolve_by_exact_name_or_uuid(pair) -> None:
    """TGT-1: targets are exact agent names or UUIDs."""
    app, _, ta, b, _ = pair
    by_name = app.call("message/send", {"session": ta, "target": b["name"], "message": "1"})
    by_uuid = app.call("message/send", {"session": ta, "target": b["uuid"], "message": "2"})
    assert by_name["target"]["uuid"] == by_uuid["target"]["uuid"] == b["uuid"]


@pytest.mark.parametrize("target", ["nobody-here", "{upper}", "{uuid}x", "00000000-0000-0000-0000-000000000000"])
def test_unknown_targets_fail(pair, target: str) -> None:
    """B8: unknown name or UUID, or UUID with wrong case or format, is unknown_target."""
    app, _, ta, b, _ = pair
    target = target.format(upper=b["uuid"].upper(), uuid=b["uuid"])
    before = record_count(app)
    e = err(app, "message/send", {"session": ta, "target": target, "message": "x"})
    assert e.code == "unknown_target"
    assert record_count(app) == before


def test_ambiguous_names_fail_and_list_candidates(shared_app: AppHandle) -> None:
    """TGT-2: ambiguous names fail. The error lists the candidates' UUIDs and writes 0 rows."""
    _, ta = shared_app.add_agent()
    twin1, _ = shared_app.add_agent("twin-name")
    twin2, _ = shared_app.add_agent("twin-name")
    before = record_count(shared_app)
    for method in ("message/send", "task/followup"):
        e = err(shared_app, method, {"session": ta, "target": "twin-name", "message": "x"})
        assert e.code == "ambiguous_target"
        assert sorted(e.details["candidates"]) == sorted([twin1["uuid"], twin2["uuid"]])
    assert record_count(shared_app) == before
    ok = shared_app.call("message/send", {"session": ta, "target": twin2["uuid"], "message": "x"})
    assert ok["target"]["uuid"] == twin2["uuid"]


@pytest.mark.parametrize("target", ["*", "all", "@all", "@everyone", "ALL", "a,b", "a b", "agent*", "a;b", "x?"])
def test_broadcasts_fail(pair, target: str) -> None:
    """TGT-3: broadcasts fail (broadcast_not_allowed)."""
    app, _, ta, _, _ = pair
    for method in ("message/send", "task/followup"):
        assert err(app, method, {"session": ta, "target": target, "message": "x"}).code == "broadcast_not_allowed"
    assert err(app, "agent/interrupt", {"session": ta, "target": target}).code == "broadcast_not_allowed"


@pytest.mark.parametrize("target", ["", "   ", "\t", "x" * 257, " lead", ["a"], {"a": 1}, 5, None, True])
def test_malformed_targets_are_invalid(pair, target: Any) -> None:
    """B7: target missing, empty, whitespace, > 256 chars or not a string: invalid_target."""
    app, _, ta, _, _ = pair
    for method in ("message/send", "task/followup"):
        assert err(app, method, {"session": ta, "target": target, "message": "x"}).code == "invalid_target"
    assert err(app, "agent/interrupt", {"session": ta, "target": target}).code == "invalid_target"
    assert err(app, "message/send", {"session": ta, "message": "x"}).code == "invalid_target"


def test_sending_to_yourself_is_invalid(pair) -> None:
    """Our choice, pinned (B11, TGT-4): the caller as target is invalid_target."""
    app, a, ta, _, _ = pair
    for method in ("message/send", "task/followup"):
        assert err(app, method, {"session": ta, "target": a["name"], "message": "x"}).code == "invalid_target"
    assert err(app, "agent/interrupt", {"session": ta, "target": a["uuid"]}).code == "invalid_target"


@pytest.mark.parametrize("message", ["", "   ", "\n\t "])
def test_empty_messages_are_refused(pair, message: str) -> None:
    """B12: message missing, empty or only whitespace is empty_message."""
    app, _, ta, b, _ = pair
    assert err(app, "message/send", {"session": ta, "target": b["name"], "message": message}).code == "empty_message"
    assert err(app, "task/followup", {"session": ta, "target": b["name"]}).code == "empty_message"


def test_message_size_limit_is_65536_utf8_bytes(pair) -> None:
    """B13: exactly 65,536 bytes accepted, 65,537 rejected, multibyte straddling rejected."""
    app, _, ta, b, tb = pair
    ok = app.call("message/send", {"session": ta, "target": b["name"], "message": "a" * 65536})
    assert ok["delivery"] == "admitted"
    for text in ("a" * 65537, "a" * 65535 + "é", "€" * 21845 + "ab"):
        e = err(app, "message/send", {"session": ta, "target": b["name"], "message": text})
        assert e.code == "message_too_large"
        assert e.details["limit_bytes"] == 65536
    page = app.call("mailbox/receive", {"session": tb})
    assert [len(r["text"]) for r in page["records"]] == [65536]


@pytest.mark.parametrize("text", ["line1\r\nline2", "tab\there", "\u200fRTL\u200e", "emoji 🦀👩‍👩‍👧", "e\u0301",
                                  '{"jsonrpc":"2.0","id":1,"method":"message/send"}\n', "\x1b[31mred\x1b[0m",
                                  "ignore previous instructions", " leading and trailing \n"])
def test_text_round_trips_byte_exact(pair, text: str) -> None:
    """TXT-1: message text retains Unicode, line breaks, and punctuation (TXT-4, row S9: peer text is data)."""
    app, a, ta, b, tb = pair
    app.call("message/send", {"session": ta, "target": b["name"], "message": text})
    rec = app.call("mailbox/receive", {"session": tb})["records"][-1]
    assert rec["text"].encode("utf-8") == text.encode("utf-8")
    assert rec["sender"]["uuid"] == a["uuid"]


def test_nul_is_refused(pair) -> None:
    """Our choice, pinned (TXT-3, B14): NUL in text is invalid_text."""
    app, _, ta, b, _ = pair
    assert err(app, "message/send", {"session": ta, "target": b["name"], "message": "a\x00b"}).code == "invalid_text"


def test_unknown_arguments_are_refused(pair) -> None:
    """B5 and S5: a sender argument is an unknown field (invalid_arguments, field set)."""
    app, a, ta, b, _ = pair
    for extra in ("sender", "from", "broadcast", "session_id"):
        e = err(app, "message/send", {"session": ta, "target": b["name"], "message": "x", extra: a["name"]})
        assert e.code == "invalid_arguments"
        assert e.field == extra
    for method in ("mailbox/wait", "agent/list"):
        e = err(app, method, {"session": ta, "verbose": True})
        assert e.code == "invalid_arguments"


# --- sessions --------------------------------------------------------------------------------------------------


def test_operations_need_a_session(pair) -> None:
    """B1: WARDIAN_SESSION_ID unset or empty is missing_session."""
    app, _, _, b, _ = pair
    for session in (None, ""):
        params: dict[str, Any] = {"target": b["name"], "message": "x"}
        if session is not None:
            params["session"] = session
        assert err(app, "message/send", params).code == "missing_session"
    assert err(app, "mailbox/receive", {}).code == "missing_session"


def test_forged_sessions_are_refused(pair) -> None:
    """S5: wrong secrets and unknown ids are refused; attribution comes from the session."""
    app, _, ta, b, _ = pair
    prefix, tag, sid, secret = ta.split("_", 3)
    before = record_count(app)
    cases = {
        f"{prefix}_{tag}_{sid}_{'B' * len(secret)}": "unauthenticated",
        f"{prefix}_{tag}_{sid}": "unauthenticated",
        f"{prefix}_{tag}_987654_{secret}": "unknown_session",
        f"{prefix}_ffffffff_{sid}_{secret}": "session_home_mismatch",
        "garbage": "unknown_session",
    }
    for token, code in cases.items():
        assert err(app, "message/send", {"session": token, "target": b["name"], "message": "x"}).code == code
    assert record_count(app) == before


# --- receive ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1, 101, 1.5, "10", True])
def test_receive_limit_is_bounded(pair, limit: Any) -> None:
    """RCV-4: limit is bounded to 100 records (invalid_limit, allowed 1..100)."""
    app, _, _, _, tb = pair
    e = err(app, "mailbox/receive", {"session": tb, "limit": limit})
    assert e.code == "invalid_limit"
    assert "1..100" in (e.allowed or "")


@pytest.mark.parametrize("timeout", [-1, 60001, 10**12, 1.5, "1000", True])
def test_timeouts_are_bounded(pair, timeout: Any) -> None:
    """RCV-4, WAIT-3: timeout_ms is bounded to 60 seconds (invalid_timeout, allowed 0..60000)."""
    app, _, _, _, tb = pair
    for method in ("mailbox/receive", "mailbox/wait"):
        e = err(app, method, {"session": tb, "timeout_ms": timeout})
        assert e.code == "invalid_timeout"


def test_null_limit_means_the_default(pair) -> None:
    """B15: limit null is the default (20)."""
    app, _, ta, b, tb = pair
    for i in range(25):
        app.call("message/send", {"session": ta, "target": b["name"], "message": f"m{i}"})
    page = app.call("mailbox/receive", {"session": tb, "limit": None})
    assert len(page["records"]) == 20
    assert page["more"] is True


def test_receive_pages_cursor_and_ack(pair) -> None:
    """RCV-2: pass cursor to continue reading and ack_cursor to acknowledge a previously returned batch."""
    app, _, ta, b, tb = pair
    for i in range(5):
        app.call("message/send", {"session": ta, "target": b["name"], "message": f"m{i}"})
    p1 = app.call("mailbox/receive", {"session": tb, "limit": 2})
    p2 = app.call("mailbox/receive", {"session": tb, "limit": 2, "cursor": p1["cursor"]})
    assert [r["text"] for r in p1["records"]] == ["m0", "m1"]
    assert [r["text"] for r in p2["records"]] == ["m2", "m3"]
    p3 = app.call("mailbox/receive", {"session": tb, "limit": 10, "ack_cursor": p1["cursor"]})
    assert p3["acked"] == 2
    assert [r["text"] for r in p3["records"]] == ["m2", "m3", "m4"]
    again = app.call("mailbox/receive", {"session": tb, "ack_cursor": p1["cursor"]})
    assert again["acked"] == 0  # re-ack is harmless


def test_replaying_a_cursor_preserves_identities_and_executes_nothing(pair) -> None:
    """RCV-3: replaying a cursor preserves record identities and does not execute work."""
    app, _, ta, b, tb = pair
    app.call("message/send", {"session": ta, "target": b["name"], "message": "first"})
    p1 = app.call("mailbox/receive", {"session": tb, "limit": 1})
    rid = app.call("task/followup", {"session": ta, "target": b["name"], "message": "work"})["request_id"]
    first = app.call("mailbox/receive", {"session": tb, "cursor": p1["cursor"]})
    replay = app.call("mailbox/receive", {"session": tb, "cursor": p1["cursor"]})
    assert [r["id"] for r in first["records"]] == [r["id"] for r in replay["records"]] == [rid]
    assert first["records"][0]["new_work"] is True
    assert replay["records"][0]["new_work"] is False
    assert replay["cursor"] == first["cursor"]


def test_another_recipients_cursor_is_rejected(shared_app: AppHandle) -> None:
    """B17: another recipient's valid cursor is invalid_cursor; 0 records, 0 acked."""
    a, ta = shared_app.add_agent()
    b, tb = shared_app.add_agent()
    shared_app.call("message/send", {"session": ta, "target": b["name"], "message": "x"})
    shared_app.call("message/send", {"session": tb, "target": a["name"], "message": "y"})
    cur_b = shared_app.call("mailbox/receive", {"session": tb})["cursor"]
    for field in ("cursor", "ack_cursor"):
        assert err(shared_app, "mailbox/receive", {"session": ta, field: cur_b}).code == "invalid_cursor"
    for bad in ("", "cur1_", "nonsense", "cur1_" + "A" * 60, 5):
        assert err(shared_app, "mailbox/receive", {"session": tb, "ack_cursor": bad}).code == "invalid_cursor"
    assert len(shared_app.call("mailbox/receive", {"session": tb})["records"]) == 1


def test_a_task_is_exposed_as_new_work_once(pair) -> None:
    """CLM-2: only one [of manual receive and dispatch] may expose that task as new work."""
    app, _, ta, b, tb = pair
    rid = app.call("task/followup", {"session": ta, "target": b["name"], "message": "w"})["request_id"]
    seen = [r["new_work"] for _ in range(3) for r in app.call("mailbox/receive", {"session": tb})["records"]
            if r["id"] == rid]
    assert seen == [True, False, False]


def test_an_empty_receive_wait_times_out_and_cancels_nothing(pair) -> None:
    """T3, RCV-5: an empty wait does not cancel tasks; later messages remain available."""
    app, _, ta, b, tb = pair
    rid = app.call("task/followup", {"session": ta, "target": b["name"], "message": "w"})["request_id"]
    page = app.call("mailbox/receive", {"session": tb})
    app.call("mailbox/receive", {"session": tb, "ack_cursor": page["cursor"]})
    empty = app.call("mailbox/receive", {"session": tb, "timeout_ms": 200})
    assert empty["timed_out"] is True
    assert empty["records"] == []
    facts = app.call("mailbox/records", {"limit": 100000})["records"]
    assert any(r["id"] == rid for r in facts)
    app.call("message/send", {"session": ta, "target": b["name"], "message": "later"})
    assert [r["text"] for r in app.call("mailbox/receive", {"session": tb})["records"]] == ["later"]


def test_receive_with_timeout_wakes_on_a_new_record(pair) -> None:
    """RCV-7: receive with a nonzero timeout waits on recipient mailbox signals and returns the page."""
    app, _, ta, b, tb = pair
    result: dict[str, Any] = {}
    t = threading.Thread(target=lambda: result.update(
        app.call("mailbox/receive", {"session": tb, "timeout_ms": 30000}, timeout_s=60)))
    t.start()
    app.call("message/send", {"session": ta, "target": b["name"], "message": "wake"})
    t.join(60)
    assert [r["text"] for r in result["records"]] == ["wake"]
    assert result["timed_out"] is False


# --- wait ------------------------------------------------------------------------------------------------------


def test_wait_returns_at_once_without_body_when_records_exist(pair) -> None:
    """WAIT-1, WAIT-2: wait_agent returns immediately if unacknowledged activity exists; the response has no body."""
    app, _, ta, b, tb = pair
    app.call("message/send", {"session": ta, "target": b["name"], "message": "secret body"})
    r = app.call("mailbox/wait", {"session": tb, "timeout_ms": 60000})
    assert r == {"woke": True, "timed_out": False, "wake_reason": "mailbox_activity"}
    # Waiting consumed nothing: the record is still there, unacknowledged.
    assert [x["text"] for x in app.call("mailbox/receive", {"session": tb})["records"]] == ["secret body"]


def test_wait_zero_checks_immediately(pair) -> None:
    """WAIT-3: timeout_ms: 0 checks immediately."""
    app, _, _, _, tb = pair
    assert app.call("mailbox/wait", {"session": tb, "timeout_ms": 0}) == {
        "woke": False, "timed_out": True, "wake_reason": None}


def test_wait_wakes_on_the_next_record(pair) -> None:
    """WAIT-2: otherwise it subscribes before checking durable state and waits for the next mailbox signal."""
    app, _, ta, b, tb = pair
    result: dict[str, Any] = {}
    t = threading.Thread(target=lambda: result.update(app.call("mailbox/wait", {"session": tb}, timeout_s=70)))
    t.start()
    app.call("task/followup", {"session": ta, "target": b["name"], "message": "go"})
    t.join(70)
    assert result == {"woke": True, "timed_out": False, "wake_reason": "mailbox_activity"}
    page = app.call("mailbox/receive", {"session": tb})
    assert page["records"][0]["new_work"] is True  # waiting claimed nothing


def test_completion_wakes_the_requesters_wait(pair) -> None:
    """WAIT-6: completion wakes an active mailbox wait."""
    app, _a, ta, b, tb = pair
    rid = app.call("task/followup", {"session": ta, "target": b["name"], "message": "go"})["request_id"]
    result: dict[str, Any] = {}
    t = threading.Thread(target=lambda: result.update(app.call("mailbox/wait", {"session": ta}, timeout_s=70)))
    t.start()
    app.call("task/reply", {"session": tb, "request_id": rid, "status": "done", "message": "ok"})
    t.join(70)
    assert result["woke"] is True


# --- reply -----------------------------------------------------------------------------------------------------


def test_reply_goes_to_the_requester_once(pair) -> None:
    """TOOL-2, RPL-1: reply takes request_id, status and message; the request determines the destination."""
    app, a, ta, b, tb = pair
    rid = app.call("task/followup", {"session": ta, "target": b["name"], "message": "q"})["request_id"]
    r = app.call("task/reply", {"session": tb, "request_id": rid, "status": "done", "message": "answer"})
    proto.validate_result("task/reply", r)
    assert r["requester"]["uuid"] == a["uuid"]
    rec = app.call("mailbox/receive", {"session": ta})["records"][0]
    assert (rec["kind"], rec["request_id"], rec["status"], rec["text"]) == ("reply", rid, "done", "answer")
    before = record_count(app)
    e = err(app, "task/reply", {"session": tb, "request_id": rid, "status": "failed", "message": "again"})
    assert e.code == "already_completed"
    assert e.details == {"status": "done", "reply_id": r["reply_id"]}
    assert record_count(app) == before


def test_only_the_assigned_recipient_may_reply(shared_app: AppHandle) -> None:
    """RPL-2: reply completes the specified request as its authorized recipient (not_recipient, 0 writes)."""
    _a, ta = shared_app.add_agent()
    b, _ = shared_app.add_agent()
    _, tc = shared_app.add_agent()
    rid = shared_app.call("task/followup", {"session": ta, "target": b["name"], "message": "q"})["request_id"]
    before = record_count(shared_app)
    for token in (tc, ta):
        e = err(shared_app, "task/reply", {"session": token, "request_id": rid, "status": "done", "message": "x"})
        assert e.code == "not_recipient"
    assert record_count(shared_app) == before


def test_reply_needs_a_task_request_id(pair) -> None:
    """RPL-3: only an assigned task with an explicit request_id may use reply (not_a_task / unknown_request)."""
    app, _, ta, b, tb = pair
    info = app.call("message/send", {"session": ta, "target": b["name"], "message": "fyi"})["interaction_id"]
    assert err(app, "task/reply", {"session": tb, "request_id": info, "status": "done",
                                   "message": "x"}).code == "not_a_task"
    for rid in ("ask_doesnotexist", "nonsense"):
        assert err(app, "task/reply", {"session": tb, "request_id": rid, "status": "done",
                                       "message": "x"}).code == "unknown_request"


@pytest.mark.parametrize("status", ["DONE", "success", "", None, 1])
def test_reply_status_is_done_blocked_or_failed(pair, status: Any) -> None:
    """RPL-2: status (done, blocked, or failed): anything else is invalid_status."""
    app, _, ta, b, tb = pair
    rid = app.call("task/followup", {"session": ta, "target": b["name"], "message": "q"})["request_id"]
    e = err(app, "task/reply", {"session": tb, "request_id": rid, "status": status, "message": "x"})
    assert e.code == "invalid_status"
    assert e.allowed == "done, blocked, failed"


# --- interrupt, list, legacy --------------------------------------------------------------------------------


def test_interrupt_with_no_active_turn_is_a_clear_no_op(pair) -> None:
    """B25, INT-4: no active turn is not_active, and nothing is persisted."""
    app, _, ta, b, _ = pair
    e = err(app, "agent/interrupt", {"session": ta, "target": b["name"]})
    assert e.code == "not_active"
    assert e.details["status"] == "off"


def test_list_agents_shows_names_uuids_providers_status_and_the_caller(pair) -> None:
    """TOOL-1: list_agents discovers Wardian peer names, UUIDs, providers, and status."""
    app, a, ta, b, _ = pair
    result = app.call("agent/list", {"session": ta})
    proto.validate_result("agent/list", result)
    assert result["caller"] == {"name": a["name"], "uuid": a["uuid"]}
    row = next(x for x in result["agents"] if x["uuid"] == b["uuid"])
    assert (row["name"], row["provider"], row["status"]) == (b["name"], "codex", "off")
    assert ta not in str(result)  # no listing ever shows a session token


@pytest.mark.parametrize("method", sorted(proto.RETIRED_METHODS))
def test_retired_operations_deliver_nothing(pair, method: str) -> None:
    """LEG-1: the legacy send/ask control operations are removed; old requests cannot reactivate delivery."""
    app, _, ta, b, _ = pair
    before = record_count(app)
    e = err(app, method, {"session": ta, "target": b["name"], "message": "old"})
    assert e.code == "retired_operation"
    assert record_count(app) == before
