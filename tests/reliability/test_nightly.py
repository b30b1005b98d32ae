"""[NIGHTLY]-only rows (docs/reliability.md rows D6, P2), run by `scripts/reliability.py` (marked slow).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from tests.conftest import ALL_HEALTH_CHECKS, short_home, wardian_cmd
from tests.reliability.world import (
    AppHandle,
    app_stderr,
    db_rows,
    integrity_ok,
    kill9,
    report,
    seeded_random,
    start_with,
    stop,
)
from wardian import errors


def _start_or_refusal(root: Path) -> AppHandle | subprocess.CompletedProcess[str]:
    try:
        return start_with(root)
    except RuntimeError:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WARDIAN_")}
        return subprocess.run([*wardian_cmd(), "app", "run", "--home", str(root)], capture_output=True, text=True,
                              timeout=60, env=env)


def _fresh_pair(root: Path) -> tuple[AppHandle, str]:
    """Agents and a session, checkpointed into the main database by a clean stop: the corruption of a later
    WAL tail may drop the rounds' records, never the roster the harness needs to go on."""
    app = start_with(root)
    try:
        app.call("agent/add", {"name": "lead", "provider": "codex"})
        app.call("agent/add", {"name": "worker", "provider": "codex"})
        lead = app.call("agent/session", {"agent": "lead"})["session_id"]
    finally:
        stop(app)
    return start_with(root), lead


@pytest.mark.slow
def test_d6_a_corrupt_wal_tail_never_alters_a_surviving_row(root: Path) -> None:
    """D6 [NIGHTLY N=50]: with the app killed, the WAL is truncated to a random length or one
    random bit of its last 4 KiB is flipped; the app then starts (or refuses with a clear store error, never a
    traceback); the surviving rows pass integrity_check and each equals what the harness sent under its id."""
    rng, seed = seeded_random("D6")
    rounds = 50
    sent: dict[str, str] = {}
    started = refused = altered = integrity_failures = tracebacks = 0
    app, lead = _fresh_pair(root)
    try:
        for rnd in range(rounds):
            for i in range(rng.randrange(5, 40)):
                body = f"r{rnd}-{i}-{rng.getrandbits(64):016x}"
                receipt = app.call("message/send", {"session": lead, "target": "worker", "message": body})
                sent[receipt["interaction_id"]] = body
            kill9(app)
            wal = Path(f"{root / 'wardian.db'}-wal")
            data = bytearray(wal.read_bytes()) if wal.exists() else bytearray()
            if data and rng.random() < 0.5:
                data = data[:rng.randrange(0, len(data))]
            elif data:
                at = rng.randrange(max(0, len(data) - 4096), len(data))
                data[at] ^= 1 << rng.randrange(8)
            if wal.exists():
                wal.write_bytes(bytes(data))
            outcome = _start_or_refusal(root)
            if isinstance(outcome, subprocess.CompletedProcess):
                refused += 1
                tracebacks += "Traceback" in outcome.stderr
                assert outcome.returncode != 0
                shutil.rmtree(root)  # a refused store starts over in a fresh home
                root.mkdir()
                sent.clear()
                app, lead = _fresh_pair(root)
                continue
            started += 1
            app = outcome
            integrity_failures += not integrity_ok(root)
            rows = dict(db_rows(root, "SELECT public_id, body FROM interactions"))
            altered += sum(1 for rid, body in rows.items() if sent.get(rid, body) != body)
            sent = {rid: body for rid, body in sent.items() if rid in rows}  # lost frames are gone for good
    finally:
        stop(app)
    tracebacks += b"Traceback" in app_stderr(app)
    report("D6 corrupt_wal_tail", rounds=rounds, integrity_failures=integrity_failures, altered=altered,
           started=started, refused=refused, tracebacks=tracebacks, seed=seed)
    assert (integrity_failures, altered, tracebacks) == (0, 0, 0)


class AppMailboxMachine(RuleBasedStateMachine):
    """P1's model against the real app over its socket, with kill -9 + restart as a rule (row
    P2): every acknowledged record survives, every task is exposed as new work at most once."""

    AGENTS = 3

    def __init__(self) -> None:
        super().__init__()
        self.root = short_home("wp2")
        self.app = start_with(self.root)
        self.tokens = []
        self.uuids = []
        try:
            for i in range(self.AGENTS):
                agent = self.app.call("agent/add", {"name": f"a{i}", "provider": "codex"})
                self.uuids.append(agent["uuid"])
                self.tokens.append(self.app.call("agent/session", {"agent": agent["uuid"]})["session_id"])
        except BaseException:
            self.teardown()
            raise
        self.pending: list[list[str]] = [[] for _ in range(self.AGENTS)]
        self.last_page: list[tuple[str | None, list[str]]] = [(None, []) for _ in range(self.AGENTS)]
        self.acknowledged: dict[str, str] = {}
        self.tasks: dict[str, tuple[int, int]] = {}
        self.exposed: dict[str, int] = {}
        self.replied: set[str] = set()
        self.restarts = 0

    def teardown(self) -> None:
        stop(self.app)
        shutil.rmtree(self.root, ignore_errors=True)

    def call(self, method: str, params: dict[str, Any]) -> Any:
        return self.app.call(method, params)

    @rule(s=st.integers(0, AGENTS - 1), r=st.integers(0, AGENTS - 1), task=st.booleans(),
          text=st.text(alphabet="ab\n✓ ", min_size=1, max_size=6).filter(lambda t: t.strip() != ""))
    def send(self, s: int, r: int, task: bool, text: str) -> None:
        if s == r:
            return
        receipt = self.call("task/followup" if task else "message/send",
                            {"session": self.tokens[s], "target": self.uuids[r], "message": text})
        self.acknowledged[receipt["interaction_id"]] = text
        self.pending[r].append(receipt["interaction_id"])
        if task:
            self.tasks[receipt["request_id"]] = (s, r)

    @rule(a=st.integers(0, AGENTS - 1), limit=st.integers(1, 4), ack=st.booleans())
    def receive(self, a: int, limit: int, ack: bool) -> None:
        cursor, batch = self.last_page[a]
        ack_cursor = cursor if ack and cursor else None
        if ack_cursor:
            self.pending[a] = [i for i in self.pending[a] if i not in batch]
        page = self.call("mailbox/receive", {"session": self.tokens[a], "limit": limit, "ack_cursor": ack_cursor})
        got = [r["id"] for r in page["records"]]
        assert got == self.pending[a][:limit]
        for rec in page["records"]:
            if rec["new_work"]:
                self.exposed[rec["id"]] = self.exposed.get(rec["id"], 0) + 1
        self.last_page[a] = (page["cursor"], got) if got else (None, [])

    @precondition(lambda self: bool(self.tasks))
    @rule(data=st.data(), caller=st.integers(0, AGENTS - 1))
    def reply(self, data: st.DataObject, caller: int) -> None:
        rid = data.draw(st.sampled_from(sorted(self.tasks)))
        requester, recipient = self.tasks[rid]
        try:
            receipt = self.call("task/reply", {"session": self.tokens[caller], "request_id": rid, "status": "done",
                                               "message": "r"})
        except errors.NotRecipient:
            assert caller != recipient
            return
        except errors.AlreadyCompleted:
            assert rid in self.replied
            return
        assert caller == recipient
        assert rid not in self.replied
        self.replied.add(rid)
        self.acknowledged[receipt["reply_id"]] = "r"
        self.pending[requester].append(receipt["reply_id"])

    @rule()
    def restart(self) -> None:
        kill9(self.app)
        self.app = start_with(self.root)
        self.restarts += 1
        rows = dict(db_rows(self.root, "SELECT public_id, body FROM interactions"))
        assert all(rows.get(rid) == body for rid, body in self.acknowledged.items())

    @invariant()
    def exposed_at_most_once(self) -> None:
        assert all(n == 1 for n in self.exposed.values())


@pytest.mark.slow
def test_p2_the_mailbox_model_holds_across_kill_9_of_the_real_app() -> None:
    """P2 [NIGHTLY 200 examples]: P1's rules against the real app, with kill -9 and restart
    between rules; no counterexample, no acknowledged receipt lost across restarts."""
    restarts = []

    class Counted(AppMailboxMachine):
        def teardown(self) -> None:
            restarts.append(self.restarts)
            super().teardown()

    run_state_machine_as_test(Counted, settings=settings(max_examples=200, stateful_step_count=25, deadline=None,
                                                         database=None, suppress_health_check=ALL_HEALTH_CHECKS))
    report("P2 mailbox model with kill -9", rounds=len(restarts), restarts=sum(restarts))
