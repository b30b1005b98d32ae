"""Delivery faults real Codex will not produce on demand, with a fake app-server speaking the same lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import AppHandle, start_app, stop_app
from wardian.client import AppClient
from wardian.home import Home


def run(root: Path, exe: Path, log: Path, scenario: str, version: str = "0.171.0") -> AppHandle:
    proc = start_app(root, {"WARDIAN_CODEX": str(exe), "FAKE_CODEX_SCENARIO": scenario, "FAKE_CODEX_LOG": str(log),
                            "FAKE_CODEX_VERSION": version})
    return AppHandle(Home(root), proc, AppClient(Home(root)))


def sender_and_started_worker(app: AppHandle) -> tuple[str, dict[str, Any]]:
    """Register `sender` (its session token) and `worker`, and start worker's (fake) Codex owner."""
    _, sender = app.add_agent("sender")
    app.add_agent("worker")
    return sender, app.call("agent/start", {"agent": "worker"}, timeout_s=60)


def submissions(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [m for m in map(json.loads, log.read_text(encoding="utf-8").splitlines())
            if m.get("method") in ("turn/start", "turn/steer")]


def task_state(app: AppHandle, request_id: str) -> dict[str, Any]:
    records = app.call("mailbox/records", {"limit": 1000})["records"]
    return next(r for r in records if r["id"] == request_id)


def wait_for(predicate: Any, app: AppHandle, token: str, rounds: int = 300) -> None:
    for _ in range(rounds):
        if predicate():
            return
        app.call("mailbox/wait", {"session": token, "timeout_ms": 20})
    raise AssertionError("condition not reached")


def task_facts(root: Path, request_id: str) -> tuple[str, str | None]:
    import sqlite3

    conn = sqlite3.connect(root / "wardian.db")
    try:
        return conn.execute("SELECT state, claimed_by FROM tasks WHERE request_id = ?", (request_id,)).fetchone()
    finally:
        conn.close()


def test_a_lost_acknowledgement_is_uncertain_and_never_resubmitted(fake_world) -> None:
    """UNC-3, CLM-3: other provider errors or lost acknowledgements retain uncertainty; startup does not replay a task
    whose delivery is uncertain."""
    root, exe, log = fake_world
    app = run(root, exe, log, "lost_ack")
    try:
        sender, _ = sender_and_started_worker(app)
        rid = app.call("task/followup", {"session": sender, "target": "worker", "message": "x"})["request_id"]
        wait_for(lambda: task_facts(root, rid)[0] == "uncertain", app, sender)
        assert len(submissions(log)) == 1
        # The operator reads why (never resend blindly), and the sender may look its own request up.
        story = app.call("request/status", {"session": sender, "request_id": rid})
        assert "lost or unclear" in story["task"]["uncertain_reason"]
        shown = app.cli("message", "show", rid)
        assert b"UNCERTAIN" in shown.stdout
        assert b"never resend it blindly" in shown.stdout
    finally:
        stop_app(app.proc)
    for restart in range(1, 4):  # three restarts: the agent is started again each time, the task never resubmitted
        app = run(root, exe, log, "normal")
        try:
            _, probe = app.add_agent()
            wait_for(lambda h=app: any(a["name"] == "worker" and a["status"] == "idle"
                                       for a in h.call("agent/list")["agents"]), app, probe)
            app.call("task/followup", {"session": probe, "target": "worker", "message": "fresh"})
            wait_for(lambda r=restart: len(submissions(log)) >= 1 + r, app, probe)
        finally:
            stop_app(app.proc)
        assert task_facts(root, rid) == ("uncertain", "dispatch")
    starts = submissions(log)
    assert sum(1 for m in starts if rid in json.dumps(m)) == 1
    assert len(starts) == 4  # the uncertain one once, plus one fresh task per restart


def test_a_stale_turn_rejection_releases_the_claim_and_offers_the_task_again_once(fake_world) -> None:
    """UNC-3: a recognized stale-turn rejection confirms that no task was admitted; its claim is released
    before current activity is read for another dispatch opportunity."""
    root, exe, log = fake_world
    app = run(root, exe, log, "stale_steer")
    try:
        sender, _ = sender_and_started_worker(app)
        first = app.call("task/followup", {"session": sender, "target": "worker", "message": "one"})["request_id"]
        wait_for(lambda: any(a["name"] == "worker" and a["status"] == "active"
                             for a in app.call("agent/list")["agents"]), app, sender)
        second = app.call("task/followup", {"session": sender, "target": "worker", "message": "two"})["request_id"]
        replies: dict[str, str] = {}

        def both_replied() -> bool:
            page = app.call("mailbox/receive", {"session": sender})
            replies.update({r["request_id"]: r["status"] for r in page["records"] if r["kind"] == "reply"})
            return len(replies) == 2

        wait_for(both_replied, app, sender)
        assert replies == {first: "done", second: "done"}
        kinds = [(m["method"], "two" in json.dumps(m)) for m in submissions(log)]
        assert kinds == [("turn/start", False), ("turn/steer", True), ("turn/start", True)]
    finally:
        stop_app(app.proc)


def test_a_crash_between_evidence_and_reply_publishes_once_on_restart(fake_world) -> None:
    """CMP-4: terminal evidence is persisted before reply publication; startup recovers already captured
    outcomes after a failed reply write without rerunning provider work."""
    root, exe, log = fake_world
    proc = start_app(root, {"WARDIAN_CODEX": str(exe), "FAKE_CODEX_SCENARIO": "normal", "FAKE_CODEX_LOG": str(log),
                            "WARDIAN_CRASHPOINT": "after_terminal_evidence_before_reply_publish"})
    app = AppHandle(Home(root), proc, AppClient(Home(root)))
    sender, _ = sender_and_started_worker(app)
    rid = app.call("task/followup", {"session": sender, "target": "worker", "message": "x"})["request_id"]
    assert proc.wait(60) == 137  # died at the crash point, evidence captured, nothing published
    stop_app(proc)
    assert task_facts(root, rid) == ("submitted", "dispatch")
    for _ in range(2):
        app = run(root, exe, log, "normal")
        try:
            replies = [r for r in app.call("mailbox/records", {"limit": 1000})["records"]
                       if r["kind"] == "reply" and r["request_id"] == rid]
            assert [(r["status"], r["text"]) for r in replies] == [("done", "fake answer")]
        finally:
            stop_app(app.proc)
    assert task_facts(root, rid) == ("completed", "dispatch")
    assert len(submissions(log)) == 1  # the provider work was never rerun


def test_a_definite_failure_before_submission_answers_the_task_with_one_failed_notice(fake_world) -> None:
    """UNC-4: a definite background failure before task submission produces a correlated failed reply explicitly
    attributed to Wardian; the task and failure notice commit together."""
    root, exe, log = fake_world
    app = run(root, exe, log, "normal")
    try:
        app.add_agent("sender")
        app.add_agent("worker")
        app.call("agent/start", {"agent": "worker"}, timeout_s=60)
    finally:
        stop_app(app.proc)
    app = run(root, exe, log, "normal", version="0.100.0")  # an ineligible Codex: the owner cannot start
    try:
        sender = app.call("agent/session", {"agent": "sender"})["session_id"]
        rid = app.call("task/followup", {"session": sender, "target": "worker", "message": "x"})["request_id"]
        notices: list[dict[str, Any]] = []

        def answered() -> bool:
            notices.extend(r for r in app.call("mailbox/receive", {"session": sender})["records"]
                           if r["request_id"] == rid)
            return bool(notices)

        wait_for(answered, app, sender)
        assert [(n["kind"], n["status"], n["sender_kind"]) for n in notices[:1]] == [("notice", "failed", "wardian")]
        assert "unsupported" in notices[0]["text"]
        assert task_facts(root, rid) == ("completed", "dispatch")
        worker = next(a for a in app.call("agent/list")["agents"] if a["name"] == "worker")
        assert worker["status"] in ("errored", "off")
    finally:
        stop_app(app.proc)
    assert submissions(log) == []


def test_an_owner_dying_mid_turn_leaves_its_task_uncertain_and_a_later_task_starts_a_new_generation(
        fake_world) -> None:
    """UNC-2: unknown outcomes and lost observations remain uncertain and are never replayed; a later task after
    owner exit gets a new generation."""
    root, exe, log = fake_world
    app = run(root, exe, log, "die_mid_turn")
    try:
        sender, started = sender_and_started_worker(app)
        first_gen = started["generation"]
        rid = app.call("task/followup", {"session": sender, "target": "worker", "message": "x"})["request_id"]
        wait_for(lambda: task_facts(root, rid)[0] == "uncertain", app, sender)
        later = app.call("task/followup", {"session": sender, "target": "worker", "message": "y"})["request_id"]
        wait_for(lambda: task_facts(root, later)[0] == "uncertain", app, sender)
        worker = next(a for a in app.call("agent/list")["agents"] if a["name"] == "worker")
        assert worker["generation"] == first_gen + 1
    finally:
        stop_app(app.proc)
    assert [rid in json.dumps(m) for m in submissions(log)] == [True, False]

