"""kill -9 of the app: acknowledged records survive, and a task is never exposed twice across a restart."""

from __future__ import annotations

import random
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import short_home, start_app, stop_app
from wardian import errors
from wardian.client import AppClient
from wardian.home import Home

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


@pytest.fixture
def root() -> Iterator[Path]:
    path = short_home("wk")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def setup_pair(home: Home) -> tuple[str, str, str]:
    with AppClient(home) as c:
        c.call("agent/add", {"name": "sender", "provider": "codex"})
        c.call("agent/add", {"name": "receiver", "provider": "codex"})
        ts = c.call("agent/session", {"agent": "sender"})["session_id"]
        tr = c.call("agent/session", {"agent": "receiver"})["session_id"]
    return ts, tr, "receiver"


def stored(root: Path) -> dict[str, str]:
    conn = sqlite3.connect(root / "wardian.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return dict(conn.execute("SELECT public_id, body FROM interactions").fetchall())
    finally:
        conn.close()


def test_a_receipt_survives_kill_9_right_after_it_was_returned(root: Path) -> None:
    """RCPT-3, D1: a record the app acknowledged survives kill -9."""
    proc = start_app(root)
    home = Home(root)
    ts, _, target = setup_pair(home)
    with AppClient(home) as c:
        receipt = c.call("task/followup", {"session": ts, "target": target, "message": "survive me"})
    proc.kill()
    stop_app(proc)
    assert stored(root)[receipt["interaction_id"]] == "survive me"


def test_concurrent_acknowledged_sends_survive_a_random_kill_9(root: Path) -> None:
    """D1 (reduced): 8 concurrent senders, SIGKILL at a random moment; 0 acknowledged
    receipts missing, 0 duplicates, integrity ok; every call ended with a receipt or a typed error."""
    proc = start_app(root)
    home = Home(root)
    ts, _, target = setup_pair(home)
    receipts: list[tuple[str, str]] = []
    outcomes: list[str] = []
    lock = threading.Lock()
    started = threading.Barrier(9)

    def sender(n: int) -> None:
        started.wait()
        with AppClient(home) as c:
            for i in range(10_000):
                token = f"s{n}-{i}"
                try:
                    r = c.call("message/send", {"session": ts, "target": target, "message": token})
                except errors.DeliveryUncertain:
                    with lock:
                        outcomes.append("uncertain")
                    return
                except errors.TransportError:
                    with lock:
                        outcomes.append("not_admitted")
                    return
                with lock:
                    receipts.append((r["interaction_id"], token))

    threads = [threading.Thread(target=sender, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    started.wait()
    threading.Event().wait(random.uniform(0.05, 0.4))
    proc.kill()
    for t in threads:
        t.join(60)
    stop_app(proc)
    rows = stored(root)
    assert receipts, "no send was acknowledged before the kill"
    missing = [rid for rid, _ in receipts if rows.get(rid) is None]
    assert missing == []
    bodies = [b for b in rows.values() if b.startswith("s")]
    assert len(bodies) == len(set(bodies))  # no duplicate per client token
    assert len(outcomes) == 8  # every sender ended with exactly one typed failure, none hung
    proc2 = start_app(root)
    try:
        with AppClient(home) as c:
            assert c.call("app/status")["running"] is True
    finally:
        stop_app(proc2)


def test_a_task_is_never_exposed_twice_across_kill_9(root: Path) -> None:
    """CLM-2: only one may expose that task as new work; a restart does not re-expose claimed tasks."""
    proc = start_app(root)
    home = Home(root)
    ts, tr, target = setup_pair(home)
    with AppClient(home) as c:
        rids = [c.call("task/followup", {"session": ts, "target": target, "message": f"t{i}"})["request_id"]
                for i in range(20)]
        first = c.call("mailbox/receive", {"session": tr, "limit": 10})
    exposed = {r["id"] for r in first["records"] if r["new_work"]}
    assert len(exposed) == 10
    proc.kill()
    stop_app(proc)
    proc2 = start_app(root)
    try:
        with AppClient(home) as c:
            page = c.call("mailbox/receive", {"session": tr, "limit": 100})
        again = {r["id"] for r in page["records"] if r["new_work"]}
        assert again.isdisjoint(exposed)
        assert again | exposed == set(rids)
    finally:
        stop_app(proc2)
