"""Waits (docs/reliability.md rows T1, T2, T4). T3 (an empty receive wait cancels nothing) is
tests/app/test_operations.py::test_an_empty_receive_wait_times_out_and_cancels_nothing and
tests/mcp/test_mcp_tools.py::test_receive_with_a_timeout_and_nothing_pending_times_out_and_cancels_nothing.
Outcomes are counted, never timed.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any

import pytest

from tests.mcp.mcp_harness import raw_server, server_env
from tests.reliability.world import AppHandle, db_rows, report, seeded_random, size
from wardian.client import AppClient
from wardian.limits import CODEX_TOOL_TIMEOUT_SEC, CONTROL_GRACE_MS, MAX_WAIT_MS


def test_t1_the_longest_wait_ends_before_codex_gives_up_on_the_tool() -> None:
    """T1: the client's bound on the longest wait (60 s plus the grace) is under Codex's
    tool_timeout_sec of 70 s, so an expired wait is a result, never a host timeout."""
    assert MAX_WAIT_MS + CONTROL_GRACE_MS < CODEX_TOOL_TIMEOUT_SEC * 1000


@pytest.mark.parametrize("timeout_ms", [0, 1])
def test_t1_short_waits_on_an_empty_mailbox_end_timed_out(shared_app: AppHandle, timeout_ms: int) -> None:
    """T1 [CI N=100]: wait with timeout 0 or 1 ms on an empty mailbox returns
    `timed_out: true` (no body, nothing consumed), 100/100."""
    _, token = shared_app.add_agent()
    with AppClient(shared_app.home) as client:
        results = [client.call("mailbox/wait", {"session": token, "timeout_ms": timeout_ms}) for _ in range(100)]
    assert results == [{"woke": False, "timed_out": True, "wake_reason": None}] * 100


@pytest.mark.slow
def test_t1_the_longest_wait_expires_as_a_result(shared_app: AppHandle) -> None:
    """T1 [NIGHTLY N=3]: a 60,000 ms wait on an empty mailbox ends with `timed_out: true`
    through the client's own bound (no transport timeout, no uncertain)."""
    _, token = shared_app.add_agent()
    with AppClient(shared_app.home) as client:
        results = [client.call_wait("mailbox/wait", {"session": token, "timeout_ms": MAX_WAIT_MS}, MAX_WAIT_MS)
                   for _ in range(3)]
    report("T1 wait_bounds 60000", rounds=3, timed_out=sum(r["timed_out"] for r in results))
    assert [r["timed_out"] for r in results] == [True] * 3


def test_t2_a_send_racing_a_wait_always_wakes_it_and_consumes_nothing(shared_app: AppHandle) -> None:
    """T2 [CI N=1000]: a send races wait_agent (0-5 ms either side); the wait wakes (it
    never times out) 1000/1000, carries no body, and the unacknowledged count is unchanged by it."""
    rounds = size(1000, 5000)
    rng, seed = seeded_random("T2")
    _, sender = shared_app.add_agent()
    receiver_agent, receiver = shared_app.add_agent()
    target = receiver_agent["uuid"]
    go = threading.Barrier(2)
    offsets = [rng.uniform(-0.005, 0.005) for _ in range(rounds)]
    outcomes: Counter[str] = Counter()
    bodies = 0

    def waiter() -> None:
        nonlocal bodies
        with AppClient(shared_app.home) as client:
            for offset in offsets:
                go.wait()
                if offset < 0:
                    threading.Event().wait(-offset)  # the race's offset, not a synchronisation
                result = client.call("mailbox/wait", {"session": receiver, "timeout_ms": 10_000})
                outcomes["woke" if result["woke"] and not result["timed_out"] else "timed_out"] += 1
                bodies += set(result) != {"woke", "timed_out", "wake_reason"}
                go.wait()

    thread = threading.Thread(target=waiter)
    thread.start()
    unchanged = 0
    with AppClient(shared_app.home) as client:
        for offset in offsets:
            go.wait()
            if offset > 0:
                threading.Event().wait(offset)
            client.call("message/send", {"session": sender, "target": target, "message": "ping"})
            go.wait()
            page = client.call("mailbox/receive", {"session": receiver, "limit": 100})
            unchanged += len(page["records"]) == 1  # the wait consumed nothing
            client.call("mailbox/receive", {"session": receiver, "ack_cursor": page["cursor"], "limit": 1})
    thread.join(60)
    report("T2 wake_no_lost_wakeup", rounds=rounds, lost=outcomes["timed_out"], seed=seed)
    assert outcomes == Counter(woke=rounds)
    assert bodies == 0
    assert unchanged == rounds


def _cancelled(message_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": message_id,
                                                                            "reason": "host gave up"}}


def test_t4_cancelling_a_send_never_cancels_its_admission(shared_app: AppHandle) -> None:
    """T4 [CI N=100]: the host sends notifications/cancelled right after tools/call
    send_message: at most one row per call, a call answered with a receipt has its row, and no id gets two
    answers; the server keeps serving (a ping is answered)."""
    rounds = size(100, 1000)
    _, lead = shared_app.add_agent()
    worker, _ = shared_app.add_agent()
    answers: Counter[int] = Counter()
    receipts: set[int] = set()
    with raw_server(server_env(str(shared_app.home.root), lead)) as server:
        server.initialize()
        for i in range(1, rounds + 1):
            server.send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                "name": "send_message", "arguments": {"target": worker["name"], "message": f"cancel-{i}"}}})
            server.send(_cancelled(i))
        server.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
        while True:
            message = server.read()
            if message.get("id") == "ping":
                break
            if "id" in message:
                answers[message["id"]] += 1
                result = message.get("result") or {}
                if not result.get("isError") and "structuredContent" in result:
                    receipts.add(message["id"])
        code, rest, _ = server.close()
    rest_ids = [line for line in rest.split(b"\n") if line]
    rows = Counter(body for (body,) in db_rows(shared_app.home.root, "SELECT body FROM interactions WHERE body LIKE "
                                                                     "'cancel-%'"))
    duplicated = sum(n - 1 for n in rows.values() if n > 1) + sum(n - 1 for n in answers.values() if n > 1)
    lost = sum(1 for i in receipts if rows[f"cancel-{i}"] != 1)
    report("T4 client_cancel_doesnt_cancel_admission cancelled", rounds=rounds, lost=lost, duplicated=duplicated,
           answered=len(answers), admitted=sum(rows.values()))
    assert code == 0
    assert duplicated == 0
    assert lost == 0
    assert len(rest_ids) <= rounds


def test_t4_killing_the_server_right_after_a_send_never_duplicates_it(shared_app: AppHandle) -> None:
    """T4 [CI N=10, NIGHTLY 100]: the MCP process is killed right after tools/call
    send_message is written: the message is admitted at most once and, once admitted, stays (it is there
    after the kill, never rolled back)."""
    rounds = size(10, 100)
    rng = random.Random(rounds)
    _, lead = shared_app.add_agent()
    worker, _ = shared_app.add_agent()
    for i in range(rounds):
        with raw_server(server_env(str(shared_app.home.root), lead)) as server:
            server.initialize()
            server.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "send_message", "arguments": {"target": worker["name"], "message": f"killed-{i}"}}})
            if rng.random() < 0.5:
                server.read()  # sometimes after the answer, sometimes before it
            server.kill()
    rows = Counter(body for (body,) in db_rows(shared_app.home.root, "SELECT body FROM interactions WHERE body LIKE "
                                                                     "'killed-%'"))
    report("T4 client_cancel_doesnt_cancel_admission killed", rounds=rounds,
           duplicated=sum(n - 1 for n in rows.values() if n > 1), admitted=sum(rows.values()))
    assert all(n == 1 for n in rows.values())
