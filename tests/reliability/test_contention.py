"""Lock contention (docs/reliability.md row D8): 8 writers, the app's dispatcher on a started agent (fake Codex) and
an outside checkpoint loop on the same database. No caller ever sees SQLITE_BUSY / "database is locked".
Counted by operations, not by time; latency is scripts/bench.py's business.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from collections import Counter
from pathlib import Path

from tests.reliability.world import (
    FakeCodex,
    call_outcome,
    db_rows,
    integrity_ok,
    report,
    size,
    start_with,
    stop,
    wait_owner_ready,
)
from wardian.client import AppClient

WRITERS = 8
BOTH_STORES = True  # On the shared store the outside load is VACUUM (ANALYZE) of the busiest tables


def test_d8_no_busy_or_locked_error_reaches_a_caller_under_contention(root: Path, store_url: str | None) -> None:
    """D8 [CI 8 x 500 operations, NIGHTLY 8 x 5,000]: mixed send / task / receive+ack from 8
    clients while the dispatcher submits tasks and another process checkpoints the WAL in a loop: every
    operation succeeds (0 storage errors, 0 uncertain), and the store passes integrity_check."""
    ops = size(500, 5000)
    fake = FakeCodex(root.parent / f"{root.name}-codex")
    try:
        app = start_with(root, fake.env(), store_url)
        names = [f"w{i}" for i in range(WRITERS)]
        tokens = {}
        for name in [*names, "worker"]:
            app.call("agent/add", {"name": name, "provider": "codex"})
            tokens[name] = app.call("agent/session", {"agent": name})["session_id"]
        app.call("agent/start", {"agent": "worker"}, timeout_s=60)
        wait_owner_ready(app, "worker")
        outcomes: Counter[str] = Counter()
        lock = threading.Lock()
        done = threading.Event()
        checkpoints: Counter[str] = Counter()
        refusals: Counter[str] = Counter()  # what reached a caller, for the failure's message

        def checkpointer() -> None:
            if store_url is not None:
                import psycopg

                with psycopg.connect(store_url, autocommit=True) as pg:
                    while not done.is_set():
                        pg.execute("VACUUM (ANALYZE) interactions, tasks, agents")
                        checkpoints["done"] += 1
                return
            conn = sqlite3.connect(root / "wardian.db", timeout=30)
            try:
                while not done.is_set():
                    busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                    checkpoints["busy" if busy else "done"] += 1
            finally:
                conn.close()

        def writer(n: int) -> None:
            me, peer = names[n], names[(n + 1) % WRITERS]
            with AppClient(app.home) as client:
                ack = None
                for i in range(ops):
                    kind = i % 3
                    if kind == 0:
                        outcome, result = call_outcome(client, "message/send", {
                            "session": tokens[me], "target": peer, "message": f"{me}-{i}"})
                    elif kind == 1:
                        outcome, result = call_outcome(client, "task/followup", {
                            "session": tokens[me], "target": "worker", "message": f"{me}-{i}"})
                    else:
                        outcome, result = call_outcome(client, "mailbox/receive", {
                            "session": tokens[me], "limit": 10, "ack_cursor": ack})
                        ack = result["cursor"] if outcome == "admitted" and result["records"] else None
                    with lock:
                        outcomes[outcome] += 1
                        if outcome != "admitted":
                            refusals[f"{result.code}: {result.message}"] += 1

        side = threading.Thread(target=checkpointer)
        side.start()
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        done.set()
        side.join(60)
        stop(app)
        dispatched = sum(1 for e in fake.entries() if e["answer"] == "ok")
        ok = integrity_ok(root)
        tasks = db_rows(root, "SELECT count(*) FROM tasks")[0][0]
        report("D8 busy_contention", rounds=WRITERS * ops, integrity_failures=int(not ok),
               errors=outcomes["not_admitted"] + outcomes["uncertain"], dispatched=dispatched,
               checkpoints=sum(checkpoints.values()))
        assert outcomes == Counter(admitted=WRITERS * ops), dict(refusals)
        assert ok
        assert tasks == WRITERS * len(range(1, ops, 3))
        assert dispatched > 0  # the dispatcher competed for the store meanwhile
        assert checkpoints["done"] + checkpoints["busy"] > 0
    finally:
        shutil.rmtree(fake.dir, ignore_errors=True)
