"""kill -9 of the app in the middle of concurrent work (docs/reliability.md rows D1, D2).

The rounds chain on one home: each burst ends with SIGKILL, the harness reads the store from outside, then
the next round restarts the app on the same home. Extends tests/app/test_crash.py (one round each).
"""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.world import (
    FakeCodex,
    call_outcome,
    db_rows,
    integrity_ok,
    kill9,
    report,
    seeded_random,
    size,
    start_with,
    stop,
    wait_owner_ready,
)
from wardian.client import AppClient
from wardian.home import Home

# Each test chains 50 rounds (CI), each restarting an app; every wait inside a round is bounded on its own (a client
# joins within 60 s). The chain took 114-135 s on a 2-core machine loaded by other test workers, past the suite's 120 s
# default: this bounds the whole chain against a hang, it is not a speed figure.
pytestmark = pytest.mark.timeout(900)

SENDERS = 8
BOTH_STORES = True  # D1 and D2 run on the embedded store and on the shared PostgreSQL store


def _backend(store_url: str | None) -> str:
    return "sqlite" if store_url is None else "postgresql"


@dataclass
class Burst:
    """What the clients of one round saw: every call ends in exactly one outcome."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    admitted: dict[str, str] = field(default_factory=dict)  # interaction id -> client token (the body)
    uncertain: list[str] = field(default_factory=list)
    not_admitted: list[str] = field(default_factory=list)
    calls: int = 0
    writes: int = 0


def burst(home: Home, method: str, session: str, target: str, tag: str, delay_s: float,
          kill: Any, extra: list[threading.Thread] | None = None) -> Burst:
    """SENDERS clients call `method` in a loop with distinct tokens until the app dies `delay_s` in."""
    out = Burst()
    started = threading.Barrier(SENDERS + 1)

    def sender(n: int) -> None:
        client = AppClient(home)
        started.wait()
        calls = 0
        for i in range(100_000):
            token = f"{tag}-c{n}-{i}"
            calls += 1
            outcome, value = call_outcome(client, method, {"session": session, "target": target, "message": token})
            with out.lock:
                if outcome == "admitted":
                    out.admitted[value["interaction_id"]] = token
                elif outcome == "uncertain":
                    out.uncertain.append(token)
                else:
                    out.not_admitted.append(token)
            if outcome != "admitted":
                break
        with out.lock:
            out.calls += calls
            out.writes += client.requests_written
        client.close()

    threads = [threading.Thread(target=sender, args=(n,)) for n in range(SENDERS)]
    for t in threads + (extra or []):
        t.start()
    started.wait()
    threading.Event().wait(delay_s)  # the fault's moment (uniform random), not a synchronisation
    kill()
    for t in threads + (extra or []):
        t.join(60)
        assert not t.is_alive(), "a client hung after the app died"
    return out


def receive_loop(home: Home, session: str, exposure_log: Path) -> None:
    """A manual receive loop (limit 5, acknowledging each page with the next call) until the app dies; every
    record it was handed as new work is logged outside the app before the next call."""
    client = AppClient(home)
    ack = None
    with exposure_log.open("a", encoding="utf-8") as log:
        while True:
            outcome, page = call_outcome(client, "mailbox/receive", {"session": session, "limit": 5, "ack_cursor": ack})
            if outcome != "admitted":
                break
            for r in page["records"]:
                if r["new_work"]:
                    log.write(json.dumps({"request_id": r["request_id"]}) + "\n")
                    log.flush()
            ack = page["cursor"] if page["records"] else None
    client.close()


def setup(app: Any) -> tuple[str, str]:
    app.call("agent/add", {"name": "lead", "provider": "codex"})
    app.call("agent/add", {"name": "worker", "provider": "codex"})
    lead = app.call("agent/session", {"agent": "lead"})["session_id"]
    worker = app.call("agent/session", {"agent": "worker"})["session_id"]
    return lead, worker


def test_d1_acknowledged_sends_survive_kill_9_rounds_under_8_concurrent_senders(root: Path,
                                                                               store_url: str | None) -> None:
    """D1 [CI N=50, NIGHTLY N=200]: SIGKILL 20-500 ms into a burst of 8 senders, then
    restart: 0 acknowledged receipts missing, 0 duplicates per client token, integrity ok every round, every
    call ended in exactly one of {receipt, not_admitted, uncertain}, and no client wrote a request twice."""
    rng, seed = seeded_random("D1")
    rounds = size(50, 200)
    app = start_with(root, store_url=store_url)
    lead, _ = setup(app)
    acknowledged: dict[str, str] = {}
    lost = duplicated = replayed = integrity_failures = uncertain = uncertain_present = 0
    for rnd in range(rounds):
        seen = burst(app.home, "message/send", lead, "worker", f"r{rnd}", rng.uniform(0.02, 0.5),
                     lambda a=app: kill9(a))
        assert len(seen.uncertain) + len(seen.not_admitted) == SENDERS  # each client ended on one failure
        assert seen.calls == len(seen.admitted) + len(seen.uncertain) + len(seen.not_admitted)
        replayed += seen.writes - seen.calls + len(seen.not_admitted)  # a not_admitted call wrote nothing
        acknowledged.update(seen.admitted)
        if not integrity_ok(root):
            integrity_failures += 1
        bodies = dict(db_rows(root, "SELECT public_id, body FROM interactions"))
        lost += sum(1 for rid, token in acknowledged.items() if bodies.get(rid) != token)
        counts = Counter(bodies.values())
        duplicated += sum(n - 1 for n in counts.values() if n > 1)
        uncertain += len(seen.uncertain)
        uncertain_present += sum(1 for token in seen.uncertain if counts[token])
        app = start_with(root, store_url=store_url)
    stop(app)
    report(f"D1 kill9_random_sends ({_backend(store_url)})", rounds=rounds, lost=lost, duplicated=duplicated,
           replayed=replayed,
           integrity_failures=integrity_failures, acknowledged=len(acknowledged), uncertain=uncertain,
           uncertain_committed=uncertain_present, seed=seed)
    assert acknowledged, "no send was acknowledged in any round"
    assert (lost, duplicated, replayed, integrity_failures) == (0, 0, 0, 0)


def test_d2_no_task_is_exposed_twice_when_receive_and_dispatch_race_across_kill_9(root: Path,
                                                                                  store_url: str | None) -> None:
    """D2 [CI N=50, NIGHTLY N=200]: 8 task senders, one manual receive loop and the app's
    dispatcher (a started agent on a fake Codex) compete for the same tasks; SIGKILL, restart. The harness
    logs every exposure outside the app (receive: new_work records; dispatch: submissions Codex accepted):
    0 tasks exposed twice, every task ends unclaimed, exposed once or uncertain, and 0 uncertain tasks are
    submitted again after a restart."""
    rng, seed = seeded_random("D2")
    rounds = size(50, 200)
    fake = FakeCodex(root.parent / f"{root.name}-codex")
    exposure_log = root.parent / f"{root.name}-exposed.jsonl"
    try:
        app = start_with(root, fake.env(), store_url)
        lead, worker = setup(app)
        app.call("agent/start", {"agent": "worker"}, timeout_s=60)
        generation = wait_owner_ready(app, "worker")
        integrity_failures = claimed_unseen = 0
        for rnd in range(rounds):
            reader = threading.Thread(target=receive_loop, args=(app.home, worker, exposure_log))
            burst(app.home, "task/followup", lead, "worker", f"r{rnd}", rng.uniform(0.02, 0.5),
                  lambda a=app: kill9(a), extra=[reader])
            if not integrity_ok(root):
                integrity_failures += 1
            app = start_with(root, fake.env(), store_url)
            generation = wait_owner_ready(app, "worker", generation)
        stop(app)

        received = [json.loads(line)["request_id"] for line in exposure_log.read_text().splitlines()]
        dispatched = [rid for e in fake.entries() if e["answer"] == "ok" for rid in e["request_ids"]]
        exposed = Counter(received) + Counter(dispatched)
        tasks = db_rows(root, "SELECT request_id, state, claimed_by, uncertain_at FROM tasks")
        states = Counter(state for _, state, _, _ in tasks)
        duplicated = sum(n - 1 for n in exposed.values() if n > 1)
        replayed = 0
        by_request = fake.attempts_by_request()
        for rid, state, claimed_by, uncertain_at in tasks:
            attempts = by_request.get(rid, [])
            replayed += max(0, len(attempts) - 1)
            if state == "uncertain":
                replayed += sum(1 for e in attempts if e["ts"] > uncertain_at)
            if state == "pending":
                assert exposed[rid] == 0, (rid, "pending yet exposed")
            if state == "claimed" and claimed_by == "receive" and exposed[rid] == 0:
                claimed_unseen += 1  # a receive whose answer died with the app: at most once, never twice
        assert not integrity_failures
        report(f"D2 kill9_claim_race ({_backend(store_url)})", rounds=rounds, duplicated=duplicated, replayed=replayed,
               integrity_failures=integrity_failures, tasks=len(tasks), exposed_by_receive=len(received),
               exposed_by_dispatch=len(dispatched), uncertain=states["uncertain"], unclaimed=states["pending"],
               claimed_unseen=claimed_unseen, seed=seed)
        assert received, "the race never happened: nothing was exposed by receive"
        assert dispatched, "the race never happened: nothing was exposed by dispatch"
        assert duplicated == 0, [rid for rid, n in exposed.items() if n > 1]
        assert replayed == 0
    finally:
        shutil.rmtree(fake.dir, ignore_errors=True)
        exposure_log.unlink(missing_ok=True)
