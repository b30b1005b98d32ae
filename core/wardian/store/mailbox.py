"""Records and their recipients' reading positions: admission, receive and acknowledgement, interrupts, pushes, as
functions of a `Store`.

Receive and acknowledgement work on an index of only the unread, not-yet-pushed records of a recipient
(migration 3). A receive's cursors are the store's (`store.cursors`, `wardian.store.tokens`); a task in a receive's
page is claimed through the task ledger (`wardian.store.ledger`); the operator's read models of the same records are
`wardian.store.history`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wardian import errors
from wardian.faults import crashpoint
from wardian.model import (
    MAX_PAGE_TEXT_BYTES,
    Agent,
    AgentStatus,
    Caller,
    Interaction,
    InteractionKind,
    InterruptReceipt,
    Party,
    Receipt,
    ReceivedRecord,
    ReceivePage,
)
from wardian.store import ledger
from wardian.store._sql import KINDS, STATUSES, new_public_id, now_ms, of_this_host, party_by_id, party_of
from wardian.store.engine import Store
from wardian.taskpolicy import Lineage

INSERT_INTERACTION = ("INSERT INTO interactions (public_id, kind, sender_id, recipient_id, body, request_id, "
                      "created_at, push_state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
INSERT_INTERACTION_ID = INSERT_INTERACTION + " RETURNING id"
# Whether a receive has returned the record of the statement's `interactions` row: its receipt, kept beside the
# records (migration 12) so that the first read of a page writes one recipient's contiguous receipts, not a mark
# on each record's own table page (docs/decisions/0023-receipts-beside-the-records.md).
# A scalar subquery rather than EXISTS: PostgreSQL turns an EXISTS in WHERE into a join, which it may plan as a
# scan of every receipt (and a prepared statement keeps the plan made while the table was empty); this stays one
# primary-key probe per record on both backends.
_RECEIPT = ("(SELECT 1 FROM receipts r WHERE r.recipient_id = interactions.recipient_id "
            "AND r.interaction_id = interactions.id)")
RECEIVED = f"{_RECEIPT} IS NOT NULL"
NOT_RECEIVED = f"{_RECEIPT} IS NULL"
# A record admitted for a push is hidden from receive from its first commit: it reaches its recipient through
# exactly one path.
PUSH_SENDING = "sending"
# A record a receive would return (of `interactions`, its recipient's: `receive`, its receipts, `has_unacked`, and
# the shared store's wait reader through `sessions.WAIT_LOOK_SQL`).
UNACKED = "acked_at IS NULL AND provider_delivered_at IS NULL AND push_state IS NULL"
# A record of recipient `a` pushed into its live conversation that no wait has reported yet (`interactions i`, `agents
# a`: `take_unseen_context`, and `sessions.WAIT_LOOK_SQL`).
UNSEEN_CONTEXT = "i.provider_delivered_at IS NOT NULL AND i.kind != 'task' AND i.id > a.context_seen_id"


def admit(
    store: Store, caller: Caller, recipient: Agent, kind: InteractionKind, text: str, *, push: bool = False,
    lineage: Lineage | None = None, deadline_ms: int | None = None,
) -> Receipt:
    """Commit one information or task record from `caller` to `recipient` (admission). `push` (information
    only): admitted for a push into the recipient's live conversation, hidden from receive until the push
    settles (`push_done`, `push_released`, `push_uncertain`). A task's `lineage` places it in its chain (None: a
    root) and `deadline_ms` gives it a deadline that long after its admission (`store.deadlines`)."""
    assert kind in (InteractionKind.INFORMATION, InteractionKind.TASK)
    public_id = new_public_id(kind)
    created = now_ms()
    task = kind is InteractionKind.TASK
    request_id = public_id if task else None
    values = (
        public_id,
        kind.value,
        caller.agent.id,
        recipient.id,
        text,
        request_id,
        created,
        PUSH_SENDING if push and not task else None,
    )
    if task or not store.depth:
        with store.atomic():
            if task:
                interaction_id = store.db.write(INSERT_INTERACTION_ID, values).fetchone()[0]
                line = lineage or Lineage(None, None, 1)
                store.db.write(
                    "INSERT INTO tasks (interaction_id, request_id, requester_id, recipient_id, state, deadline_at, "
                    "parent_request_id, root_request_id, depth) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
                    (interaction_id, public_id, caller.agent.id, recipient.id,
                     None if deadline_ms is None else created + deadline_ms, line.parent_request_id,
                     line.root_request_id or public_id, line.depth),
                )
            else:
                store.db.write(INSERT_INTERACTION, values)
            crashpoint("after_insert_before_commit")
    else:
        # One statement inside an open transaction is atomic by itself: no savepoint (the send path's cost).
        store.db.write(INSERT_INTERACTION, values)
        crashpoint("after_insert_before_commit")
    return Receipt(
        interaction_id=public_id,
        kind=kind,
        request_id=request_id,
        sender=party_of(caller.agent),
        recipient=party_of(recipient),
        created_at=created,
        pushing=values[7] is not None,
        deadline_at=None if deadline_ms is None or not task else created + deadline_ms,
    )


def has_unacked(store: Store, agent_id: int) -> bool:
    row = store.db.execute(
        f"SELECT 1 FROM interactions WHERE recipient_id = ? AND {UNACKED} LIMIT 1",
        (agent_id,),
    ).fetchone()
    return row is not None


def push_candidates(store: Store, agent_id: int) -> list[str]:
    """The records a provider that pushes only into a turn takes with the agent's next turn: on the receive path and
    never returned by a receive, oldest first (each is still taken with `claim_push`)."""
    return [r[0] for r in store.db.execute(
        f"SELECT public_id FROM interactions WHERE recipient_id = ? AND {UNACKED} AND {NOT_RECEIVED} "
        "AND kind != 'task' ORDER BY id", (agent_id,))]


def receive(store: Store, caller: Caller, *, cursor: str | None, ack_cursor: str | None, limit: int) -> ReceivePage:
    """Acknowledge `ack_cursor`'s batch, then return the next page; tasks in it nobody claimed are claimed
    (by receive) and marked new work. Raises: InvalidCursor, StaleCursor."""
    me = caller.agent.id
    after = store.cursors.decode(cursor, me, "cursor")[1] if cursor is not None else 0
    ack_range = store.cursors.decode(ack_cursor, me, "ack_cursor") if ack_cursor is not None else None
    with store.atomic():
        db = store.db
        acked = 0
        now = now_ms()
        if ack_range is not None:
            # Only what a receive returned can be acknowledged: a record a push gave back to the receive path
            # after that page was read lies in its range unseen, and stays unacknowledged.
            acked = db.write(
                "UPDATE interactions SET acked_at = ? WHERE recipient_id = ? AND id > ? AND id <= ? "
                f"AND acked_at IS NULL AND provider_delivered_at IS NULL AND {RECEIVED}",
                (now, me, ack_range[0], ack_range[1])).rowcount
        rows = db.execute(
            f"SELECT id, public_id, kind, sender_id, body, request_id, status, created_at, {RECEIVED} "
            f"FROM interactions WHERE recipient_id = ? AND {UNACKED} AND id > ? ORDER BY id LIMIT ?",
            (me, after, limit + 1)).fetchall()
        page, more = _page_of(rows, limit)
        if page and not all(row[8] for row in page):
            # Returned now: from here on this record travels the receive path only (never pushed as well).
            # A receipt already there (a concurrent receive of the same page) is left as it is.
            db.write("INSERT INTO receipts (recipient_id, interaction_id, received_at) "
                     "SELECT recipient_id, id, ? FROM interactions WHERE recipient_id = ? AND id > ? AND id <= ? "
                     f"AND {UNACKED} ON CONFLICT DO NOTHING", (now, me, after, page[-1][0]))
        parties: dict[int, Party] = {me: party_of(caller.agent)}
        records = [_received(store, caller, row, now, parties) for row in page]
    next_cursor = store.cursors.encode(me, after, page[-1][0]) if page else None
    return ReceivePage(records=tuple(records), cursor=next_cursor, acked=acked, more=more)


def _received(store: Store, caller: Caller, row: Sequence[Any], now: int, parties: dict[int, Party]) -> ReceivedRecord:
    """One record of a receive's page; a task nobody claimed is claimed by this receive (new work)."""
    facts = None
    new_work = False
    if row[2] == InteractionKind.TASK:
        new_work = ledger.claim_for_receive(store, row[0], caller.generation, now)
        facts = ledger.task_facts_of(store, row[0])
    sender = party_by_id(store.db, row[3], parties)
    me = parties[caller.agent.id]
    return ReceivedRecord(
        Interaction(row[1], KINDS[row[2]], sender, me, row[4], row[7], row[5], STATUSES[row[6]], False),
        new_work, facts)


def record_interrupt(store: Store, caller: Caller, target: Agent) -> InterruptReceipt:
    """Raises: NotActive (nothing recorded)."""
    with store.atomic():
        row = store.db.execute("SELECT status, active_turn_id FROM agents WHERE id = ?", (target.id,)).fetchone()
        status = AgentStatus(row[0])
        if status is not AgentStatus.ACTIVE or row[1] is None:
            raise errors.NotActive(
                f"agent {target.name!r} has no active turn (status {status.value}); nothing was interrupted",
                field="target",
                status=status.value,
            )
        created = now_ms()
        interrupt_id = int(
            store.db.write(
                "INSERT INTO interrupts (caller_id, target_id, turn_id, state, created_at) "
                "VALUES (?, ?, ?, 'requested', ?) RETURNING id",
                (caller.agent.id, target.id, row[1], created),
            ).fetchone()[0]
        )
        return InterruptReceipt(
            interrupt_id=interrupt_id, target=party_of(target), turn_id=row[1], created_at=created
        )


# --- pushes (a record admitted with push=True, hidden from receive until settled here) ----------------
def claim_push(store: Store, public_id: str) -> bool:
    """Take a record still on the receive path, and never returned by a receive, for a push now (a provider that
    could not push while a turn ran pushes at idle); True when this push owns it."""
    with store.atomic():
        return (
            store.db.write(
                "UPDATE interactions SET push_state = 'sending' WHERE public_id = ? AND push_state IS NULL "
                f"AND {NOT_RECEIVED} AND acked_at IS NULL AND provider_delivered_at IS NULL AND kind != 'task'",
                (public_id,),
            ).rowcount
            == 1
        )


def push_done(store: Store, public_id: str) -> None:
    """The push of this record was acknowledged: it is in its recipient's live conversation."""
    with store.atomic():
        store.db.write(
            "UPDATE interactions SET push_state = 'done', provider_delivered_at = ? "
            "WHERE public_id = ? AND push_state = 'sending'",
            (now_ms(), public_id),
        )


def push_released(store: Store, public_id: str) -> None:
    """The push certainly did not happen (nothing was sent): the record goes to the receive path."""
    with store.atomic():
        store.db.write(
            "UPDATE interactions SET push_state = NULL WHERE public_id = ? AND push_state = 'sending'", (public_id,)
        )


def push_uncertain(store: Store, public_id: str, reason: str) -> None:
    """The push may have happened: the record stays off the receive path (never shown twice), with why."""
    with store.atomic():
        store.db.write(
            "UPDATE interactions SET push_state = 'uncertain', push_note = ?, "
            "provider_delivered_at = ? WHERE public_id = ? AND push_state = 'sending'",
            (reason, now_ms(), public_id),
        )


def pushes_interrupted(store: Store, reason: str) -> list[str]:
    """At startup: pushes still `sending` may have left; they become uncertain. Their ids."""
    mine, args = of_this_host(store, "recipient_id")
    with store.atomic():
        ids = [
            r[0]
            for r in store.db.execute(
                f"SELECT public_id FROM interactions WHERE push_state = 'sending'{mine} ORDER BY id", args
            )
        ]
        store.db.write(
            "UPDATE interactions SET push_state = 'uncertain', push_note = ?, "
            f"provider_delivered_at = ? WHERE push_state = 'sending'{mine}",
            (reason, now_ms(), *args),
        )
    return ids


def take_unseen_context(store: Store, agent_id: int) -> bool:
    """True (once) when context was pushed into the agent's conversation since its waits last reported it."""
    with store.atomic():
        row = store.db.execute(
            "SELECT max(i.id) FROM interactions i JOIN agents a ON a.id = i.recipient_id WHERE i.recipient_id = ? "
            f"AND {UNSEEN_CONTEXT}",
            (agent_id,)).fetchone()
        if row[0] is None:
            return False
        store.db.write("UPDATE agents SET context_seen_id = ? WHERE id = ?", (row[0], agent_id))
        return True


def _page_of(rows: list[Any], limit: int) -> tuple[list[Any], bool]:
    """The first `limit` rows whose texts fit one page (always at least one row), and whether more are left."""
    more = len(rows) > limit
    page: list[Any] = []
    text_bytes = 0
    for row in rows[:limit]:
        size = len(row[4].encode("utf-8", "surrogatepass"))
        if page and text_bytes + size > MAX_PAGE_TEXT_BYTES:
            return page, True
        text_bytes += size
        page.append(row)
    return page, more
