"""docs/reliability.md row P1: a stateful model test of the mailbox against a reference model.

Any interleaving of sends, receives (with and without ack and continuation), competing dispatch claims and
replies keeps: page contents equal to the model's (order and identity), every task exposed as new work at
most once, replies only from the assigned recipient and only once, cursors bound to their recipient.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import ClassVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from tests.conftest import ALL_HEALTH_CHECKS
from wardian import errors
from wardian.model import Caller, ClaimKind, InteractionKind, ReplyStatus
from wardian.store import Store, ledger, mailbox, open_sqlite, roster
from wardian.store import testing as store_testing
from wardian_harness.hosts.postgres import PrivateCluster

AGENTS = 3
texts = st.text(alphabet="ab\n✓ ", min_size=1, max_size=6).filter(lambda t: t.strip() != "")


class StoreOps:
    """The store operations the machine drives, as the store runs them. A mutant (tests/reliability/
    test_model_mutations.py) replaces one with a broken one, or changes the store it runs on (`prepare`)."""

    receive = staticmethod(mailbox.receive)
    claim_task = staticmethod(ledger.claim_task)
    reply = staticmethod(ledger.reply)

    @staticmethod
    def prepare(store: Store) -> None:
        """Change the freshly opened store (the real one: nothing)."""


class MailboxMachine(RuleBasedStateMachine):
    ops: ClassVar[type[StoreOps]] = StoreOps

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="wm"))
        self.store = self.open_store()
        self.ops.prepare(self.store)
        self.seq: dict[str, int] = {}  # record id -> admission order
        self.callers: list[Caller] = []
        for i in range(AGENTS):
            agent = roster.add_agent(self.store, f"a{i}", "codex", None)
            self.callers.append(roster.authenticate(self.store, roster.create_session(self.store, agent.id)))
        self.pending: list[list[str]] = [[] for _ in range(AGENTS)]  # unacked ids, in order
        self.last_page: list[tuple[str | None, list[str]]] = [(None, []) for _ in range(AGENTS)]
        self.tasks: dict[str, tuple[int, int]] = {}  # request id -> (requester, recipient)
        self.unclaimed: set[str] = set()
        self.exposed: dict[str, int] = {}
        self.replied: set[str] = set()

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def open_store(self) -> Store:
        store = open_sqlite(self.dir / "w.db")
        # P1 checks logic, not durability: skip the fsyncs so 150 examples stay fast.
        store_testing.execute(store, "PRAGMA synchronous = OFF")
        return store

    @rule(s=st.integers(0, AGENTS - 1), r=st.integers(0, AGENTS - 1), task=st.booleans(), text=texts)
    def send(self, s: int, r: int, task: bool, text: str) -> None:
        if s == r:
            try:
                roster.resolve_target(self.store, self.callers[s], self.callers[r].agent.uuid)
            except errors.InvalidTarget:
                return
            raise AssertionError("sending to yourself was accepted")
        kind = InteractionKind.TASK if task else InteractionKind.INFORMATION
        receipt = mailbox.admit(self.store, self.callers[s], self.callers[r].agent, kind, text)
        self.seq[receipt.interaction_id] = len(self.seq)
        self.pending[r].append(receipt.interaction_id)
        if task:
            assert receipt.request_id is not None
            self.tasks[receipt.request_id] = (s, r)
            self.unclaimed.add(receipt.request_id)

    @rule(a=st.integers(0, AGENTS - 1), limit=st.integers(1, 4), ack=st.booleans(), cont=st.booleans())
    def receive(self, a: int, limit: int, ack: bool, cont: bool) -> None:
        cursor, batch = self.last_page[a]
        ack_cursor = cursor if ack and cursor else None
        if ack_cursor:
            self.pending[a] = [i for i in self.pending[a] if i not in batch]
        after = cursor if cont and cursor else None
        page = self.ops.receive(self.store, self.callers[a], cursor=after, ack_cursor=ack_cursor, limit=limit)
        candidates = self.pending[a]
        if after:
            last = max(self.seq[i] for i in batch) if batch else -1
            candidates = [i for i in candidates if self.seq[i] > last]
        expected = candidates[:limit]
        got = [r.interaction.id for r in page.records]
        assert got == expected
        for rec in page.records:
            if rec.new_work:
                self.exposed[rec.interaction.id] = self.exposed.get(rec.interaction.id, 0) + 1
                self.unclaimed.discard(rec.interaction.id)
            elif rec.interaction.kind is InteractionKind.TASK:
                assert rec.interaction.id not in self.unclaimed
        self.last_page[a] = (page.cursor, got) if got else (cursor, batch)

    @rule(a=st.integers(0, AGENTS - 1))
    def peek(self, a: int) -> None:
        """A second reader of the same mailbox (another MCP server of the agent) reads further ahead and keeps its
        cursor to itself: what it saw is returned, and still unacknowledged."""
        page = self.ops.receive(self.store, self.callers[a], cursor=None, ack_cursor=None, limit=4)
        assert [r.interaction.id for r in page.records] == self.pending[a][:4]
        for rec in page.records:
            if rec.new_work:
                self.exposed[rec.interaction.id] = self.exposed.get(rec.interaction.id, 0) + 1
                self.unclaimed.discard(rec.interaction.id)

    @precondition(lambda self: bool(self.tasks))
    @rule(data=st.data())
    def dispatch(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(list(self.tasks)))  # creation order: stable when replayed
        won = self.ops.claim_task(self.store, rid, ClaimKind.DISPATCH, 0)
        assert won == (rid in self.unclaimed)
        if won:
            self.exposed[rid] = self.exposed.get(rid, 0) + 1
            self.unclaimed.discard(rid)

    @precondition(lambda self: bool(self.tasks))
    @rule(data=st.data(), caller=st.integers(0, AGENTS - 1), status=st.sampled_from(list(ReplyStatus)))
    def reply(self, data: st.DataObject, caller: int, status: ReplyStatus) -> None:
        rid = data.draw(st.sampled_from(list(self.tasks)))  # creation order: stable when replayed
        requester, recipient = self.tasks[rid]
        try:
            receipt = self.ops.reply(self.store, self.callers[caller], rid, status, "r")
        except errors.NotRecipient:
            assert caller != recipient
            return
        except errors.AlreadyCompleted:
            assert caller == recipient
            assert rid in self.replied
            return
        assert caller == recipient
        assert rid not in self.replied
        self.replied.add(rid)
        self.unclaimed.discard(rid)
        self.seq[receipt.reply_id] = len(self.seq)
        self.pending[requester].append(receipt.reply_id)

    @precondition(lambda self: any(c for c, _ in self.last_page))
    @rule(a=st.integers(0, AGENTS - 1), b=st.integers(0, AGENTS - 1))
    def foreign_cursor(self, a: int, b: int) -> None:
        cursor = self.last_page[b][0]
        if cursor is None or a == b:
            return
        try:
            self.ops.receive(self.store, self.callers[a], cursor=None, ack_cursor=cursor, limit=1)
        except errors.InvalidCursor:
            return
        raise AssertionError("another recipient's cursor was accepted")

    @invariant()
    def exposed_at_most_once(self) -> None:
        assert all(n == 1 for n in self.exposed.values())


class PgMailboxMachine(MailboxMachine):
    """The same model on the shared store: a fresh database of the test process's private server."""

    cluster: PrivateCluster | None = None

    def open_store(self) -> Store:
        from wardian.store.postgres import open_postgres

        assert self.cluster is not None
        store = open_postgres(self.cluster.database())
        store_testing.execute(store, "SET synchronous_commit TO off")  # logic, not durability (see above)
        return store


# Health checks (e.g. "too slow" on a loaded 2-core CI machine) say nothing about correctness.
MailboxMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                            suppress_health_check=ALL_HEALTH_CHECKS)
test_mailbox_machine = MailboxMachine.TestCase
PgMailboxMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=40, deadline=None, suppress_health_check=ALL_HEALTH_CHECKS
)


def test_mailbox_machine_on_the_shared_store(pg_cluster: PrivateCluster) -> None:
    """P1 on PostgreSQL (fewer examples: each opens a database of its own)."""
    PgMailboxMachine.cluster = pg_cluster
    run_state_machine_as_test(PgMailboxMachine, settings=PgMailboxMachine.TestCase.settings)
