"""Restart recovery and the dispatch fence, on the real app with a fake Codex speaking the app-server lines
(docs/reliability.md rows D9, D11). The fake logs every turn request outside the app; that log is the count of
dispatch attempts. tests/providers/codex/test_runtime_faults.py shows each fault once; these are the sizes of
docs/reliability.md.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.world import (
    AppHandle,
    FakeCodex,
    db_rows,
    integrity_ok,
    poll,
    report,
    size,
    start_with,
    stop,
    wait_owner_ready,
)
from wardian.model import InteractionKind, now_ms
from wardian.store import mailbox, open_sqlite, roster
from wardian.store import testing as store_testing


@pytest.fixture
def fake(root: Path) -> Iterator[FakeCodex]:
    fake = FakeCodex(root.parent / f"{root.name}-codex")
    yield fake
    shutil.rmtree(fake.dir, ignore_errors=True)


def started_worker(root: Path, fake: FakeCodex) -> tuple[AppHandle, str, int]:
    app = start_with(root, fake.env())
    app.call("agent/add", {"name": "lead", "provider": "codex"})
    app.call("agent/add", {"name": "worker", "provider": "codex"})
    lead = app.call("agent/session", {"agent": "lead"})["session_id"]
    app.call("agent/start", {"agent": "worker"}, timeout_s=60)
    return app, lead, wait_owner_ready(app, "worker")


def task_state(root: Path, rid: str) -> str:
    return str(db_rows(root, "SELECT state FROM tasks WHERE request_id = ?", (rid,))[0][0])


def settle(app: AppHandle, root: Path, lead: str) -> None:
    """Until the dispatcher had its chance at every older pending task: a probe task admitted now is answered
    (tasks are dispatched in admission order)."""
    rid = app.call("task/followup", {"session": lead, "target": "worker", "message": "probe"})["request_id"]
    poll(lambda: task_state(root, rid) == "completed", "the probe task was answered")


def restart(root: Path, fake: FakeCodex, generation: int) -> tuple[AppHandle, int]:
    app = start_with(root, fake.env())
    return app, wait_owner_ready(app, "worker", generation)


def test_d9_restart_dispatches_pending_tasks_once_and_publishes_captured_outcomes_once(
        root: Path, fake: FakeCodex) -> None:
    """D9: a store seeded with 10 pending tasks, 10 uncertain deliveries, 10 plain mailbox
    records and 5 captured terminal outcomes whose reply was never written: after a restart exactly 10
    dispatch attempts (the pending tasks), 0 for the uncertain ones or the records, each outcome published once
    without rerunning its turn; a second restart makes 0 new attempts and 0 new replies."""
    app, lead, generation = started_worker(root, fake)
    stop(app)
    store = open_sqlite(root / "wardian.db")
    try:
        agents = {a.name: a for a in roster.list_agents(store)}
        caller = roster.authenticate(store, lead)
        worker = agents["worker"]

        def admit(kind: InteractionKind, text: str) -> str:
            return mailbox.admit(store, caller, worker, kind, text).interaction_id

        pending = [admit(InteractionKind.TASK, f"pending {i}") for i in range(10)]
        uncertain = [admit(InteractionKind.TASK, f"uncertain {i}") for i in range(10)]
        records = [admit(InteractionKind.INFORMATION, f"record {i}") for i in range(10)]
        captured = [admit(InteractionKind.TASK, f"captured {i}") for i in range(5)]
        with store.atomic():
            store_testing.executemany(
                store,
                "UPDATE tasks SET state = 'uncertain', claimed_by = 'dispatch', claim_generation = ?, claimed_at = ?, "
                "uncertain_at = ? WHERE request_id = ?", [(generation, now_ms(), now_ms(), r) for r in uncertain])
            store_testing.executemany(
                store,
                "UPDATE tasks SET state = 'submitted', claimed_by = 'dispatch', claim_generation = ?, claimed_at = ?, "
                "submitted_at = ?, thread_id = 'thr-old', turn_id = ?, outcome_status = 'done', outcome_text = ?, "
                "outcome_at = ? WHERE request_id = ?",
                [(generation, now_ms(), now_ms(), f"turn-old-{i}", f"captured answer {i}", now_ms(), r)
                 for i, r in enumerate(captured)])
    finally:
        store.close()
    seeded = set(pending) | set(uncertain) | set(captured)

    def attempts() -> Counter[str]:
        return Counter(rid for e in fake.entries() if e["answer"] != "stale" for rid in e["request_ids"]
                       if rid in seeded)

    def answers() -> Counter[str]:
        return Counter(r for (r,) in db_rows(root, "SELECT request_id FROM interactions WHERE kind IN "
                                                   "('reply', 'notice') AND request_id IS NOT NULL"))

    before = len(fake.entries())
    app, generation = restart(root, fake, generation)
    poll(lambda: all(task_state(root, r) == "completed" for r in pending), "the pending tasks were answered")
    settle(app, root, lead)
    stop(app)
    first = attempts()
    injected = [e for e in fake.entries()[before:] if e["method"] == "thread/inject_items"]
    kinds = {**dict.fromkeys(pending, "pending"), **dict.fromkeys(uncertain, "uncertain"),
             **dict.fromkeys(captured, "captured")}
    assert first == Counter(pending), [(kinds[r], n) for r, n in first.items()]
    assert injected == []  # plain records stay on the receive path at startup
    assert {task_state(root, r) for r in uncertain} == {"uncertain"}
    replies = answers()
    assert [replies[r] for r in captured] == [1] * 5
    texts = dict(db_rows(root, "SELECT request_id, body FROM interactions WHERE kind = 'reply'"))
    assert [texts[r] for r in captured] == [f"captured answer {i}" for i in range(5)]
    assert all(db_rows(root, "SELECT acked_at IS NULL FROM interactions WHERE public_id = ?", (r,))[0][0]
               for r in records)

    app, generation = restart(root, fake, generation)
    settle(app, root, lead)
    stop(app)
    assert attempts() == first
    # No new reply for any seeded task (the probes of each settle get their own).
    assert {r: n for r, n in answers().items() if r in seeded} == {r: n for r, n in replies.items() if r in seeded}
    assert integrity_ok(root)
    report("D9 restart_recovery_dispatch", rounds=2, replayed=sum(attempts().values()) - 10,
           duplicated=sum(n - 1 for r, n in answers().items() if r in seeded and n > 1))


def test_d11_a_stale_turn_rejection_releases_the_claim_and_the_task_is_offered_again_exactly_once(
        root: Path, fake: FakeCodex) -> None:
    """D11 [CI N=100]: every steer meets Codex's stale-turn rejection (the held turn ends
    just before); the claim is released and the task is submitted again with turn/start: each task accepted
    exactly once, 0 duplicates."""
    n = size(100, 500)
    fake.configure(start="hold", steer="stale")
    app, lead, _ = started_worker(root, fake)
    rids = []
    try:
        for i in range(n):
            rid = app.call("task/followup", {"session": lead, "target": "worker", "message": f"t{i}"})["request_id"]
            rids.append(rid)
            poll(lambda r=rid: task_state(root, r) == "submitted", f"task {i} was bound")
    finally:
        stop(app)
    by_rid: dict[str, list[str]] = {r: [] for r in rids}
    for e in fake.entries():
        for r in e["request_ids"]:
            if r in by_rid:
                by_rid[r].append(f"{e['method']}:{e['answer']}")
    duplicated = sum(1 for seen in by_rid.values() if [s for s in seen if s.endswith(":ok")] != ["turn/start:ok"])
    stale_then_start = sum(1 for seen in by_rid.values() if seen == ["turn/steer:stale", "turn/start:ok"])
    report("D11 stale_fence_release", rounds=n, duplicated=duplicated, reoffered_once=stale_then_start)
    assert by_rid[rids[0]] == ["turn/start:ok"]
    assert duplicated == 0
    assert stale_then_start == n - 1  # every later task: one stale rejection, then exactly one re-offer


@pytest.mark.parametrize("fault", ["error", "lost_ack"])
def test_d11_an_unknown_error_or_a_lost_ack_stays_uncertain_and_is_never_offered_again(
        root: Path, fake: FakeCodex, fault: str) -> None:
    """D11: turn/start answered with an unknown error, or read and never answered (the
    app-server died): the task is uncertain and, over 3 restarts with a healthy Codex, 0 re-offers."""
    rounds = size(3, 20)
    app, lead, generation = started_worker(root, fake)
    stop(app)
    rids = []
    for _ in range(rounds):
        fake.configure(start=fault)
        app, generation = restart(root, fake, generation)
        rid = app.call("task/followup", {"session": lead, "target": "worker", "message": fault})["request_id"]
        rids.append(rid)
        poll(lambda r=rid: task_state(root, r) == "uncertain", "the task became uncertain")
        stop(app)
    fake.configure(start="complete")
    for _ in range(3):
        app, generation = restart(root, fake, generation)
        settle(app, root, lead)
        stop(app)
    replayed = sum(len(fake.attempts(r)) - 1 for r in rids)
    report(f"D11 uncertain_never_reoffered {fault}", rounds=rounds, replayed=replayed, restarts=3)
    assert [len(fake.attempts(r)) for r in rids] == [1] * rounds
    assert {task_state(root, r) for r in rids} == {"uncertain"}
