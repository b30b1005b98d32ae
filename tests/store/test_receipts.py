"""A record's receipt, the first time a receive returned it, is kept beside the records (a table keyed by recipient
then record; docs/decisions/0023-receipts-beside-the-records.md). What it means is the same on both backends: only a
received record can be acknowledged, a received record is never pushed, a page read again writes nothing, and a
store migrated from the per-record mark keeps every record's receipt."""

from __future__ import annotations

import sqlite3
from typing import Any

from tests.store.conftest import Backend
from tests.store.test_store import caller_for
from wardian.model import InteractionKind
from wardian.store import Store, history, mailbox, roster
from wardian.store import testing as store_testing
from wardian.store.postgres.schema import PG_MIGRATIONS
from wardian.store.sqlite.migrations import MIGRATIONS


def undo_receipts(db: Any, *, postgresql: bool) -> None:
    """The store as a wardian from before receipts left it: each record's receipt back in its own column (and,
    first, without the later agents' `env` column)."""
    undo_env(db)
    db.execute(f"ALTER TABLE interactions ADD COLUMN received_at {'BIGINT' if postgresql else 'INTEGER'}")
    db.execute("UPDATE interactions SET received_at = (SELECT r.received_at FROM receipts r "
               "WHERE r.recipient_id = interactions.recipient_id AND r.interaction_id = interactions.id)")
    db.execute("DROP TABLE receipts")


def undo_open_tasks_index(db: Any) -> None:
    """The store as a wardian from before the deadlock guard's index of open tasks by requester left it."""
    db.execute("DROP INDEX tasks_open_by_requester")


def undo_allow_rules(db: Any) -> None:
    """The store as a wardian from before agents' allow rules left it (and, first, without the later index)."""
    undo_open_tasks_index(db)
    db.execute("ALTER TABLE agents DROP COLUMN allow_rules")


def undo_approvals(db: Any) -> None:
    """The store as a wardian from before approvals left it: the permission requests' table back, empty, and no
    approval policy column on the agents (and, first, without the later allow rules)."""
    undo_allow_rules(db)
    embedded = isinstance(db, sqlite3.Connection)
    db.execute("DROP TABLE approvals")
    db.execute("ALTER TABLE agents DROP COLUMN approvals")
    db.execute("ALTER TABLE agents DROP COLUMN approval_timeout_ms")
    if embedded:
        db.executescript(MIGRATIONS[14])
    else:
        db.execute(PG_MIGRATIONS[8])


def undo_chains(db: Any) -> None:
    """The store as a wardian from before task deadlines and chains left it (and, first, without the later
    approvals)."""
    undo_approvals(db)
    db.execute("DROP TABLE task_policy")
    db.execute("DROP INDEX tasks_open_deadlines")
    db.execute("DROP INDEX tasks_by_root")
    for column in ("deadline_at", "end_reason", "parent_request_id", "root_request_id", "depth"):
        db.execute(f"ALTER TABLE tasks DROP COLUMN {column}")


def undo_worktrees(db: Any) -> None:
    """The store as a wardian from before it kept agents' worktrees left it (and, first, without the later token
    usage)."""
    undo_usage(db)
    db.execute("DROP TABLE worktrees")


def undo_usage(db: Any) -> None:
    """The store as a wardian from before it kept turns' token usage left it (and, first, without the later task
    deadlines and chains)."""
    undo_chains(db)
    db.execute("DROP TABLE task_usage")
    db.execute("DROP TABLE turn_usage")


def undo_permissions(db: Any) -> None:
    """The store as a wardian from before it kept permission requests left it (and, first, without the later
    worktrees)."""
    undo_worktrees(db)
    db.execute("DROP TABLE permission_requests")


def undo_command(db: Any) -> None:
    """The store as a wardian from before generic ACP agents' command lines left it (and, first, without the
    later permission requests)."""
    undo_permissions(db)
    db.execute("ALTER TABLE agents DROP COLUMN command")


def undo_env(db: Any) -> None:
    """The store as a wardian from before agents' `--env` settings left it (and, first, without the later
    `command` column)."""
    undo_command(db)
    db.execute("ALTER TABLE agents DROP COLUMN env")


def receipts(store: Store) -> int:
    return int(store_testing.execute(store, "SELECT count(*) FROM receipts")[0][0])


def test_a_page_s_first_read_writes_its_receipts_and_a_reread_writes_none(store: Store) -> None:
    a, b = caller_for(store, "a"), caller_for(store, "b")
    sent = [mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, f"m{i}").interaction_id for i in range(5)]
    assert history.record_story(store, sent[0]).delivery.received_at is None
    first = mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=3)
    assert [r.interaction.text for r in first.records] == ["m0", "m1", "m2"]
    assert receipts(store) == 3
    again = mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=3)  # the same page again
    assert [r.interaction.text for r in again.records] == ["m0", "m1", "m2"]
    assert receipts(store) == 3
    story = history.record_story(store, sent[1]).delivery
    assert story.received_at is not None
    assert story.acked_at is None
    assert history.record_story(store, sent[3]).delivery.received_at is None
    rest = mailbox.receive(store, b, cursor=first.cursor, ack_cursor=first.cursor, limit=10)
    assert ([r.interaction.text for r in rest.records], rest.acked) == (["m3", "m4"], 3)
    assert receipts(store) == 5


def test_only_a_received_record_is_acknowledged_and_a_received_record_is_never_pushed(store: Store) -> None:
    a, b = caller_for(store, "a"), caller_for(store, "b")
    m0 = mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "m0").interaction_id
    m1 = mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "m1").interaction_id
    m2 = mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, "m2").interaction_id
    assert mailbox.claim_push(store, m1)  # m1 is out for a push while the page is read
    page = mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=10)
    assert [r.interaction.id for r in page.records] == [m0, m2]
    mailbox.push_released(store, m1)  # the push gave it back to the receive path, inside the page's range, unseen
    acked = mailbox.receive(store, b, cursor=None, ack_cursor=page.cursor, limit=10)
    assert acked.acked == 2
    assert [r.interaction.id for r in acked.records] == [m1]  # not acknowledged: no receive had returned it
    assert history.record_story(store, m1).delivery.acked_at is None
    assert history.record_story(store, m0).delivery.acked_at is not None
    assert not mailbox.claim_push(store, m1)  # returned by that receive now: it travels the receive path only
    assert history.record_story(store, m1).delivery.push_state is None


def test_a_store_migrated_from_the_per_record_mark_keeps_every_receipt(backend: Backend) -> None:
    store = backend.open()
    a, b = caller_for(store, "a"), caller_for(store, "b")
    ids = [mailbox.admit(store, a, b.agent, InteractionKind.INFORMATION, f"m{i}").interaction_id for i in range(4)]
    page = mailbox.receive(store, b, cursor=None, ack_cursor=None, limit=2)  # m0 and m1 received, m2 and m3 not
    backend.close_all()
    if backend.cluster is None:
        import sqlite3

        with sqlite3.connect(backend.tmp_path / "wardian.db") as db:
            undo_receipts(db, postgresql=False)
            db.execute("PRAGMA user_version = 11")
    else:
        import psycopg

        with psycopg.connect(backend.url, autocommit=True) as db:
            undo_receipts(db, postgresql=True)
            db.execute("DELETE FROM wardian_schema WHERE version >= 6")
    again = backend.open()
    assert [history.record_story(again, i).delivery.received_at is not None for i in ids] == [True, True, False, False]
    assert not mailbox.claim_push(again, ids[0])  # received before the upgrade: never pushed
    assert mailbox.claim_push(again, ids[2])  # never received: still free for a push
    b2 = roster.authenticate(again, roster.create_session(again, b.agent.id))
    acked = mailbox.receive(again, b2, cursor=None, ack_cursor=page.cursor, limit=10)  # a page read before the upgrade
    assert acked.acked == 2
    assert [r.interaction.text for r in acked.records] == ["m3"]
