"""The permission requests the app answered for nobody (`store.permissions`): kept with the agent and the task whose
turn asked, read back newest-last by `mailbox/records` and tallied per agent for the overview, on both backends."""

from __future__ import annotations

import sqlite3

import psycopg

from tests.store.conftest import Backend
from tests.store.test_receipts import undo_permissions
from wardian.model import Party, PermissionOption
from wardian.store import Store, permissions, roster

OPTIONS = (PermissionOption("proceed_once", "Allow", "allow_once"), PermissionOption("cancel", "Reject", "reject_once"))


def test_each_request_is_kept_with_its_agent_task_tool_title_and_options(store: Store) -> None:
    a = roster.add_agent(store, "a", "qwen", None)
    b = roster.add_agent(store, "b", "qwen", None)
    permissions.record(store, a.id, "ask_1", "turn_1", "run_shell_command", "mkdir x\nand more", OPTIONS, "rejected")
    permissions.record(store, b.id, None, "turn_2", "mcp__wardian__reply", "{}", (), "rejected")
    last = permissions.record(store, a.id, "ask_3", "turn_3", "write_file", "y" * 5000, OPTIONS, "rejected")
    got = permissions.recent(store, 2)
    assert [(r.agent, r.request_id, r.tool) for r in got] == [
        (Party("b", b.uuid), None, "mcp__wardian__reply"), (Party("a", a.uuid), "ask_3", "write_file")]
    assert got[1].options == OPTIONS
    assert len(got[1].title) == permissions.MAX_TEXT
    (first, _, _) = permissions.recent(store, 10)
    assert (first.title, first.turn_id, first.answer) == ("mkdir x\nand more", "turn_1", "rejected")
    tallies = permissions.tallies(store)
    assert {k: (t.count, t.last.id) for k, t in tallies.items()} == {a.id: (2, last), b.id: (1, got[0].id)}


def test_no_request_no_tally(store: Store) -> None:
    roster.add_agent(store, "a", "qwen", None)
    assert (permissions.recent(store, 10), permissions.tallies(store)) == ([], {})


def test_a_store_of_an_older_schema_gets_the_table_empty(backend: Backend) -> None:
    """Migration 15 of the embedded store, 9 of the shared one."""
    store = backend.open()
    roster.add_agent(store, "a", "qwen", None)
    backend.close_all()
    if backend.cluster is None:
        with sqlite3.connect(backend.tmp_path / "wardian.db") as db:
            undo_permissions(db)
            db.execute("PRAGMA user_version = 14")
    else:
        with psycopg.connect(backend.url, autocommit=True) as db:
            undo_permissions(db)
            db.execute("DELETE FROM wardian_schema WHERE version >= 9")
    assert permissions.recent(backend.open(), 10) == []
