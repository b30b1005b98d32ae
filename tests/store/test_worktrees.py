"""An agent's worktree as the store keeps it (`store.worktrees`): written with the agent, read back the same on both
backends, kept when the agent is removed, and an empty table for a store of an older schema."""

from __future__ import annotations

import sqlite3

import psycopg

from tests.store.conftest import Backend
from tests.store.test_receipts import undo_worktrees
from wardian.store import Store, roster, worktrees


def test_a_worktree_reads_back_as_written_and_outlives_its_agent(store: Store) -> None:
    with store.atomic():
        lead = roster.add_agent(store, "lead", "codex", "/home/w/worktrees/lead")
        worktrees.record(store, lead.id, "/src/repo", "wardian/lead", "main", True)
    other = roster.add_agent(store, "other", "codex", None)
    got = worktrees.of_agent(store, lead.id)
    assert got is not None
    assert (got.repo, got.branch, got.base, got.made_branch) == ("/src/repo", "wardian/lead", "main", True)
    assert worktrees.of_agent(store, other.id) is None
    roster.remove_agent(store, lead.id)
    assert list(worktrees.by_agent(store)) == [lead.id]


def test_a_store_of_an_older_schema_gets_the_table_empty(backend: Backend) -> None:
    """Migration 16 of the embedded store, 10 of the shared one."""
    store = backend.open()
    roster.add_agent(store, "a", "codex", None)
    backend.close_all()
    if backend.cluster is None:
        with sqlite3.connect(backend.tmp_path / "wardian.db") as db:
            undo_worktrees(db)
            db.execute("PRAGMA user_version = 15")
    else:
        with psycopg.connect(backend.url, autocommit=True) as db:
            undo_worktrees(db)
            db.execute("DELETE FROM wardian_schema WHERE version >= 10")
    assert worktrees.by_agent(backend.open()) == {}
