"""Deterministic crashes at each named point (docs/reliability.md row D3; `wardian.faults`, WARDIAN_CRASHPOINT).

Before COMMIT the record is absent and the caller was not told it was admitted; after COMMIT it is present
and the caller saw `admitted` or `uncertain`. Submit-side points leave the task uncertain, never submitted
again; a crash between terminal evidence and the reply publishes that reply exactly once on restart.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.world import (
    FakeCodex,
    call_outcome,
    db_rows,
    integrity_ok,
    poll,
    report,
    size,
    start_with,
    stop,
    wait_owner_ready,
)
from wardian.client import AppClient
from wardian.faults import POINTS
from wardian.home import Home

CRASHED = 137
# point -> (record committed?, what the caller may have seen)
ADMISSION_POINTS = {
    "before_begin": (False, {"uncertain"}),
    "after_insert_before_commit": (False, {"uncertain"}),
    "after_commit_before_reply_write": (True, {"uncertain"}),
    "after_reply_write": (True, {"admitted"}),
}
RUNTIME_POINTS = ("after_claim_before_provider_submit", "after_provider_submit_before_ack_persist",
                  "after_terminal_evidence_before_reply_publish")


ACP_POINTS = ("after_provider_answer_before_outcome",)
"""Crashed at against the real Qwen Code, in tests/providers/acp/test_lost.py."""


def test_every_named_point_is_exercised_here() -> None:
    """D3: the points of `wardian.faults` are exactly the ones this suite (or, for ACP, test_lost.py) crashes at."""
    assert set(ADMISSION_POINTS) | set(RUNTIME_POINTS) | set(ACP_POINTS) == POINTS


@pytest.fixture
def fake(root: Path) -> Iterator[FakeCodex]:
    fake = FakeCodex(root.parent / f"{root.name}-codex")
    yield fake
    shutil.rmtree(fake.dir, ignore_errors=True)


def pair(root: Path, extra_env: dict[str, str] | None = None) -> tuple[str, str]:
    app = start_with(root, extra_env)
    app.call("agent/add", {"name": "lead", "provider": "codex"})
    app.call("agent/add", {"name": "worker", "provider": "codex"})
    lead = app.call("agent/session", {"agent": "lead"})["session_id"]
    worker = app.call("agent/session", {"agent": "worker"})["session_id"]
    if extra_env:
        app.call("agent/start", {"agent": "worker"}, timeout_s=60)
        wait_owner_ready(app, "worker")
    stop(app)
    return lead, worker


@pytest.mark.parametrize("point", sorted(ADMISSION_POINTS))
def test_a_crash_on_the_admission_path_leaves_a_record_only_after_its_commit(root: Path, point: str) -> None:
    """D3 [CI 5 runs/point, NIGHTLY 20]: before COMMIT the row is absent and the caller saw
    a dropped connection (uncertain), never a receipt; after COMMIT the row is present and the caller saw
    admitted or uncertain; the client wrote the request once; integrity ok."""
    runs = size(5, 20)
    lead, _ = pair(root)
    committed, allowed = ADMISSION_POINTS[point]
    lost = duplicated = integrity_failures = 0
    seen: set[str] = set()
    for i in range(runs):
        app = start_with(root, {"WARDIAN_CRASHPOINT": point})
        client = AppClient(Home(root))
        outcome, _ = call_outcome(client, "message/send", {"session": lead, "target": "worker",
                                                           "message": f"{point}-{i}"})
        assert client.requests_written == 1
        client.close()
        assert app.proc.wait(30) == CRASHED
        stop(app)
        seen.add(outcome)
        integrity_failures += not integrity_ok(root)
        rows = db_rows(root, "SELECT count(*) FROM interactions WHERE body = ?", (f"{point}-{i}",))[0][0]
        duplicated += max(0, rows - 1)
        if committed:
            lost += rows == 0 and outcome == "admitted"
            assert rows == 1
        else:
            assert rows == 0
    app = start_with(root)  # the home still works after every crash
    assert app.call("app/status")["running"] is True
    stop(app)
    report(f"D3 crash_points {point}", rounds=runs, lost=lost, duplicated=duplicated,
           integrity_failures=integrity_failures, outcomes=sorted(seen))
    assert seen <= allowed
    assert (lost, duplicated, integrity_failures) == (0, 0, 0)


def dispatch_settled(root: Path, lead: str, fake: FakeCodex) -> None:
    """Until the dispatcher of a freshly started app has had its chance at every older pending task: a probe
    task admitted now is answered, and tasks are dispatched in admission order."""
    app_client = AppClient(Home(root))
    try:
        probe = app_client.call("task/followup", {"session": lead, "target": "worker", "message": "probe"})
        rid = probe["request_id"]
        poll(lambda: db_rows(root, "SELECT state FROM tasks WHERE request_id = ?", (rid,))[0][0] == "completed",
             "the probe task was answered")
    finally:
        app_client.close()


@pytest.mark.parametrize("point", RUNTIME_POINTS)
def test_a_crash_on_the_submit_path_is_never_resubmitted_and_evidence_is_published_once(
        root: Path, fake: FakeCodex, point: str) -> None:
    """D3 [CI 5 runs/point, NIGHTLY 20]: a crash after the claim or after the provider
    accepted leaves the task uncertain and it is never submitted again over 3 restarts; a crash after the
    terminal evidence was persisted publishes the reply exactly once on restart, without rerunning the turn."""
    runs = size(5, 20)
    lead, _ = pair(root, fake.env())
    request_ids: list[str] = []
    generation = 0
    for _ in range(runs):
        app = start_with(root, {**fake.env(), "WARDIAN_CRASHPOINT": point})
        generation = wait_owner_ready(app, "worker", generation)
        outcome, receipt = call_outcome(app.client, "task/followup", {"session": lead, "target": "worker",
                                                                      "message": point})
        assert app.proc.wait(60) == CRASHED
        stop(app)
        if outcome == "admitted":
            request_ids.append(receipt["request_id"])
        else:  # the crash beat the receipt: the task is the newest one
            request_ids.append(db_rows(root, "SELECT request_id FROM tasks ORDER BY interaction_id DESC LIMIT 1")[0][0])
        app = start_with(root, fake.env())  # recovery runs before readiness
        generation = wait_owner_ready(app, "worker", generation)
        stop(app)
    for _ in range(3):
        app = start_with(root, fake.env())
        generation = wait_owner_ready(app, "worker", generation)
        dispatch_settled(root, lead, fake)
        stop(app)
    assert integrity_ok(root)
    replayed = duplicated = 0
    for rid in request_ids:
        state, reply_id = db_rows(root, "SELECT state, reply_id FROM tasks WHERE request_id = ?", (rid,))[0]
        attempts = fake.attempts(rid)
        answers = db_rows(root, "SELECT count(*) FROM interactions WHERE request_id = ? AND kind IN "
                          "('reply', 'notice')", (rid,))[0][0]
        if point == "after_claim_before_provider_submit":
            assert (state, len(attempts)) == ("uncertain", 0)
        elif point == "after_provider_submit_before_ack_persist":
            assert (state, len(attempts)) == ("uncertain", 1)
        else:
            assert (state, len(attempts), answers) == ("completed", 1, 1)
            assert reply_id is not None
        replayed += max(0, len(attempts) - (0 if point == "after_claim_before_provider_submit" else 1))
        duplicated += max(0, answers - 1)
    report(f"D3 crash_points {point}", rounds=runs, duplicated=duplicated, replayed=replayed, restarts=3)
